#include "encoder/trace_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void enc__ob_init(struct enc__ob *ob, size_t max)
{
	*ob = (struct enc__ob){ .max = max };
}

static int ob_room(struct enc__ob *ob, size_t n)
{
	size_t cap = ob->cap ? ob->cap : 4096;
	uint8_t *p;

	if (ob->err)
		return ob->err;
	if (n > ob->max || ob->len > ob->max - n)
		return ob->err = -E2BIG;
	if (ob->len + n <= ob->cap)
		return 0;
	while (cap < ob->len + n)
		cap *= 2;
	if (cap > ob->max)
		cap = ob->max;
	p = realloc(ob->data, cap);
	if (!p)
		return ob->err = -ENOMEM;
	ob->data = p;
	ob->cap = cap;
	return 0;
}

void enc__ob_put(struct enc__ob *ob, const void *p, size_t n)
{
	if (!n || ob_room(ob, n))
		return;
	memcpy(ob->data + ob->len, p, n);
	ob->len += n;
}

void enc__ob_byte(struct enc__ob *ob, uint8_t b)
{
	enc__ob_put(ob, &b, 1);
}

size_t enc__uvarint(uint8_t *buf, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		buf[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	buf[n++] = (uint8_t)v;
	return n;
}

void enc__ob_uvarint(struct enc__ob *ob, uint64_t v)
{
	uint8_t b[10];

	enc__ob_put(ob, b, enc__uvarint(b, v));
}

void enc__ob_printf(struct enc__ob *ob, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(small)) {
		enc__ob_put(ob, small, (size_t)n);
		return;
	}
	if (ob_room(ob, (size_t)n + 1))
		return;
	va_start(ap, fmt);
	vsnprintf((char *)ob->data + ob->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	ob->len += (size_t)n;
}

/* Length of the UTF-8 sequence at s (1..4), or 0 if it is not one. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 :
		   (s[0] & 0xf8) == 0xf0 ? 4 : 0;

	if (n == 2 && s[0] < 0xc2)
		return 0;   /* overlong */
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

void enc__ob_json_str(struct enc__ob *ob, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");

	while (*s) {
		size_t n = utf8_len(s);

		if (!n) {
			enc__ob_put(ob, "\xef\xbf\xbd", 3);   /* U+FFFD */
			s++;
		} else if (*s == '"' || *s == '\\') {
			enc__ob_byte(ob, '\\');
			enc__ob_byte(ob, *s++);
		} else if (*s < 0x20) {
			enc__ob_printf(ob, "\\u%04x", *s++);
		} else {
			enc__ob_put(ob, s, n);
			s += n;
		}
	}
}

int enc__ob_finish(struct enc__ob *ob, uint8_t **out, size_t *len)
{
	if (ob->err)
		return ob->err;
	*out = ob->data ? ob->data : malloc(1);
	if (!*out)
		return -ENOMEM;
	*len = ob->len;
	ob->data = NULL;
	ob->len = ob->cap = 0;
	return 0;
}

void enc__ob_free(struct enc__ob *ob)
{
	free(ob->data);
	ob->data = NULL;
}

static uint64_t str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
	return h;
}

static int strtab_grow(struct enc__strtab *t)
{
	size_t cap = t->cap ? t->cap * 2 : 256;
	const char **keys = calloc(cap, sizeof(*keys));
	uint32_t *ids = calloc(cap, sizeof(*ids));

	if (!keys || !ids) {
		free(keys);
		free(ids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->cap; i++) {
		size_t j;

		if (!t->keys[i])
			continue;
		for (j = str_hash(t->keys[i]) & (cap - 1); keys[j]; j = (j + 1) & (cap - 1)) {
		}
		keys[j] = t->keys[i];
		ids[j] = t->ids[i];
	}
	free(t->keys);
	free(t->ids);
	t->keys = keys;
	t->ids = ids;
	t->cap = cap;
	return 0;
}

uint64_t enc__strtab_id(struct enc__strtab *t, const char *s, int *fresh)
{
	size_t j;

	*fresh = 0;
	if (!s || !*s)
		return 0;
	if ((t->used + 1) * 2 > t->cap && (t->err = strtab_grow(t)))
		return 0;
	for (j = str_hash(s) & (t->cap - 1); t->keys[j]; j = (j + 1) & (t->cap - 1))
		if (!strcmp(t->keys[j], s))
			return t->ids[j];
	/* A copy: callers build names in buffers of their own. */
	if (!(t->keys[j] = strdup(s))) {
		t->err = -ENOMEM;
		return 0;
	}
	t->ids[j] = (uint32_t)++t->used;
	*fresh = 1;
	return t->ids[j];
}

void enc__strtab_free(struct enc__strtab *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free((char *)t->keys[i]);
	free(t->keys);
	free(t->ids);
	*t = (struct enc__strtab){ 0 };
}

static size_t u64_slot(uint64_t k, size_t cap)
{
	return (size_t)((k * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

int enc__u64map_get(const struct enc__u64map *m, uint64_t k, uint64_t *v)
{
	if (!m->cap)
		return 0;
	for (size_t j = u64_slot(k, m->cap); m->keys[j]; j = (j + 1) & (m->cap - 1))
		if (m->keys[j] == k + 1) {
			*v = m->vals[j];
			return 1;
		}
	return 0;
}

static int u64map_grow(struct enc__u64map *m)
{
	struct enc__u64map n = { .cap = m->cap ? m->cap * 2 : 64 };

	n.keys = calloc(n.cap, sizeof(*n.keys));
	n.vals = calloc(n.cap, sizeof(*n.vals));
	if (!n.keys || !n.vals) {
		enc__u64map_free(&n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i]) {
			size_t j;

			for (j = u64_slot(m->keys[i] - 1, n.cap); n.keys[j]; j = (j + 1) & (n.cap - 1)) {
			}
			n.keys[j] = m->keys[i];
			n.vals[j] = m->vals[i];
		}
	n.used = m->used;
	enc__u64map_free(m);
	*m = n;
	return 0;
}

int enc__u64map_put(struct enc__u64map *m, uint64_t k, uint64_t v)
{
	size_t j;

	if ((m->used + 1) * 2 > m->cap && u64map_grow(m))
		return -ENOMEM;
	for (j = u64_slot(k, m->cap); m->keys[j]; j = (j + 1) & (m->cap - 1))
		if (m->keys[j] == k + 1)
			break;
	if (!m->keys[j])
		m->used++;
	m->keys[j] = k + 1;
	m->vals[j] = v;
	return 0;
}

void enc__u64map_free(struct enc__u64map *m)
{
	free(m->keys);
	free(m->vals);
	*m = (struct enc__u64map){ 0 };
}

int enc__buckets_by_thread(struct enc__buckets *b, const struct enc_trace *tr)
{
	size_t nb = tr->nthreads ? tr->nthreads : 1, *fill;

	b->first = calloc(nb + 1, sizeof(*b->first));
	b->ev = calloc(tr->nevents + 1, sizeof(*b->ev));
	fill = calloc(nb + 1, sizeof(*fill));
	if (!b->first || !b->ev || !fill) {
		free(fill);
		return -ENOMEM;
	}
	for (size_t i = 0; i < tr->nevents; i++) {
		const struct enc_trace_event *e = &tr->events[i];
		size_t th = e->kind == ENC_TR_RSS ? 0 : e->thread;

		if ((e->kind != ENC_TR_RSS && e->thread >= tr->nthreads) ||
		    (e->stack >= 0 && (size_t)e->stack >= tr->nstacks)) {
			free(fill);
			return -EINVAL;
		}
		b->first[th + 1]++;
	}
	for (size_t i = 0; i < nb; i++)
		b->first[i + 1] += b->first[i];
	/* Stable: each thread's events keep their order, then an insertion
	 * sort by time (nearly sorted already: only a few are placed back). */
	for (size_t i = 0; i < tr->nevents; i++) {
		const struct enc_trace_event *e = &tr->events[i];
		size_t th = e->kind == ENC_TR_RSS ? 0 : e->thread;
		size_t at = b->first[th] + fill[th]++;

		while (at > b->first[th] && tr->events[b->ev[at - 1]].t_ns > e->t_ns) {
			b->ev[at] = b->ev[at - 1];
			at--;
		}
		b->ev[at] = (uint32_t)i;
	}
	free(fill);
	return 0;
}

void enc__buckets_free(struct enc__buckets *b)
{
	free(b->ev);
	free(b->first);
	b->ev = NULL;
	b->first = NULL;
}
