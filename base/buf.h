/* A byte buffer with a hard cap (CONVENTIONS H11): appends past `max` fail with
 * -E2BIG. The first failure sticks in `err` and every later append does
 * nothing, so a long run of appends is checked once, at the end. The bytes
 * are always followed by a NUL (not counted in len), so text stays a C
 * string. Any thread; a buffer has one owner at a time. */
#ifndef BASE_BUF_H
#define BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct base_buf {
	char *data;             /* NULL until the first append */
	size_t len, cap, max;
	int err;                /* 0, -E2BIG or -ENOMEM: the first failure */
};

/* An empty buffer of at most max bytes. */
void base_buf_init(struct base_buf *b, size_t max);
/* Frees the bytes; the buffer is empty (max kept, err cleared). NULL-safe. */
void base_buf_free(struct base_buf *b);
/* Makes room for n more bytes. Returns 0 or the buffer's error. */
int base_buf_reserve(struct base_buf *b, size_t n);
/* Appends. Each returns 0 or the buffer's error. */
int base_buf_put(struct base_buf *b, const void *p, size_t n);
int base_buf_byte(struct base_buf *b, uint8_t c);
int base_buf_str(struct base_buf *b, const char *s);
/* v in decimal (signed: a leading '-'), and in hexadecimal with "0x" as
 * printf's %#x writes it ("0" for 0): a text format's numbers without the
 * cost of parsing a format, where a dump writes millions of them. */
int base_buf_i64(struct base_buf *b, int64_t v);
int base_buf_hex(struct base_buf *b, uint64_t v);
int base_buf_printf(struct base_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int base_buf_vprintf(struct base_buf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
/* Hands the bytes over (the caller frees them with base_free; never NULL
 * when it returns 0) and empties the buffer. Returns 0 or the buffer's
 * error (the bytes are then freed). */
int base_buf_take(struct base_buf *b, char **out, size_t *len);

#endif
