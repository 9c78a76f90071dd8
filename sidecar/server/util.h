/* Small helpers shared by the sidecar: HTML escaping, number parsing,
 * error strings and clocks. Any thread may call them. */
#ifndef SC_UTIL_H
#define SC_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define SC_CONTAINER_OF(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#define SC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct base_buf;

/* Appends `s` to b with &<>"' escaped for HTML. Returns 0 or the buffer's
 * error, which sticks (base/buf.h). */
int sc_html_escape(struct base_buf *b, const char *s);

/* Parses an unsigned decimal (or 0x hex when `base` is 0) number at *cur,
 * advancing *cur past it. Returns 0, -EINVAL (no digits) or -ERANGE (> max). */
int sc_parse_u64(const char **cur, int base, uint64_t max, uint64_t *out);

/* Go's strconv.ParseInt(s, 10, 64) on the whole string: optional sign, digits,
 * nothing else. Returns 0, -EINVAL or -ERANGE. */
int sc_parse_go_int(const char *s, int64_t *out);

/* Splits "HOST:PORT" into a numeric host ("" and "localhost" become
 * 0.0.0.0 and 127.0.0.1; "[v6]" loses its brackets) and a port 0..65535.
 * Returns 0 or -EINVAL. Does not resolve names. */
int sc_parse_hostport(const char *s, char *host, size_t hlen, int *port);

/* Value of a hex digit, or -1. */
int sc_hexval(int ch);

const char *sc_strerror(int err);

#endif
