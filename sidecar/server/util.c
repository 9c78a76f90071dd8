/* The sidecar's small helpers (see util.h): pure functions of their
 * arguments, owning nothing. Any thread. */
#include "sidecar/server/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

int sc_html_escape(struct base_buf *b, const char *s)
{
	while (*s) {
		size_t plain = strcspn(s, "&<>\"'");

		base_buf_put(b, s, plain);
		s += plain;
		switch (*s) {
		case '&': base_buf_str(b, "&amp;"); break;
		case '<': base_buf_str(b, "&lt;"); break;
		case '>': base_buf_str(b, "&gt;"); break;
		case '"': base_buf_str(b, "&#34;"); break;
		case '\'': base_buf_str(b, "&#39;"); break;
		default: return b->err;   /* the end of s */
		}
		s++;
	}
	return b->err;
}

int sc_parse_u64(const char **cur, int base, uint64_t max, uint64_t *out)
{
	const char *s = *cur;
	char *end;
	unsigned long long v;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno == ERANGE || v > max)
		return -ERANGE;
	if (end == s)
		return -EINVAL;
	*out = v;
	*cur = end;
	return 0;
}

int sc_parse_go_int(const char *s, int64_t *out)
{
	const char *p = s;
	uint64_t v;
	int neg = 0, err;

	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	err = sc_parse_u64(&p, 10, neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, &v);
	if (err)
		return err;
	if (*p)
		return -EINVAL;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

int sc_parse_hostport(const char *s, char *host, size_t hlen, int *port)
{
	const char *colon = strrchr(s, ':');
	const char *p;
	uint64_t v;
	size_t n;

	if (!colon)
		return -EINVAL;
	p = colon + 1;
	if (sc_parse_u64(&p, 10, 65535, &v) || *p)
		return -EINVAL;
	*port = (int)v;
	n = (size_t)(colon - s);
	if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
		s++;
		n -= 2;
	} else if (memchr(s, ':', n)) {
		return -EINVAL;   /* a bare IPv6 address needs brackets */
	}
	if (n >= hlen)
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	if (!n)
		snprintf(host, hlen, "0.0.0.0");
	else if (!strcmp(host, "localhost"))
		snprintf(host, hlen, "127.0.0.1");
	return 0;
}

int sc_hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

const char *sc_strerror(int err)
{
	return strerror(err < 0 ? -err : err);
}
