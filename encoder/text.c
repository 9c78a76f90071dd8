#include "encoder/text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The output under construction: capped, and dead after its first
 * failure, so a text past the cap stops costing formatting time. */
struct out {
	char *data;
	size_t len, cap, max;
	int err;
};

static int reserve(struct out *o, size_t n)
{
	size_t cap;
	char *p;

	if (o->err)
		return o->err;
	if (n > o->max || o->len > o->max - n)
		return o->err = -E2BIG;
	if (o->len + n + 1 <= o->cap)
		return 0;
	cap = o->cap ? o->cap : 4096;
	while (cap < o->len + n + 1)
		cap *= 2;
	if (cap > o->max + 1)
		cap = o->max + 1;
	p = realloc(o->data, cap);
	if (!p)
		return o->err = -ENOMEM;
	o->data = p;
	o->cap = cap;
	return 0;
}

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->err)
		return;
	/* Most lines fit in what is left: format once, and again only when not. */
	va_start(ap, fmt);
	n = vsnprintf(o->data ? o->data + o->len : NULL, o->data ? o->cap - o->len : 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		o->err = -EINVAL;
		return;
	}
	if (o->data && o->len + (size_t)n < o->cap && o->len + (size_t)n <= o->max) {
		o->len += (size_t)n;
		return;
	}
	if (reserve(o, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(o->data + o->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	o->len += (size_t)n;
}

static int finish(struct out *o, char **out, size_t *len)
{
	if (!o->err && !o->data)
		reserve(o, 0);   /* an empty text is still a buffer the caller frees */
	if (o->err) {
		free(o->data);
		return o->err;
	}
	o->data[o->len] = '\0';   /* text: a C string too, for whoever wants one */
	*out = o->data;
	*len = o->len;
	return 0;
}

/* "file +0xoff" of a frame's mapping, "file:line" of source code (as Go
 * prints its own frames), or "?" for anonymous memory. */
static void put_where(struct out *o, const struct enc_text_loc *l)
{
	if (l->file && l->line > 0)
		put(o, "%s:%" PRId64, l->file, l->line);
	else if (l->file)
		put(o, "%s +%#" PRIx64, l->file, l->file_off);
	else
		put(o, "?");
}

static int cmp_id(const void *a, const void *b)
{
	const struct enc_text_stack *x = *(const struct enc_text_stack *const *)a;
	const struct enc_text_stack *y = *(const struct enc_text_stack *const *)b;

	return (x->id > y->id) - (x->id < y->id);
}

int enc_text_dump_encode(const struct enc_text_profile *p, size_t max, char **out, size_t *len)
{
	const struct enc_text_stack **order;
	struct out o = { .max = max };

	*out = NULL;
	order = calloc(p->nstacks + 1, sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < p->nstacks; i++)
		order[i] = &p->stacks[i];
	qsort(order, p->nstacks, sizeof(*order), cmp_id);
	for (size_t i = 0; i < p->nstacks && !o.err; i++) {
		const struct enc_text_stack *s = order[i];

		put(&o, "goroutine %" PRId64 " [%s", s->id, s->state);
		if (s->syscall)
			put(&o, ", syscall %s", s->syscall);
		put(&o, ", thread \"%s\"]:\n", s->thread);
		if (!s->n)
			put(&o, "(stack not captured)\n");
		for (uint32_t k = 0; k < s->n; k++) {
			const struct enc_text_loc *l = &p->locs[s->locs[k]];

			put(&o, "%s(...)\n\t", l->name);
			put_where(&o, l);
			put(&o, "\n");
		}
		put(&o, "\n");
	}
	free(order);
	return finish(&o, out, len);
}

struct group {
	const struct enc_text_stack *s;
	int64_t count, weight;
};

/* Stacks are the same when their addresses are: names follow from them. */
static int cmp_stack(const struct enc_text_profile *p, const struct enc_text_stack *x,
		     const struct enc_text_stack *y)
{
	for (uint32_t k = 0; k < x->n && k < y->n; k++) {
		uint64_t a = p->locs[x->locs[k]].addr, c = p->locs[y->locs[k]].addr;

		if (a != c)
			return a < c ? -1 : 1;
	}
	return (x->n > y->n) - (x->n < y->n);
}

static int cmp_order(const void *a, const void *b, void *p)
{
	return cmp_stack(p, *(const struct enc_text_stack *const *)a,
			 *(const struct enc_text_stack *const *)b);
}

static int cmp_group(const void *a, const void *b, void *p)
{
	const struct group *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return cmp_stack(p, x->s, y->s);
}

/* Sorts the stacks so that equal ones are neighbours, then merges them:
 * Go's printCountProfile groups by stack the same way. On success *gout
 * (the caller frees it) holds *ng groups, by count. Returns 0 or -ENOMEM. */
static int group_stacks(const struct enc_text_profile *p, struct group **gout, size_t *ngout)
{
	const struct enc_text_stack **order = calloc(p->nstacks + 1, sizeof(*order));
	struct group *g = calloc(p->nstacks + 1, sizeof(*g));
	size_t ng = 0;

	*gout = NULL;
	if (!order || !g) {
		free(order);
		free(g);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->nstacks; i++)
		order[i] = &p->stacks[i];
	qsort_r(order, p->nstacks, sizeof(*order), cmp_order, (void *)p);
	for (size_t i = 0; i < p->nstacks; i++) {
		if (ng && !cmp_stack(p, g[ng - 1].s, order[i])) {
			g[ng - 1].count += order[i]->count;
			g[ng - 1].weight += order[i]->weight;
		} else {
			g[ng++] = (struct group){ order[i], order[i]->count, order[i]->weight };
		}
	}
	qsort_r(g, ng, sizeof(*g), cmp_group, (void *)p);
	free(order);
	*gout = g;
	*ngout = ng;
	return 0;
}

/* A stack as Go's texts print it: " @ pc pc ...", then a "#" line per
 * frame. */
static void put_stack(struct out *o, const struct enc_text_profile *p, const struct enc_text_stack *s)
{
	put(o, " @");
	for (uint32_t k = 0; k < s->n; k++)
		put(o, " %#" PRIx64, p->locs[s->locs[k]].addr);
	put(o, "\n");
	for (uint32_t k = 0; k < s->n; k++) {
		const struct enc_text_loc *l = &p->locs[s->locs[k]];

		put(o, "#\t%#" PRIx64 "\t%s\t", l->addr, l->name);
		put_where(o, l);
		put(o, "\n");
	}
}

int enc_text_count_encode(const struct enc_text_profile *p, size_t max, char **out, size_t *len)
{
	struct out o = { .max = max };
	struct group *g;
	size_t ng;
	int err;

	*out = NULL;
	if ((err = group_stacks(p, &g, &ng)))
		return err;
	put(&o, "%s profile: total %zu\n", p->name, p->nstacks);
	for (size_t i = 0; i < ng && !o.err; i++) {
		put(&o, "%" PRId64, g[i].count);
		put_stack(&o, p, g[i].s);
		put(&o, "\n");
	}
	free(g);
	return finish(&o, out, len);
}

static int cmp_weight(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	return (x->weight < y->weight) - (x->weight > y->weight);
}

int enc_text_contention_encode(const struct enc_text_profile *p, const char *kind, size_t max,
			       char **out, size_t *len)
{
	struct out o = { .max = max };
	struct group *g;
	size_t ng;
	int err;

	*out = NULL;
	if ((err = group_stacks(p, &g, &ng)))
		return err;
	qsort(g, ng, sizeof(*g), cmp_weight);
	/* Delays are nanoseconds: a "cycle" here is a nanosecond. */
	put(&o, "--- %s:\ncycles/second=1000000000\n", kind);
	if (!strcmp(kind, "mutex"))
		put(&o, "sampling period=1\n");
	for (size_t i = 0; i < ng && !o.err; i++) {
		put(&o, "%" PRId64 " %" PRId64, g[i].weight, g[i].count);
		put_stack(&o, p, g[i].s);
	}
	free(g);
	return finish(&o, out, len);
}
