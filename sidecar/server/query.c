/* Go's net/http/pprof parameter rules (see query.h): pure functions of the
 * query text, but for sc_query_pid, which also reads /proc. Owns nothing.
 * Any thread. */
#include "sidecar/server/query.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrace/proc/proc.h"
#include "sidecar/server/util.h"

int sc_query_get(const char *q, const char *key, char *out, size_t len)
{
	size_t klen = strlen(key);

	while (q && *q) {
		const char *amp = strchr(q, '&'), *end = amp ? amp : q + strlen(q);
		const char *eq = memchr(q, '=', (size_t)(end - q));
		const char *kend = eq ? eq : end;

		if ((size_t)(kend - q) == klen && !memcmp(q, key, klen)) {
			size_t w = 0;

			for (const char *r = eq ? eq + 1 : end; r < end; r++) {
				int ch = *r;

				if (ch == '+') {
					ch = ' ';
				} else if (ch == '%' && end - r >= 3 && sc_hexval(r[1]) >= 0 &&
					   sc_hexval(r[2]) >= 0) {
					ch = sc_hexval(r[1]) * 16 + sc_hexval(r[2]);
					r += 2;
				}
				if (ch == 0)
					return -EINVAL;   /* %00 would cut the value short */
				if (w + 1 >= len)
					return -E2BIG;
				out[w++] = (char)ch;
			}
			out[w] = '\0';
			return 1;
		}
		q = amp ? amp + 1 : NULL;
	}
	return 0;
}

int sc_parse_profile_seconds(const char *query)
{
	char v[64];
	int64_t s;

	if (sc_query_get(query, "seconds", v, sizeof(v)) != 1 || sc_parse_go_int(v, &s) || s <= 0)
		return 30;
	return s > INT32_MAX ? INT32_MAX : (int)s;
}

int sc_query_format(const char *query, enum sc_format *out)
{
	static const char *const names[] = { "", "flamegraph", "speedscope", "collapsed" };
	char v[16];
	int rc = sc_query_get(query, "format", v, sizeof(v));

	*out = SC_FORMAT_PPROF;
	if (rc == 0 || (rc > 0 && !v[0]))
		return 0;   /* absent, or empty: Go's own */
	for (int i = 1; rc > 0 && i < 4; i++)
		if (!strcmp(v, names[i])) {
			*out = (enum sc_format)i;
			return 0;
		}
	return -1;
}

int64_t sc_query_debug(const char *query)
{
	char v[32];
	int64_t debug;
	enum sc_format f;

	if (!sc_query_format(query, &f) && f != SC_FORMAT_PPROF)
		return 0;

	/* A value longer than v reads as 0: only leading zeros could make it
	 * a number Atoi takes, and podprof has always answered those so. */
	if (sc_query_get(query, "debug", v, sizeof(v)) != 1 || sc_parse_go_int(v, &debug))
		return 0;
	return debug;
}

int sc_query_hz(const char *query, int dflt, int *out)
{
	char v[64];
	int64_t hz;
	int rc = sc_query_get(query, "hz", v, sizeof(v));

	if (rc == 0) {
		*out = dflt;
		return 0;
	}
	if (rc < 0 || sc_parse_go_int(v, &hz) || hz < 1 || hz > 1000)
		return -EINVAL;
	*out = (int)hz;
	return 0;
}

int sc_query_pid(const char *query, pid_t dflt, pid_t *out, char *msg, size_t len)
{
	char v[32], path[64], buf[1024];
	struct pt_stat st;
	int64_t pid;
	int rc = sc_query_get(query, "pid", v, sizeof(v));

	*out = 0;
	if (rc == 0) {
		*out = dflt;
		return 0;
	}
	if (rc < 0 || sc_parse_go_int(v, &pid) || pid <= 0 || pid > INT32_MAX) {
		snprintf(msg, len, "invalid value for \"pid\" - must be a positive integer");
		return -EINVAL;
	}
	if (pid == getpid()) {
		snprintf(msg, len, "pid is podprof itself");
		return -EINVAL;
	}
	/* A zombie has no threads left to trace: as good as gone. */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, &st) ||
	    st.state == 'Z' || st.state == 'X') {
		snprintf(msg, len, "no process with pid %d in this pod", (int)pid);
		return -ESRCH;
	}
	if (st.flags & PT_PF_KTHREAD) {
		snprintf(msg, len, "pid %d is a kernel thread", (int)pid);
		return -EINVAL;
	}
	*out = (pid_t)pid;
	return 0;
}

int sc_parse_symbol_addrs(const char *s, size_t len, uint64_t *out, size_t max)
{
	size_t n = 0, i = 0;

	while (i < len) {
		char word[40];
		size_t w = 0;
		const char *p;
		int base = 10;

		while (i < len && s[i] != '+') {
			if (w + 1 >= sizeof(word))
				return -EINVAL;
			word[w++] = s[i++];
		}
		i++;   /* skip '+' */
		word[w] = '\0';
		if (!w)
			continue;
		p = word;
		/* strconv.ParseUint(word, 0, 64): 0x hex, 0o/0 octal, 0b binary. */
		if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
			base = 16;
			p += 2;
		} else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B')) {
			base = 2;
			p += 2;
		} else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O')) {
			base = 8;
			p += 2;
		} else if (p[0] == '0' && p[1]) {
			base = 8;
		}
		if (!*p || sc_hexval(*p) < 0 || sc_hexval(*p) >= base)
			return -EINVAL;
		if (n == max)
			return -E2BIG;
		if (sc_parse_u64(&p, base, UINT64_MAX, &out[n]) || *p)
			return -EINVAL;
		n++;
	}
	return (int)n;
}

int sc_query_delta_seconds(const char *query)
{
	char v[64];
	int64_t s;
	int rc = sc_query_get(query, "seconds", v, sizeof(v));

	if (rc == 0)
		return 0;
	if (rc < 0 || sc_parse_go_int(v, &s) || s <= 0)
		return -EINVAL;
	return s > INT32_MAX ? INT32_MAX : (int)s;
}

double sc_query_trace_seconds(const char *query)
{
	char v[64], *end;
	double s;

	if (sc_query_get(query, "seconds", v, sizeof(v)) != 1 || !v[0])
		return 1;
	errno = 0;
	s = strtod(v, &end);
	/* ParseFloat takes no leading space, and nan/inf are no durations. */
	if (errno == EINVAL || *end || v[0] == ' ' || !(s > 0))
		return 1;
	return s;
}
