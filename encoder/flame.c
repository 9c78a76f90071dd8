/* Folded stacks, speedscope's format and the flame graph page (see
 * flame.h), from the neutral description. Stacks are merged as a tree
 * (a node per distinct path from the root), which the folded lines and
 * the page are written from; speedscope takes the stacks as they are.
 * Any thread; no shared state. */
#include "encoder/flame.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "base/array.h"
#include "base/buf.h"
#include "base/map.h"
#include "base/mem.h"
#include "encoder/trace_util.h"

/* The page (encoder/flame.html), as a C string made at build time. */
static const char PAGE[] =
#include "flame_page.h"
	;
/* Where the page's data goes: the one line of the page holding it. */
#define DATA_MARK "/*PODPROF-DATA*/"

/* A tree of the stacks: node 0 the root; each other node a frame under
 * its parent, values[ntypes] the sums of the stacks through it. */
struct tree {
	size_t n, cap, ntypes;
	uint32_t *parent, *name;
	int64_t *values;
	struct base_map index;   /* hash(parent, name) -> node */
};

static void tree_free(struct tree *t)
{
	base_free(t->parent);
	base_free(t->name);
	base_free(t->values);
	base_map_free(&t->index);
}

static uint64_t node_hash(uint32_t parent, uint32_t name)
{
	uint64_t h = ((uint64_t)parent << 32 | name) * 0x9e3779b97f4a7c15ull;

	h ^= h >> 31;
	return h ? h : 1;
}

struct node_key {
	const struct tree *t;
	uint32_t parent, name;
};

static int node_eq(const void *arg, uint64_t i)
{
	const struct node_key *k = arg;

	return k->t->parent[i] == k->parent && k->t->name[i] == k->name;
}

static int tree_grow(struct tree *t)
{
	size_t cap = t->cap ? 2 * t->cap : 1024;
	uint32_t *p = base_reallocarray(t->parent, cap, sizeof(*p)), *nm;
	int64_t *v;

	if (p)
		t->parent = p;
	nm = p ? base_reallocarray(t->name, cap, sizeof(*nm)) : NULL;
	if (nm)
		t->name = nm;
	v = nm ? base_reallocarray(t->values, cap * t->ntypes, sizeof(*v)) : NULL;
	if (!v)
		return -ENOMEM;
	t->values = v;
	t->cap = cap;
	return 0;
}

/* The node for name under parent, found or made. Returns its index or
 * -ENOMEM. */
static int64_t tree_child(struct tree *t, uint32_t parent, uint32_t name)
{
	struct node_key k = { t, parent, name };
	uint64_t h = node_hash(parent, name), *at = base_map_find(&t->index, h, node_eq, &k);

	if (at)
		return (int64_t)*at;
	if (t->n == t->cap && tree_grow(t))
		return -ENOMEM;
	t->parent[t->n] = parent;
	t->name[t->n] = name;
	memset(t->values + t->n * t->ntypes, 0, t->ntypes * sizeof(*t->values));
	if (base_map_add(&t->index, h, t->n))
		return -ENOMEM;
	return (int64_t)t->n++;
}

/* Every stack added along its path from the root: its values as they
 * are, or with `growth` only what is above 0 (a change over a window
 * drawn as widths: what fell cannot be a width). *fell: whether any value
 * was below 0. Returns 0 or -ENOMEM. */
static int tree_build(const struct enc_flame *f, struct tree *t, int growth, int *fell)
{
	memset(t, 0, sizeof(*t));
	if (f->ntypes > ENC_FLAME_MAX_TYPES)
		return -EINVAL;
	t->ntypes = f->ntypes ? f->ntypes : 1;
	if (tree_grow(t))
		return -ENOMEM;
	t->parent[0] = UINT32_MAX;
	t->name[0] = UINT32_MAX;
	memset(t->values, 0, t->ntypes * sizeof(*t->values));
	t->n = 1;
	*fell = 0;
	for (size_t i = 0; i < f->nstacks; i++) {
		const struct enc_flame_stack *s = &f->stacks[i];
		int64_t v[ENC_FLAME_MAX_TYPES];
		uint32_t at = 0;

		for (size_t k = 0; k < f->ntypes; k++) {
			v[k] = f->values[i * f->ntypes + k];
			*fell |= v[k] < 0;
			if (growth && v[k] < 0)
				v[k] = 0;
			t->values[k] += v[k];
		}
		for (uint32_t j = 0; j < s->n; j++) {
			int64_t c = tree_child(t, at, f->frames[s->first + j]);

			if (c < 0)
				return -ENOMEM;
			at = (uint32_t)c;
			for (size_t k = 0; k < f->ntypes; k++)
				t->values[at * t->ntypes + k] += v[k];
		}
	}
	return 0;
}

/* A frame name as the folded format can carry it: no ';', no line break. */
static void folded_name(struct base_buf *b, const char *s)
{
	for (; *s; s++)
		base_buf_byte(b, *s == ';' ? ':' : (*s == '\n' || *s == '\r') ? ' ' : (uint8_t)*s);
}

/* Writes the path from the root to node i ("a;b;c"), its nodes gathered
 * leaf first into *path (grown as needed, the caller frees it). Returns 0
 * or -ENOMEM. */
static int folded_path(struct base_buf *b, const struct enc_flame *f, const struct tree *t, uint32_t i,
		       uint32_t **path, size_t *cap)
{
	size_t n = 0;

	for (uint32_t at = i; at; at = t->parent[at]) {
		if (n == *cap && BASE_ARRAY_RESERVE(*path, *cap, n + 1))
			return -ENOMEM;
		(*path)[n++] = at;
	}
	while (n--) {
		folded_name(b, f->names[t->name[(*path)[n]]]);
		if (n)
			base_buf_byte(b, ';');
	}
	return 0;
}

int enc_flame_collapsed(const struct enc_flame *f, size_t type, size_t max, char **out, size_t *len)
{
	struct base_buf b;
	struct tree t;
	uint32_t *path = NULL;
	int64_t *self = NULL;
	size_t cap = 0;
	int err, fell;

	*out = NULL;
	if (type >= f->ntypes)
		return -EINVAL;
	if ((err = tree_build(f, &t, 0, &fell)) || !(self = base_calloc(t.n, sizeof(*self)))) {
		tree_free(&t);
		return err ? err : -ENOMEM;
	}
	/* A node's own value (what stops there) is its value less its
	 * children's: one line per node that has some. */
	for (size_t i = 0; i < t.n; i++)
		self[i] += t.values[i * t.ntypes + type];
	for (size_t i = 1; i < t.n; i++)
		self[t.parent[i]] -= t.values[i * t.ntypes + type];
	base_buf_init(&b, max);
	for (size_t i = 1; i < t.n && !b.err && !err; i++) {
		if (self[i] <= 0)
			continue;
		err = folded_path(&b, f, &t, (uint32_t)i, &path, &cap);
		base_buf_printf(&b, " %lld\n", (long long)self[i]);
	}
	base_free(self);
	base_free(path);
	tree_free(&t);
	if (err) {
		base_buf_free(&b);
		return err;
	}
	return base_buf_take(&b, out, len);
}

/* speedscope's units: its list has no count; "none" for counts. */
static const char *speedscope_unit(const char *u)
{
	static const char *const known[] = { "nanoseconds", "microseconds", "milliseconds", "seconds",
					     "bytes" };

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (u && !strcmp(u, known[i]))
			return known[i];
	return "none";
}

int enc_flame_speedscope(const struct enc_flame *f, const char *exporter, size_t max, char **out,
			 size_t *len)
{
	struct base_buf b;

	*out = NULL;
	base_buf_init(&b, max);
	base_buf_str(&b, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"name\":\"");
	enc__ob_json_str(&b, f->title);
	base_buf_str(&b, "\",\"exporter\":\"");
	enc__ob_json_str(&b, exporter);
	base_buf_printf(&b, "\",\"activeProfileIndex\":%zu,\"shared\":{\"frames\":[", f->dflt);
	for (size_t i = 0; i < f->nnames; i++) {
		base_buf_str(&b, i ? ",{\"name\":\"" : "{\"name\":\"");
		enc__ob_json_str(&b, f->names[i]);
		base_buf_str(&b, "\"}");
	}
	base_buf_str(&b, "]},\"profiles\":[");
	for (size_t k = 0; k < f->ntypes && !b.err; k++) {
		int64_t sum = 0;
		const char *sep = "";

		base_buf_str(&b, k ? ",{\"type\":\"sampled\",\"name\":\"" : "{\"type\":\"sampled\",\"name\":\"");
		enc__ob_json_str(&b, f->types[k].name);
		base_buf_str(&b, " of ");
		enc__ob_json_str(&b, f->title);
		base_buf_printf(&b, "\",\"unit\":\"%s\",\"startValue\":0,\"samples\":[",
				speedscope_unit(f->types[k].unit));
		for (size_t i = 0; i < f->nstacks && !b.err; i++) {
			const struct enc_flame_stack *s = &f->stacks[i];

			if (f->values[i * f->ntypes + k] <= 0)
				continue;
			base_buf_str(&b, sep);
			base_buf_byte(&b, '[');
			for (uint32_t j = 0; j < s->n; j++)
				base_buf_printf(&b, j ? ",%u" : "%u", f->frames[s->first + j]);
			base_buf_byte(&b, ']');
			sep = ",";
		}
		base_buf_str(&b, "],\"weights\":[");
		sep = "";
		for (size_t i = 0; i < f->nstacks && !b.err; i++) {
			int64_t v = f->values[i * f->ntypes + k];

			if (v <= 0)
				continue;
			base_buf_printf(&b, "%s%lld", sep, (long long)v);
			sum += v;
			sep = ",";
		}
		base_buf_printf(&b, "],\"endValue\":%lld}", (long long)sum);
	}
	base_buf_str(&b, "]}\n");
	return base_buf_take(&b, out, len);
}

/* The page's data: a JSON object the page's script reads (see flame.html):
 * title, comments, types, the default type, names, and the tree as a flat
 * array of [parent, name, value per type] per node (parents first), the
 * nodes too narrow in every type left out (counted in "pruned"). */
static void page_data(struct base_buf *b, const struct enc_flame *f, const struct tree *t,
		      const uint32_t *keep, size_t kept, int fell)
{
	base_buf_str(b, "{\"title\":\"");
	enc__ob_json_str(b, f->title);
	base_buf_str(b, "\",\"comments\":[");
	for (size_t i = 0; i < f->ncomments; i++) {
		base_buf_str(b, i ? ",\"" : "\"");
		enc__ob_json_str(b, f->comments[i]);
		base_buf_byte(b, '"');
	}
	base_buf_str(b, "],\"types\":[");
	for (size_t k = 0; k < f->ntypes; k++) {
		base_buf_str(b, k ? ",{\"name\":\"" : "{\"name\":\"");
		enc__ob_json_str(b, f->types[k].name);
		base_buf_str(b, "\",\"unit\":\"");
		enc__ob_json_str(b, f->types[k].unit);
		base_buf_str(b, "\"}");
	}
	base_buf_printf(b, "],\"dflt\":%zu,\"pruned\":%zu,\"fell\":%d,\"names\":[", f->dflt, t->n - kept,
			fell);
	for (size_t i = 0; i < f->nnames; i++) {
		base_buf_str(b, i ? ",\"" : "\"");
		enc__ob_json_str(b, f->names[i]);
		base_buf_byte(b, '"');
	}
	base_buf_str(b, "],\"nodes\":[");
	for (size_t i = 0; i < t->n && !b->err; i++) {
		if (keep[i] == UINT32_MAX)
			continue;
		base_buf_printf(b, i ? ",%d,%d" : "%d,%d", i ? (int)keep[t->parent[i]] : -1,
				i ? (int)t->name[i] : -1);
		for (size_t k = 0; k < t->ntypes; k++)
			base_buf_printf(b, ",%lld", (long long)t->values[i * t->ntypes + k]);
	}
	base_buf_str(b, "]}");
}

int enc_flame_html(const struct enc_flame *f, size_t max, char **out, size_t *len)
{
	const char *mark = strstr(PAGE, DATA_MARK);
	uint32_t *keep = NULL;
	struct base_buf b;
	struct tree t;
	size_t kept = 0;
	int err, fell;

	*out = NULL;
	if (!mark || !f->ntypes)
		return -EINVAL;
	if ((err = tree_build(f, &t, 1, &fell)) || !(keep = base_calloc(t.n, sizeof(*keep)))) {
		tree_free(&t);
		return err ? err : -ENOMEM;
	}
	/* A node stays if it is wide enough in some type (its parent is
	 * wider, so it stays too: parents come first). */
	for (size_t i = 0; i < t.n; i++) {
		int wide = i == 0;

		for (size_t k = 0; k < t.ntypes && !wide; k++) {
			double total = fabs((double)t.values[k]);

			wide = total > 0 && fabs((double)t.values[i * t.ntypes + k]) >= ENC_FLAME_MIN_SHARE * total;
		}
		keep[i] = wide && (i == 0 || keep[t.parent[i]] != UINT32_MAX) ? (uint32_t)kept++ : UINT32_MAX;
	}
	base_buf_init(&b, max);
	base_buf_put(&b, PAGE, (size_t)(mark - PAGE));
	page_data(&b, f, &t, keep, kept, fell);
	base_buf_str(&b, mark + strlen(DATA_MARK));
	base_free(keep);
	tree_free(&t);
	return base_buf_take(&b, out, len);
}
