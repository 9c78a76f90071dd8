/* Go's legacy text profiles (see text.h): each call groups or sorts the
 * stacks it is given and prints them into a capped buffer of its own, dead
 * after its first failure so that a text past the cap stops costing
 * formatting time. Any thread; no shared state. */
#include "encoder/text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"

/* "file +0xoff" of a frame's mapping, "file:line" of source code (as Go
 * prints its own frames), or "?" for anonymous memory. */
static void put_where(struct base_buf *o, const struct enc_text_loc *l)
{
	if (l->file && l->line > 0)
		base_buf_printf(o, "%s:%" PRId64, l->file, l->line);
	else if (l->file)
		base_buf_printf(o, "%s +%#" PRIx64, l->file, l->file_off);
	else
		base_buf_printf(o, "?");
}

/* A process name as Go's %q writes a string's contents: a name is the
 * process's to choose (prctl PR_SET_NAME), and a quote or a newline in it
 * must not end the label or the line. */
static void put_name(struct base_buf *o, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)(s ? s : "?"); *p; p++) {
		if (*p == '"' || *p == '\\')
			base_buf_printf(o, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			base_buf_printf(o, "\\x%02x", *p);
		else
			base_buf_printf(o, "%c", *p);
	}
}

/* The note's lines (enc_text_profile's), each "# podprof: <line>": Go's
 * text profiles skip lines that begin with '#'. */
static void put_note(struct base_buf *o, const char *note)
{
	while (note && *note) {
		const char *end = strchr(note, '\n');
		int n = end ? (int)(end - note) : (int)strlen(note);

		base_buf_printf(o, "# podprof: %.*s\n", n, note);
		note += n + !!end;
	}
}

static int cmp_id(const void *a, const void *b)
{
	const struct enc_text_stack *x = *(const struct enc_text_stack *const *)a;
	const struct enc_text_stack *y = *(const struct enc_text_stack *const *)b;

	if (x->pid != y->pid)
		return (x->pid > y->pid) - (x->pid < y->pid);
	return (x->id > y->id) - (x->id < y->id);
}

int enc_text_dump_encode(const struct enc_text_profile *p, size_t max, char **out, size_t *len)
{
	const struct enc_text_stack **order;
	struct base_buf o;

	*out = NULL;
	base_buf_init(&o, max);
	order = base_calloc(p->nstacks + 1, sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < p->nstacks; i++)
		order[i] = &p->stacks[i];
	qsort(order, p->nstacks, sizeof(*order), cmp_id);
	if (p->note && *p->note) {
		put_note(&o, p->note);
		base_buf_printf(&o, "\n");
	}
	for (size_t i = 0; i < p->nstacks && !o.err; i++) {
		const struct enc_text_stack *s = order[i];

		if (s->pid && (!i || order[i - 1]->pid != s->pid)) {
			base_buf_printf(&o, "process %" PRId64 " (", s->pid);
			put_name(&o, s->process);
			base_buf_printf(&o, "):\n\n");
		}
		base_buf_printf(&o, "goroutine %" PRId64 " [%s", s->id, s->state);
		if (s->syscall)
			base_buf_printf(&o, ", syscall %s", s->syscall);
		base_buf_printf(&o, ", thread \"%s\"]:\n", s->thread);
		if (!s->n)
			base_buf_printf(&o, "(stack not captured)\n");
		for (uint32_t k = 0; k < s->n; k++) {
			const struct enc_text_loc *l = &p->locs[s->locs[k]];

			base_buf_printf(&o, "%s(...)\n\t", l->name);
			put_where(&o, l);
			base_buf_printf(&o, "\n");
		}
		base_buf_printf(&o, "\n");
	}
	base_free(order);
	return base_buf_take(&o, out, len);
}

struct group {
	const struct enc_text_stack *s;
	int64_t count, weight;
};

/* Stacks are the same when their addresses are: names follow from them. */
static int cmp_stack(const struct enc_text_profile *p, const struct enc_text_stack *x,
		     const struct enc_text_stack *y)
{
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
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
	const struct enc_text_stack **order = base_calloc(p->nstacks + 1, sizeof(*order));
	struct group *g = base_calloc(p->nstacks + 1, sizeof(*g));
	size_t ng = 0;

	*gout = NULL;
	if (!order || !g) {
		base_free(order);
		base_free(g);
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
	base_free(order);
	*gout = g;
	*ngout = ng;
	return 0;
}

/* A stack as Go's texts print it: " @ pc pc ...", then a "#" line per
 * frame. */
static void put_stack(struct base_buf *o, const struct enc_text_profile *p,
		      const struct enc_text_stack *s)
{
	base_buf_printf(o, " @");
	for (uint32_t k = 0; k < s->n; k++)
		base_buf_printf(o, " %#" PRIx64, p->locs[s->locs[k]].addr);
	base_buf_printf(o, "\n");
	if (s->pid) {
		base_buf_printf(o, "# labels: {\"pid\":\"%" PRId64 "\", \"process\":\"", s->pid);
		put_name(o, s->process);
		base_buf_printf(o, "\"}\n");
	}
	for (uint32_t k = 0; k < s->n; k++) {
		const struct enc_text_loc *l = &p->locs[s->locs[k]];

		base_buf_printf(o, "#\t%#" PRIx64 "\t%s\t", l->addr, l->name);
		put_where(o, l);
		base_buf_printf(o, "\n");
	}
}

int enc_text_count_encode(const struct enc_text_profile *p, size_t max, char **out, size_t *len)
{
	struct base_buf o;
	struct group *g;
	int64_t total;
	size_t ng;
	int err;

	*out = NULL;
	base_buf_init(&o, max);
	if ((err = group_stacks(p, &g, &ng)))
		return err;
	/* Go's total is its records' count: each stack's count summed (a
	 * thread dump's stacks count one each, threadcreate's their threads). */
	total = 0;
	for (size_t i = 0; i < ng; i++)
		total += g[i].count;
	base_buf_printf(&o, "%s profile: total %" PRId64 "\n", p->name, total);
	put_note(&o, p->note);
	for (size_t i = 0; i < ng && !o.err; i++) {
		base_buf_printf(&o, "%" PRId64, g[i].count);
		put_stack(&o, p, g[i].s);
		base_buf_printf(&o, "\n");
	}
	base_free(g);
	return base_buf_take(&o, out, len);
}

static int cmp_weight(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	return (x->weight < y->weight) - (x->weight > y->weight);
}

int enc_text_contention_encode(const struct enc_text_profile *p, const char *kind, size_t max,
			       char **out, size_t *len)
{
	struct base_buf o;
	struct group *g;
	size_t ng;
	int err;

	*out = NULL;
	base_buf_init(&o, max);
	if ((err = group_stacks(p, &g, &ng)))
		return err;
	qsort(g, ng, sizeof(*g), cmp_weight);
	/* Delays are nanoseconds: a "cycle" here is a nanosecond. */
	base_buf_printf(&o, "--- %s:\ncycles/second=1000000000\n", kind);
	if (!strcmp(kind, "mutex"))
		base_buf_printf(&o, "sampling period=1\n");
	for (size_t i = 0; i < ng && !o.err; i++) {
		base_buf_printf(&o, "%" PRId64 " %" PRId64, g[i].weight, g[i].count);
		put_stack(&o, p, g[i].s);
	}
	base_free(g);
	return base_buf_take(&o, out, len);
}

static int cmp_inuse(const void *a, const void *b)
{
	const struct enc_text_stack *x = *(const struct enc_text_stack *const *)a;
	const struct enc_text_stack *y = *(const struct enc_text_stack *const *)b;

	if (x->heap[1] != y->heap[1])
		return x->heap[1] > y->heap[1] ? -1 : 1;
	return (x->heap[3] < y->heap[3]) - (x->heap[3] > y->heap[3]);
}

int enc_text_heap_encode(const struct enc_text_profile *p, uint64_t rate, size_t max, char **out,
			 size_t *len)
{
	const struct enc_text_stack **order;
	int64_t tot[4] = { 0 };
	struct base_buf o;

	*out = NULL;
	base_buf_init(&o, max);
	if (!(order = base_calloc(p->nstacks + 1, sizeof(*order))))
		return -ENOMEM;
	for (size_t i = 0; i < p->nstacks; i++) {
		order[i] = &p->stacks[i];
		for (int k = 0; k < 4; k++)
			tot[k] += p->stacks[i].heap[k];
	}
	qsort(order, p->nstacks, sizeof(*order), cmp_inuse);
	base_buf_printf(&o, "heap profile: %" PRId64 ": %" PRId64 " [%" PRId64 ": %" PRId64
			"] @ heap/%" PRIu64 "\n", tot[0], tot[1], tot[2], tot[3],
			2 * (rate > 1 ? rate : (uint64_t)1));
	for (size_t i = 0; i < p->nstacks && !o.err; i++) {
		const struct enc_text_stack *s = order[i];

		base_buf_printf(&o, "%" PRId64 ": %" PRId64 " [%" PRId64 ": %" PRId64 "]", s->heap[0],
				s->heap[1], s->heap[2], s->heap[3]);
		put_stack(&o, p, s);
	}
	base_free(order);
	return base_buf_take(&o, out, len);
}
