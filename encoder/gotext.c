/* A Go program's goroutine profile in Go's text shapes (see gotext.h): the
 * rules follow runtime/pprof's printCountProfile and printStackRecord
 * (debug=1, with text/tabwriter's alignment) and the runtime's traceback
 * (debug=2), as docs/runtimes.md describes them. Any thread; no shared
 * state. */
#include "encoder/gotext.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"

/* Go's funcNameForPrint: a generic function's type arguments as "[...]". */
static void put_func(struct base_buf *o, const char *name)
{
	const char *open = strchr(name, '['), *close = strrchr(name, ']');

	if (!strcmp(name, "runtime.gopanic"))
		base_buf_str(o, "panic");
	else if (open && close && close > open)
		base_buf_printf(o, "%.*s[...]%s", (int)(open - name), name, close + 1);
	else
		base_buf_str(o, name);
}

static int has_prefix(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

/* ---- debug=1 ---------------------------------------------------------- */

/* A runtime frame printStackRecord leaves out at the top of a stack. */
static int runtime_frame(const struct enc_go_dump *d, const char *f)
{
	return has_prefix(f, "runtime.") || (d->go_minor >= 24 && has_prefix(f, "internal/runtime/"));
}

struct group {
	const struct enc_go_goroutine *g;
	char *key;              /* "@ 0x... 0x..." and the labels: what Go groups by */
	int64_t count;
};

/* The key Go groups a goroutine by: its PCs and its labels. */
static char *group_key(const struct enc_go_dump *d, const struct enc_go_goroutine *g)
{
	struct base_buf b;
	char *s;
	size_t len;

	base_buf_init(&b, 1u << 20);
	base_buf_byte(&b, '@');
	for (uint32_t k = 0; k < g->n; k++)
		if (!d->frames[g->frames[k]].inlined) {
			base_buf_byte(&b, ' ');
			base_buf_hex(&b, d->frames[g->frames[k]].pc);
		}
	if (g->labels)
		base_buf_printf(&b, "\n# labels: %s", g->labels);
	return base_buf_take(&b, &s, &len) ? NULL : s;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const struct group *)a)->key, ((const struct group *)b)->key);
}

static int cmp_count(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* The frames printStackRecord prints of g: from the first that is not the
 * runtime's, goexit never; all but goexit if only the runtime's. */
static uint32_t first_shown(const struct enc_go_dump *d, const struct enc_go_goroutine *g)
{
	for (uint32_t k = 0; k < g->n; k++)
		if (!runtime_frame(d, d->frames[g->frames[k]].func))
			return k;
	return 0;
}

/* The cells of one "#" line: "0x...", "func+0x..." (into cell, at most
 * len), and where the frame is. */
static void frame_cells(const struct enc_go_frame *f, char *pc, size_t pclen, char *fn, size_t fnlen)
{
	struct base_buf b;
	char *s;
	size_t n;

	snprintf(pc, pclen, "%#" PRIx64, f->pc ? f->pc - 1 : 0);
	base_buf_init(&b, fnlen);
	put_func(&b, f->func);
	if (f->entry && f->pc && f->pc - 1 >= f->entry)
		base_buf_printf(&b, "+%#" PRIx64, f->pc - 1 - f->entry);
	if (!base_buf_take(&b, &s, &n)) {
		snprintf(fn, fnlen, "%s", s);
		base_free(s);
	} else {
		snprintf(fn, fnlen, "%s", f->func);
	}
}

/* tabwriter (minwidth 1, tabwidth 8, padding 1, padchar '\t'): a column's
 * cells are padded with tabs to its widest cell plus one, rounded up to
 * eight. */
static void put_cell(struct base_buf *o, const char *cell, size_t width)
{
	size_t w = (width + 1 + 7) / 8 * 8, len = strlen(cell);

	base_buf_printf(o, "%s", cell);
	for (size_t pad = w - len; pad > 0; pad -= pad >= 8 ? 8 : pad)
		base_buf_printf(o, "\t");
}

static void put_record(struct base_buf *o, const struct enc_go_dump *d, const struct enc_go_goroutine *g)
{
	uint32_t from = first_shown(d, g);
	char pc[32], fn[1024];
	size_t w1 = 1, w2 = 1;

	for (int pass = 0; pass < 2; pass++)
		for (uint32_t k = from; k < g->n; k++) {
			const struct enc_go_frame *f = &d->frames[g->frames[k]];

			if (!strcmp(f->func, "runtime.goexit"))
				continue;
			frame_cells(f, pc, sizeof(pc), fn, sizeof(fn));
			if (!pass) {
				w1 = strlen(pc) > w1 ? strlen(pc) : w1;
				w2 = strlen(fn) > w2 ? strlen(fn) : w2;
				continue;
			}
			put_cell(o, "#", 1);
			put_cell(o, pc, w1);
			put_cell(o, fn, w2);
			if (f->file)
				base_buf_printf(o, "%s:%" PRId64 "\n", f->file, f->line);
			else
				base_buf_printf(o, "?:0\n");
		}
}

int enc_gotext_count_encode(const struct enc_go_dump *d, size_t max, char **out, size_t *len)
{
	struct group *g = base_calloc(d->n + 1, sizeof(*g));
	struct base_buf o;
	size_t ng = 0;
	int err = 0;

	*out = NULL;
	if (!g)
		return -ENOMEM;
	for (size_t i = 0; i < d->n; i++) {
		if (!(g[i].key = group_key(d, &d->goroutines[i]))) {
			err = -ENOMEM;
			goto out;
		}
		g[i].g = &d->goroutines[i];
		g[i].count = 1;
	}
	/* Equal keys side by side, merged, then most common first (Go's
	 * keysByCount: count, then the key's text). */
	qsort(g, d->n, sizeof(*g), cmp_key);
	for (size_t i = 0; i < d->n; i++) {
		if (ng && !strcmp(g[ng - 1].key, g[i].key)) {
			g[ng - 1].count++;
			base_free(g[i].key);
			g[i].key = NULL;
			continue;
		}
		if (ng != i) {
			g[ng] = g[i];
			g[i].key = NULL;
		}
		ng++;
	}
	qsort(g, ng, sizeof(*g), cmp_count);
	base_buf_init(&o, max);
	base_buf_printf(&o, "goroutine profile: total %zu\n", d->n);
	for (size_t i = 0; i < ng && !o.err; i++) {
		base_buf_printf(&o, "%" PRId64 " %s\n", g[i].count, g[i].key);
		put_record(&o, d, g[i].g);
		base_buf_printf(&o, "\n");
	}
	err = base_buf_take(&o, out, len);
out:
	for (size_t i = 0; i < d->n; i++)
		base_free(g[i].key);
	base_free(g);
	return err;
}

/* ---- debug=2 ---------------------------------------------------------- */

/* The runtime's showfuncinfo at traceback level 1: a function of a
 * package, not the runtime's unless exported (runtime.Gosched...). */
static int shown(const char *f)
{
	if (!strchr(f, '.'))
		return 0;
	if (!has_prefix(f, "runtime."))
		return 1;
	return f[8] >= 'A' && f[8] <= 'Z';
}

/* A frame's second line, "\tfile:line +0x...", offset: with the offset
 * from its function's entry (an inlined frame has none). No printf: its
 * cost per call was most of a dump of thousands of goroutines. */
static void put_where(struct base_buf *o, const struct enc_go_frame *f, int offset)
{
	base_buf_str(o, "\n\t");
	base_buf_str(o, f->file ? f->file : "?");
	base_buf_byte(o, ':');
	base_buf_i64(o, f->line);
	if (offset && f->entry && f->pc > f->entry) {
		base_buf_str(o, " +");
		base_buf_hex(o, f->pc - f->entry);
	}
	base_buf_byte(o, '\n');
}

/* The frames of a traceback: Go prints at most 100 (1.19, 1.20) or the
 * first 50 and the last 50 of those it shows (1.21 on). */
static void put_frames(struct base_buf *o, const struct enc_go_dump *d, const struct enc_go_goroutine *g,
		       int all)
{
	uint32_t nshow = 0, k, i = 0;
	int split = d->go_minor >= 21;

	for (k = 0; k < g->n; k++)
		nshow += all || shown(d->frames[g->frames[k]].func);
	for (k = 0; k < g->n; k++) {
		const struct enc_go_frame *f = &d->frames[g->frames[k]];

		if (!all && !shown(f->func))
			continue;
		i++;
		if (split && nshow > 100 && i > 50 && i <= nshow - 50) {
			if (i == 51)
				base_buf_printf(o, "...%" PRIu32 " frames elided...\n", nshow - 100);
			continue;
		}
		if (!split && i > 100)
			break;
		put_func(o, f->func);
		base_buf_str(o, "(...)");
		put_where(o, f, !f->inlined);
	}
}

static int cmp_id(const void *a, const void *b)
{
	const struct enc_go_goroutine *x = *(const struct enc_go_goroutine *const *)a;
	const struct enc_go_goroutine *y = *(const struct enc_go_goroutine *const *)b;

	return (x->id > y->id) - (x->id < y->id);
}

int enc_gotext_dump_encode(const struct enc_go_dump *d, size_t max, char **out, size_t *len)
{
	const struct enc_go_goroutine **order = base_calloc(d->n + 1, sizeof(*order));
	struct base_buf o;

	*out = NULL;
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < d->n; i++)
		order[i] = &d->goroutines[i];
	qsort(order, d->n, sizeof(*order), cmp_id);
	base_buf_init(&o, max);
	for (size_t i = 0; i < d->n && !o.err; i++) {
		const struct enc_go_goroutine *g = order[i];
		int any = 0;

		base_buf_str(&o, i ? "\ngoroutine " : "goroutine ");
		base_buf_i64(&o, (int64_t)g->id);
		base_buf_str(&o, " [");
		base_buf_str(&o, g->state);
		if (g->scan)
			base_buf_str(&o, " (scan)");
		if (g->wait_minutes >= 1)
			base_buf_printf(&o, ", %" PRId64 " minutes", g->wait_minutes);
		if (g->locked)
			base_buf_str(&o, ", locked to thread");
		base_buf_str(&o, "]:\n");
		for (uint32_t k = 0; k < g->n; k++)
			any |= shown(d->frames[g->frames[k]].func);
		put_frames(&o, d, g, !any);
		if (g->created_by >= 0 && g->created_by_func && shown(g->created_by_func)) {
			const struct enc_go_frame *f = &d->frames[g->created_by];

			base_buf_str(&o, "created by ");
			put_func(&o, g->created_by_func);
			if (d->go_minor >= 21 && g->parent)
				base_buf_printf(&o, " in goroutine %" PRIu64, g->parent);
			put_where(&o, f, 1);
		}
	}
	base_free(order);
	return base_buf_take(&o, out, len);
}

/* ---- labels ----------------------------------------------------------- */

/* Go's %q of s (strconv.Quote): printable ASCII as is, quotes and
 * backslashes escaped, the rest as Go escapes it. */
static void quote(struct base_buf *o, const char *s)
{
	base_buf_printf(o, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': base_buf_printf(o, "\\\""); break;
		case '\\': base_buf_printf(o, "\\\\"); break;
		case '\n': base_buf_printf(o, "\\n"); break;
		case '\t': base_buf_printf(o, "\\t"); break;
		case '\r': base_buf_printf(o, "\\r"); break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				base_buf_printf(o, "\\x%02x", *p);
			else
				base_buf_printf(o, "%c", *p);
		}
	}
	base_buf_printf(o, "\"");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void enc_gotext_labels(const char *const *kv, size_t n, char *buf, size_t len)
{
	char **pairs = base_calloc(n + 1, sizeof(*pairs));
	struct base_buf o;
	size_t got = 0, l;
	char *s;

	buf[0] = '\0';
	if (!pairs)
		return;
	for (size_t i = 0; i < n; i++) {
		base_buf_init(&o, len);
		quote(&o, kv[2 * i]);
		base_buf_printf(&o, ":");
		quote(&o, kv[2 * i + 1]);
		if (!base_buf_take(&o, &pairs[got], &l))
			got++;
	}
	/* Go sorts the quoted pairs, not the keys. */
	qsort(pairs, got, sizeof(*pairs), cmp_str);
	base_buf_init(&o, len);
	base_buf_printf(&o, "{");
	for (size_t i = 0; i < got; i++)
		base_buf_printf(&o, "%s%s", i ? ", " : "", pairs[i]);
	base_buf_printf(&o, "}");
	if (!base_buf_take(&o, &s, &l)) {
		snprintf(buf, len, "%s", s);
		base_free(s);
	}
	for (size_t i = 0; i < got; i++)
		base_free(pairs[i]);
	base_free(pairs);
}
