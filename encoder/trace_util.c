/* The trace writers' shared helpers (see trace_util.h): varints and
 * JSON strings over a base_buf, the string table (copies in a dense array
 * in order of first sight, found again through a base_map) and the
 * per-thread buckets of events. Any thread; each object has one owner. */
#include "encoder/trace_util.h"

#include <errno.h>
#include <string.h>

#include "base/array.h"
#include "base/buf.h"
#include "base/mem.h"

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

void enc__ob_uvarint(struct base_buf *ob, uint64_t v)
{
	uint8_t b[10];

	base_buf_put(ob, b, enc__uvarint(b, v));
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

void enc__ob_json_str(struct base_buf *ob, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");

	while (*s) {
		size_t n = utf8_len(s);

		if (!n) {
			base_buf_put(ob, "\xef\xbf\xbd", 3);   /* U+FFFD */
			s++;
		} else if (*s == '<' || *s == '>' || *s == '&') {
			base_buf_printf(ob, "\\u%04x", *s++);   /* safe inside an HTML <script> */
		} else if (*s == '"' || *s == '\\') {
			base_buf_byte(ob, '\\');
			base_buf_byte(ob, *s++);
		} else if (*s < 0x20) {
			base_buf_printf(ob, "\\u%04x", *s++);
		} else {
			base_buf_put(ob, s, n);
			s += n;
		}
	}
}

/* What the index's equality callback compares with. */
struct strtab_key {
	const struct enc__strtab *t;
	const char *s;
};

static int strtab_eq(const void *arg, uint64_t i)
{
	const struct strtab_key *k = arg;

	return !strcmp(k->t->strs[i], k->s);
}

uint64_t enc__strtab_id(struct enc__strtab *t, const char *s, int *fresh)
{
	struct strtab_key k = { t, s };
	uint64_t h, *i;
	int err;

	*fresh = 0;
	if (!s || !*s)
		return 0;
	h = base_hash_str(s);
	if ((i = base_map_find(&t->index, h, strtab_eq, &k)))
		return *i + 1;
	if ((err = BASE_ARRAY_RESERVE(t->strs, t->cap, t->n + 1)))
		goto fail;
	/* A copy: callers build names in buffers of their own. */
	if (!(t->strs[t->n] = base_strdup(s))) {
		err = -ENOMEM;
		goto fail;
	}
	if ((err = base_map_add(&t->index, h, t->n))) {
		base_free(t->strs[t->n]);
		goto fail;
	}
	*fresh = 1;
	return ++t->n;
fail:
	/* The first failure stays: a later success must not hide it. */
	if (!t->err)
		t->err = err;
	return 0;
}

void enc__strtab_free(struct enc__strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		base_free(t->strs[i]);
	base_free(t->strs);
	base_map_free(&t->index);
	*t = (struct enc__strtab){ 0 };
}

int enc__buckets_by_thread(struct enc__buckets *b, const struct enc_trace *tr)
{
	size_t nb = tr->nthreads ? tr->nthreads : 1, *fill;

	b->first = base_calloc(nb + 1, sizeof(*b->first));
	b->ev = base_calloc(tr->nevents + 1, sizeof(*b->ev));
	fill = base_calloc(nb + 1, sizeof(*fill));
	if (!b->first || !b->ev || !fill) {
		base_free(fill);
		return -ENOMEM;
	}
	for (size_t i = 0; i < tr->nevents; i++) {
		const struct enc_trace_event *e = &tr->events[i];
		size_t th = e->kind == ENC_TR_RSS ? 0 : e->thread;

		if ((e->kind != ENC_TR_RSS && e->thread >= tr->nthreads) ||
		    (e->stack >= 0 && (size_t)e->stack >= tr->nstacks)) {
			base_free(fill);
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
	base_free(fill);
	return 0;
}

void enc__buckets_free(struct enc__buckets *b)
{
	base_free(b->ev);
	base_free(b->first);
	b->ev = NULL;
	b->first = NULL;
}
