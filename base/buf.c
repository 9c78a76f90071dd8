/* The capped byte buffer (see buf.h): owns its bytes until they are
 * taken. Any thread; a buffer has one owner at a time. */
#include "base/buf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"

void base_buf_init(struct base_buf *b, size_t max)
{
	*b = (struct base_buf){ .max = max };
}

void base_buf_free(struct base_buf *b)
{
	if (!b)
		return;
	base_free(b->data);
	*b = (struct base_buf){ .max = b->max };
}

int base_buf_reserve(struct base_buf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 256;
	char *p;

	if (b->err)
		return b->err;
	if (n > b->max || b->len > b->max - n)
		return b->err = -E2BIG;
	if (b->len + n + 1 <= b->cap)
		return 0;
	while (cap < b->len + n + 1)
		cap *= 2;
	if (cap > b->max + 1)
		cap = b->max + 1;
	if (!(p = base_realloc(b->data, cap)))
		return b->err = -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int base_buf_put(struct base_buf *b, const void *p, size_t n)
{
	int err = base_buf_reserve(b, n);

	if (err)
		return err;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int base_buf_byte(struct base_buf *b, uint8_t c)
{
	return base_buf_put(b, &c, 1);
}

int base_buf_str(struct base_buf *b, const char *s)
{
	return base_buf_put(b, s, strlen(s));
}

int base_buf_i64(struct base_buf *b, int64_t v)
{
	char tmp[24], *p = tmp + sizeof(tmp);
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

	do
		*--p = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--p = '-';
	return base_buf_put(b, p, (size_t)(tmp + sizeof(tmp) - p));
}

int base_buf_hex(struct base_buf *b, uint64_t v)
{
	char tmp[24], *p = tmp + sizeof(tmp);

	if (!v)
		return base_buf_byte(b, '0');
	do
		*--p = "0123456789abcdef"[v & 15];
	while (v >>= 4);
	*--p = 'x';
	*--p = '0';
	return base_buf_put(b, p, (size_t)(tmp + sizeof(tmp) - p));
}

int base_buf_vprintf(struct base_buf *b, const char *fmt, va_list ap)
{
	va_list again;
	size_t room;
	int n;

	if (b->err)
		return b->err;
	/* Most appends fit in what is left: format once, and again only when
	 * it did not. */
	room = b->data ? b->cap - b->len : 0;
	va_copy(again, ap);
	n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap);
	if (n < 0) {
		va_end(again);
		return b->err = -EINVAL;
	}
	if ((size_t)n < room && b->len + (size_t)n <= b->max) {
		b->len += (size_t)n;
		va_end(again);
		return 0;
	}
	if (room)
		b->data[b->len] = '\0';   /* what the first try wrote is not kept */
	if (!base_buf_reserve(b, (size_t)n)) {
		vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
		b->len += (size_t)n;
	}
	va_end(again);
	return b->err;
}

int base_buf_printf(struct base_buf *b, const char *fmt, ...)
{
	va_list ap;
	int err;

	va_start(ap, fmt);
	err = base_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return err;
}

int base_buf_take(struct base_buf *b, char **out, size_t *len)
{
	int err = b->err;

	*out = NULL;
	*len = 0;
	if (!err && !b->data && !(b->data = base_calloc(1, 1)))
		err = -ENOMEM;
	if (err) {
		base_buf_free(b);
		return err;
	}
	*out = b->data;
	*len = b->len;
	*b = (struct base_buf){ .max = b->max };
	return 0;
}
