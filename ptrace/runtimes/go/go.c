/* Go as a runtime (see go.h): a CPU sample taken while a goroutine ran
 * under pprof labels carries them, as a last frame that is a token of its
 * label set (merge); the sets are kept by content, each once, numbered in
 * order of first sight (labels); so are the one-label sets that say where
 * a goroutine waits (pt_go_label_token). Sampler thread only. */
#include "ptrace/runtimes/go/go.h"

#include <errno.h>
#include <string.h>

#include "base/map.h"
#include "base/mem.h"
#include "ptrace/runtimes/go/gort.h"
#include "ptrace/space/stackmem.h"

#define MAX_SETS 4096       /* distinct label sets kept per process */
#define SET_BYTES 8192      /* one set's strings */

struct label_set {
	uint64_t hash;
	uint32_t first, n;      /* kv[2*first ..], n pairs */
};

struct go_rt {
	struct pt_rt base;
	struct pt_go *go;
	unsigned int row;
	struct label_set *sets;
	size_t nsets;
	char **kv;
	size_t nkv, kv_cap;
	struct base_map by_hash;   /* a set's hash -> its index + 1 */
};

struct pt_go *pt_go_of(struct pt_rt *rt)
{
	return ((struct go_rt *)rt)->go;   /* base is its first member */
}

static int go_rt_new(struct pt_rt **out, struct pt_space *as, unsigned int row)
{
	struct go_rt *r = base_calloc(1, sizeof(*r));
	int err;

	(void)row;   /* no tokens: Go's frames are native frames */
	*out = NULL;
	if (!r)
		return -ENOMEM;
	if ((err = pt_go_new(&r->go, as))) {
		base_free(r);
		return err;
	}
	r->base.ops = &pt_runtime_go;
	r->row = row;
	*out = &r->base;
	return 0;
}

static void forget_sets(struct go_rt *r)
{
	for (size_t i = 0; i < r->nkv; i++)
		base_free(r->kv[i]);
	base_free(r->kv);
	base_free(r->sets);
	base_map_free(&r->by_hash);
	r->kv = NULL;
	r->sets = NULL;
	r->nkv = r->kv_cap = r->nsets = 0;
}

static void go_rt_free(struct pt_rt *rt)
{
	if (!rt)
		return;
	forget_sets((struct go_rt *)rt);
	pt_go_free(pt_go_of(rt));
	base_free(rt);
}

static void go_rt_reset(struct pt_rt *rt)
{
	forget_sets((struct go_rt *)rt);
	pt_go_reset(pt_go_of(rt));
}

/* FNV-1a over the set's strings, each with its NUL. */
static uint64_t set_hash(const struct pt_go_label *lab, int n)
{
	uint64_t h = 14695981039346656037ull;

	for (int i = 0; i < n; i++)
		for (int k = 0; k < 2; k++)
			for (const char *p = k ? lab[i].value : lab[i].key;; p++) {
				h = (h ^ (unsigned char)*p) * 1099511628211ull;
				if (!*p)
					break;
			}
	return h ? h : 1;
}

/* The index of the set lab[0..n) among those kept (added if new), or -1. */
static long intern(struct go_rt *r, const struct pt_go_label *lab, int n)
{
	uint64_t h = set_hash(lab, n), *at = base_map_get(&r->by_hash, h);
	struct label_set *grown;

	if (at)
		return (long)*at - 1;   /* a hash the same set had (collisions: see below) */
	if (r->nsets >= MAX_SETS)
		return -1;
	if (!(grown = base_realloc(r->sets, (r->nsets + 1) * sizeof(*grown))))
		return -1;
	r->sets = grown;
	if (r->nkv + 2 * (size_t)n > r->kv_cap) {
		size_t cap = (r->kv_cap ? 2 * r->kv_cap : 64) + 2 * (size_t)n;
		char **kv = base_realloc(r->kv, cap * sizeof(*kv));

		if (!kv)
			return -1;
		r->kv = kv;
		r->kv_cap = cap;
	}
	r->sets[r->nsets] = (struct label_set){ h, (uint32_t)(r->nkv / 2), 0 };
	for (int i = 0; i < n; i++) {
		char *k = base_strdup(lab[i].key), *v = base_strdup(lab[i].value);

		if (!k || !v) {
			base_free(k);
			base_free(v);
			break;
		}
		r->kv[r->nkv++] = k;
		r->kv[r->nkv++] = v;
		r->sets[r->nsets].n++;
	}
	if (base_map_put(&r->by_hash, h, r->nsets + 1))
		return -1;
	return (long)r->nsets++;
}

/* A sample of a goroutine that runs under pprof labels: a last frame, the
 * token of its label set. (Two sets of one hash would share the first's
 * labels: FNV-1a over a few short strings, kept per process.) */
static int go_rt_merge(struct pt_rt *rt, const void *slot, struct pt_capture *cap,
		       uint64_t *frames, int n, int max)
{
	struct go_rt *r = (struct go_rt *)rt;
	struct pt_go_label lab[PT_GO_MAX_LABELS];
	char buf[SET_BYTES];
	uint64_t set;
	long id;
	int k;

	(void)slot;
	/* A stack whose root is a thread's scheduler stack (runtime.mstart,
	 * rt0_go, mcall) ran no goroutine: Go then has no current goroutine on the
	 * M (dropg before schedule), so no labels, whatever m.curg holds by
	 * the time a kernel's sample is read. */
	if (n >= max || !cap || (n > 0 && pt_go_is_scheduler_root(r->go, frames[n - 1])) ||
	    !(set = pt_go_current_labels(r->go, &cap->regs)))
		return n;
	if ((k = pt_go_labels(r->go, set, lab, PT_GO_MAX_LABELS, buf, sizeof(buf))) <= 0 ||
	    (id = intern(r, lab, k)) < 0)
		return n;
	frames[n] = pt_rt_token(r->row, (uint64_t)id);
	return n + 1;
}

uint64_t pt_go_label_token(struct pt_rt *rt, const char *key, const char *value)
{
	struct go_rt *r = (struct go_rt *)rt;
	struct pt_go_label lab = { key, value };
	long id = intern(r, &lab, 1);

	return id < 0 ? 0 : pt_rt_token(r->row, (uint64_t)id);
}

static int go_rt_labels(struct pt_rt *rt, uint64_t token, const char *const **kv, size_t *n)
{
	struct go_rt *r = (struct go_rt *)rt;
	uint64_t id = token & PT_RT_TOKEN_ID_MASK;

	if (id >= r->nsets)
		return 0;
	*kv = (const char *const *)r->kv + 2 * (size_t)r->sets[id].first;
	*n = r->sets[id].n;
	return 1;
}

static int go_rt_detect(struct pt_rt *rt, char *note, size_t len)
{
	return pt_go_detect(pt_go_of(rt), note, len);
}

static int go_rt_lines(struct pt_rt *rt, uint64_t token, struct pt_rt_line *out, int max)
{
	(void)rt;
	(void)token;
	(void)out;
	(void)max;
	return 0;   /* no tokens of its own */
}

const struct pt_runtime_ops pt_runtime_go = {
	.name = "go",
	.new = go_rt_new,
	.free = go_rt_free,
	.reset = go_rt_reset,
	.detect = go_rt_detect,
	.merge = go_rt_merge,
	.lines = go_rt_lines,
	.labels = go_rt_labels,
};
