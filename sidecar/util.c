#include "sidecar/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sc_buf_init(struct sc_buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
	b->err = 0;
}

void sc_buf_free(struct sc_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static int reserve(struct sc_buf *b, size_t n)
{
	size_t want, cap;
	char *p;

	if (n > b->max || b->len > b->max - n)
		return b->err = -E2BIG;
	want = b->len + n + 1; /* room for a NUL so text stays a C string */
	if (want <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < want)
		cap *= 2;
	if (cap > b->max + 1)
		cap = b->max + 1;
	p = realloc(b->data, cap);
	if (!p)
		return b->err = -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int sc_buf_append(struct sc_buf *b, const void *p, size_t n)
{
	int err = reserve(b, n);

	if (err)
		return err;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int sc_buf_printf(struct sc_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, err;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	err = reserve(b, (size_t)n);
	if (err)
		return err;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int sc_buf_html(struct sc_buf *b, const char *s)
{
	int err = 0;

	for (; *s && !err; s++) {
		switch (*s) {
		case '&': err = sc_buf_append(b, "&amp;", 5); break;
		case '<': err = sc_buf_append(b, "&lt;", 4); break;
		case '>': err = sc_buf_append(b, "&gt;", 4); break;
		case '"': err = sc_buf_append(b, "&#34;", 5); break;
		case '\'': err = sc_buf_append(b, "&#39;", 5); break;
		default: err = sc_buf_append(b, s, 1); break;
		}
	}
	return err;
}

char *sc_buf_steal(struct sc_buf *b, size_t *len)
{
	char *p = b->data;

	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
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
