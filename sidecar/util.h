/* Small helpers shared by the sidecar: bounded buffers, number parsing,
 * error strings and clocks. Any thread may call them. */
#ifndef SC_UTIL_H
#define SC_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define SC_CONTAINER_OF(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#define SC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* A growable byte buffer with a hard cap (STYLE H11). `max` must be set by
 * sc_buf_init(); appends past it fail with -E2BIG and leave the buffer as it
 * was. `err` keeps the first failure, so a long run of appends can be
 * checked once at the end. */
struct sc_buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max;
	int err;
};

void sc_buf_init(struct sc_buf *b, size_t max);
void sc_buf_free(struct sc_buf *b);
/* Returns 0, -E2BIG past the cap, or -ENOMEM. */
int sc_buf_append(struct sc_buf *b, const void *p, size_t n);
int sc_buf_printf(struct sc_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Appends `s` with &<>"' escaped for HTML. */
int sc_buf_html(struct sc_buf *b, const char *s);
/* Hands the bytes to the caller (who frees them) and empties the buffer. */
char *sc_buf_steal(struct sc_buf *b, size_t *len);

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
