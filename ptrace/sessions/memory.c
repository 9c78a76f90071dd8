/* Where the process's memory lives, from /proc/<pid>/smaps (no ptrace):
 *   heap    one sample per mapping (identical anonymous mappings grouped),
 *           under its class: values RSS, PSS, private dirty, swap (bytes).
 *           With a window (heap?seconds=N): the change over it, per
 *           mapping, zero changes left out (Go's delta heap).
 *   allocs  what scrapers take for Go's cumulative allocation profile:
 *           per mapping, the bytes that became resident (each growth of its
 *           RSS seen, summed) and how many growths, since podprof first
 *           looked at the target; never decreasing. Every heap or allocs
 *           request is a look.
 * Frames are synthetic, with stable nonzero addresses (scrapers' deltas
 * key on them): the mapping (leaf), then its class. Owns each session's
 * rows and, through the target's slot, the allocs watch (its rows found by
 * address through a base_map). Sampler thread only, as every session
 * hook. */
#include "ptrace/sessions/memory.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/map.h"
#include "base/mem.h"
#include "ptrace/allocs/allocsrc.h"
#include "ptrace/proc/proc.h"
#include "ptrace/profile/profile.h"
#include "ptrace/core/internal.h"
#include "ptrace/sampler/log.h"
#include "ptrace/sampler/targets.h"
#include "ptrace/sampler/sampler.h"
#include "ptrace/sampler/session.h"
#include "ptrace/core/stacks.h"

#define ARENA_ALIGN (64ull << 20)   /* glibc's malloc arenas: HEAP_MAX_SIZE aligned */
#define MAX_KEYS 100000             /* mappings tracked per target for allocs */

enum mclass { MC_HEAP, MC_STACKS, MC_ANON, MC_NAMED, MC_CODE, MC_DATA, MC_SHM, MC_OTHER, MC_N };

static const char *const class_names[MC_N] = {
	"heap", "thread stacks", "anonymous", NULL /* its own name */, "code", "data",
	"shared memory", "other",
};

/* One row: a mapping (or a group of identical anonymous ones). */
struct row {
	uint64_t addr;           /* stable, nonzero: the mapping frame's address */
	enum mclass cls;
	char name[160];          /* the mapping frame's name */
	char cname[64];          /* the class frame's name */
	int64_t v[PT_MAX_VALUES];
};

struct rows {
	struct row *v;
	size_t n, cap;
};

/* The cumulative totals per mapping (allocs), in a target slot. */
struct watch {
	struct rows rows;        /* values: see watch_look */
	int64_t *last;           /* per row: its RSS at the last look */
	size_t last_cap;
	struct base_map by_addr; /* a row's addr + 1 (a mapping may start at 0) -> its index */
};

struct memory_session {
	struct pt_session base;
	struct rows before;      /* heap?seconds=N: the first reading */
	int delta;
	int stacks;              /* allocation stacks (the target keeps records) */
	struct pt_stacks *before_st;   /* with stacks and a window: the first reading */
	struct pt_profile_allocs info;
};

static int is_anon(const struct pt_map *m)
{
	return !m->inode && !m->path[0];
}

static enum mclass classify(const struct pt_smaps *sm, size_t i)
{
	const struct pt_map *m = &sm->v[i].map, *prev = i ? &sm->v[i - 1].map : NULL;

	if (!strcmp(m->path, "[heap]"))
		return MC_HEAP;
	if (!strcmp(m->path, "[stack]"))
		return MC_STACKS;
	if (!strncmp(m->path, "[anon:", 6))
		return MC_NAMED;
	if (m->path[0] == '[')
		return MC_OTHER;
	if (!(m->flags & PT_MAP_P) &&
	    (is_anon(m) || !strncmp(m->path, "/dev/shm/", 9) || !strncmp(m->path, "/memfd:", 7) ||
	     !strncmp(m->path, "/SYSV", 5)))
		return MC_SHM;
	if (m->inode || m->path[0] == '/')
		return m->flags & PT_MAP_X ? MC_CODE : MC_DATA;
	/* Anonymous: a malloc arena starts 64 MiB aligned and is no larger
	 * (a bigger mapping that happens to be aligned is not one: 1 in 32
	 * of a test's 256 MiB mappings were, the kernel aligning large ones
	 * to 2 MiB); a thread stack (glibc's, and most runtimes') sits right
	 * above its guard page. */
	if ((m->flags & PT_MAP_W) && !(m->start % ARENA_ALIGN) && m->end - m->start <= ARENA_ALIGN)
		return MC_HEAP;
	if ((m->flags & PT_MAP_W) && prev && is_anon(prev) && prev->end == m->start &&
	    !(prev->flags & (PT_MAP_R | PT_MAP_W | PT_MAP_X)))
		return MC_STACKS;
	return MC_ANON;
}

static int rows_push(struct rows *r, const struct row *x)
{
	struct row *e = BASE_ARRAY_PUSH(r->v, r->n, r->cap);

	if (!e)
		return -ENOMEM;
	*e = *x;
	return 0;
}

/* The row for mapping i: grouped anonymous mappings share one, keyed (and
 * addressed) by their size and permissions. */
static void describe(const struct pt_smaps *sm, size_t i, struct row *x)
{
	const struct pt_map *m = &sm->v[i].map;
	uint64_t size = m->end - m->start;

	memset(x, 0, sizeof(*x));
	x->cls = classify(sm, i);
	x->addr = m->start;
	snprintf(x->cname, sizeof(x->cname), "%s", x->cls == MC_NAMED ? m->path :
			 class_names[x->cls]);
	if (x->cls == MC_ANON) {
		x->addr = 0x8000000000000000ull | (size >> 12) << 4 | (m->flags & 15u);
		snprintf(x->name, sizeof(x->name), "anonymous %s%s%s %llu kB",
			 m->flags & PT_MAP_R ? "r" : "-", m->flags & PT_MAP_W ? "w" : "-",
			 m->flags & PT_MAP_X ? "x" : "-", (unsigned long long)(size >> 10));
	} else if (m->path[0] && x->cls != MC_NAMED) {
		snprintf(x->name, sizeof(x->name), "%s%s", m->path,
			 m->flags & PT_MAP_DELETED ? " (deleted)" : "");
		if (x->cls == MC_DATA || x->cls == MC_CODE)
			x->addr = m->start;   /* each mapping of the file its own */
	} else {
		snprintf(x->name, sizeof(x->name), "%#llx-%#llx %llu kB",
			 (unsigned long long)m->start, (unsigned long long)m->end,
			 (unsigned long long)(size >> 10));
	}
}

/* Reads smaps into rows (grouped), with values RSS, PSS, dirty, swap. */
static int read_rows(pid_t pid, struct rows *out)
{
	struct pt_smaps *sm;
	int err = pt_proc_read_smaps(pid, &sm);

	memset(out, 0, sizeof(*out));
	if (err)
		return err;
	for (size_t i = 0; i < sm->n && !err; i++) {
		const struct pt_smap *e = &sm->v[i];
		struct row x;
		size_t k;

		describe(sm, i, &x);
		k = out->n;
		if (x.cls == MC_ANON)   /* grouped: few distinct sizes, in practice */
			for (k = 0; k < out->n && out->v[k].addr != x.addr; k++) {
			}
		if (k == out->n && (err = rows_push(out, &x)))
			break;
		out->v[k].v[0] += (int64_t)e->rss;
		out->v[k].v[1] += (int64_t)e->pss;
		out->v[k].v[2] += (int64_t)e->private_dirty;
		out->v[k].v[3] += (int64_t)e->swap;
	}
	pt_smaps_free(sm);
	return err;
}

/* ---- the profile ------------------------------------------------------ */

static uint64_t class_addr(const struct row *x)
{
	if (x->cls != MC_NAMED)
		return 0x10 * ((uint64_t)x->cls + 1);
	/* FNV-1a of the name: the same address for the same name, always. */
	return 0x4000000000000000ull | (base_hash_str(x->cname) & 0xffffffffull) << 4;
}

/* The location of (addr, name), added at first sight. Returns its index or
 * -ENOMEM. Class locations are few: a linear search finds them. */
static int location(struct pt_profile *p, uint64_t addr, const char *name, int shared)
{
	if (shared)
		for (size_t i = 0; i < p->nlocs; i++)
			if (p->locs[i].addr == addr)
				return (int)i;
	if (!(p->locs[p->nlocs].name = base_strdup(name)))
		return -ENOMEM;
	p->locs[p->nlocs].addr = addr;
	p->locs[p->nlocs].map = -1;
	return (int)p->nlocs++;
}

/* A profile of rows: each a sample [mapping, class] with its values. */
static int rows_profile(const struct rows *r, struct pt_profile **out)
{
	struct pt_profile *p = base_calloc(1, sizeof(*p));
	int err = -ENOMEM;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->locs = base_calloc(2 * r->n + 1, sizeof(*p->locs));
	p->samples = base_calloc(r->n + 1, sizeof(*p->samples));
	p->loc_ids = base_calloc(2 * r->n + 1, sizeof(*p->loc_ids));
	if (!p->locs || !p->samples || !p->loc_ids)
		goto out;
	for (size_t i = 0; i < r->n; i++) {
		const struct row *x = &r->v[i];
		struct pt_profile_sample *sm = &p->samples[p->nsamples];
		int leaf = location(p, x->addr, x->name, 0), cls = location(p, class_addr(x), x->cname, 1);

		if (leaf < 0 || cls < 0)
			goto out;
		*sm = (struct pt_profile_sample){ .first = (uint32_t)(2 * p->nsamples), .n = 2,
						  .syscall = -1 };
		memcpy(sm->value, x->v, sizeof(sm->value));
		p->loc_ids[sm->first] = (uint32_t)leaf;
		p->loc_ids[sm->first + 1] = (uint32_t)cls;
		p->nsamples++;
	}
	*out = p;
	p = NULL;
	err = 0;
out:
	pt_profile_free(p);
	return err;
}

/* ---- allocs: the cumulative watch ------------------------------------- */

static void watch_free(void *p)
{
	struct watch *w = p;

	if (!w)
		return;
	base_free(w->rows.v);
	base_free(w->last);
	base_map_free(&w->by_addr);
	base_free(w);
}

/* The index of the row of addr in w, or SIZE_MAX. */
static size_t watch_find(const struct watch *w, uint64_t addr)
{
	const uint64_t *k = base_map_get(&w->by_addr, addr + 1);

	return k ? (size_t)*k : SIZE_MAX;
}

/* Adds a new row for x to w. Returns its index, or SIZE_MAX. */
static size_t watch_add(struct watch *w, const struct row *x)
{
	size_t k = w->rows.n;

	if (k >= MAX_KEYS || BASE_ARRAY_RESERVE(w->last, w->last_cap, k + 1) ||
	    rows_push(&w->rows, x))
		return SIZE_MAX;
	if (base_map_put(&w->by_addr, x->addr + 1, k)) {
		w->rows.n--;
		return SIZE_MAX;
	}
	w->last[k] = 0;
	memset(w->rows.v[k].v, 0, sizeof(w->rows.v[k].v));
	return k;
}

/* A look: a mapping whose RSS grew since the last look adds the growth to
 * its alloc_space and one to its alloc_objects; one seen for the first time
 * counts what it holds (it became resident since it was mapped). Rows'
 * values: alloc_objects, alloc_space, inuse_objects (1 while mapped),
 * inuse_space (its RSS now). */
static int watch_look(struct watch *w, const struct rows *now)
{
	for (size_t k = 0; k < w->rows.n; k++) {
		w->rows.v[k].v[2] = w->rows.v[k].v[3] = 0;
		w->last[k] = 0;   /* a mapping gone: its memory came back to the system */
	}
	for (size_t i = 0; i < now->n; i++) {
		const struct row *x = &now->v[i];
		size_t k = watch_find(w, x->addr);
		struct row *r;

		if (k == SIZE_MAX && (k = watch_add(w, x)) == SIZE_MAX)
			continue;   /* past MAX_KEYS, or out of memory: not counted */
		r = &w->rows.v[k];
		if (x->v[0] > w->last[k]) {
			r->v[0]++;
			r->v[1] += x->v[0] - w->last[k];
		}
		w->last[k] = x->v[0];
		r->v[2] = 1;
		r->v[3] = x->v[0];
	}
	return 0;
}

/* ---- the sessions ------------------------------------------------------ */

static const char watch_key;   /* the allocs watch's target slot */

/* Reads the target's mappings into *now, and counts the look in the
 * target's allocs watch. */
static int look(struct pt_session *ss, struct rows *now)
{
	void **slot;
	int err = read_rows(ss->req->pid, now);

	if (err)
		return err;
	if ((slot = pt__target_slot(ss, &watch_key, watch_free, NULL)) && !*slot)
		*slot = base_calloc(1, sizeof(struct watch));
	return slot && *slot ? watch_look(*slot, now) : 0;
}

int pt__memory_look(struct pt_session *ss)
{
	struct rows now;
	int err = look(ss, &now);

	base_free(now.v);
	return err;
}

static int cmp_addr(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	return (x->addr > y->addr) - (x->addr < y->addr);
}

/* now -= before, row by row (matched by address; a row only in before
 * comes back negated), rows left all zero dropped: Go's delta profile. */
static int subtract(struct rows *now, struct rows *before)
{
	size_t i = 0, j = 0, w = 0, n = now->n;

	qsort(now->v, now->n, sizeof(*now->v), cmp_addr);
	qsort(before->v, before->n, sizeof(*before->v), cmp_addr);
	for (; j < before->n; j++) {
		while (i < n && now->v[i].addr < before->v[j].addr)
			i++;
		if (i < n && now->v[i].addr == before->v[j].addr) {
			for (int k = 0; k < PT_MAX_VALUES; k++)
				now->v[i].v[k] -= before->v[j].v[k];
		} else {
			struct row gone = before->v[j];

			for (int k = 0; k < PT_MAX_VALUES; k++)
				gone.v[k] = -gone.v[k];
			if (rows_push(now, &gone))
				return -ENOMEM;
		}
	}
	for (i = 0; i < now->n; i++) {
		int zero = 1;

		for (int k = 0; k < PT_MAX_VALUES; k++)
			zero &= !now->v[i].v[k];
		if (!zero)
			now->v[w++] = now->v[i];
	}
	now->n = w;
	return 0;
}

/* The rows this kind reports now: the mappings (heap), or the watch's
 * cumulative rows (allocs). */
static int current(struct pt_session *ss, struct rows *out)
{
	struct rows now;
	struct watch *w;
	void **slot;
	int err = look(ss, &now);

	if (err || ss->kind == &pt_kind_heap || ss->kind == &pt_kind_heap_mappings) {
		*out = now;
		return err;
	}
	base_free(now.v);
	memset(out, 0, sizeof(*out));
	slot = pt__target_slot(ss, &watch_key, watch_free, NULL);
	if (!slot || !(w = *slot))
		return -ENOMEM;
	for (size_t k = 0; k < w->rows.n; k++)
		if ((err = rows_push(out, &w->rows.v[k])))
			return err;
	return 0;
}

/* ---- allocation stacks ------------------------------------------------ */

static int by_mapping(const struct pt_session *ss)
{
	return ss->kind == &pt_kind_heap_mappings || ss->kind == &pt_kind_allocs_mappings;
}

/* Reads the target's allocation records into *st (made here). On failure
 * info says why there are no stacks. Returns 0, -ENOENT (no records: the
 * mapping view answers), -ESRCH or -ENOMEM (the request fails). */
static int records(struct pt_session *ss, struct pt_stacks **st, struct pt_profile_allocs *info)
{
	struct pt_allocs a[PT_ALLOCSRC_MAX];
	const char *why;
	int n, err = pt_allocsrc_read(ss->t, a, &n, &why);

	memset(info, 0, sizeof(*info));
	if (err) {
		for (int i = 0; i < PT_ALLOCSRC_MAX; i++)
			pt_allocs_clear(&a[i]);
		if (err == -ENOMEM || err == -ESRCH)
			return err;
		info->err = err == -ENOENT ? 0 : err;
		info->why = why ? why : "the target's allocation records could not be read";
		return -ENOENT;
	}
	/* The first source's figures; with two (a cgo program: Go's own
	 * records, then the agent's) the source says both. */
	*info = (struct pt_profile_allocs){ .source = n > 1 ? "go+agent" : a[0].source,
					    .rate = a[0].rate, .samples = a[0].samples,
					    .dropped = a[0].dropped, .lost_frees = a[0].lost_frees,
					    .full = a[0].full, .forked = a[0].forked,
					    .stopped = a[0].stopped, .why = why,
					    .rate_assumed = a[0].rate_assumed };
	for (int i = 1; i < n; i++) {
		info->agent_rate = a[i].rate;
		info->samples += a[i].samples;
		info->dropped += a[i].dropped;
		info->lost_frees += a[i].lost_frees;
		info->full |= a[i].full;
		info->forked |= a[i].forked;
		info->stopped |= a[i].stopped;
	}
	for (int i = 0; i < n && !err; i++)
		err = pt_allocsrc_stacks(&a[i], st, (size_t)ss->o->max_stacks);
	for (int i = 0; i < PT_ALLOCSRC_MAX; i++)
		pt_allocs_clear(&a[i]);
	return err;
}

static int stacks_finish(struct pt_session *ss)
{
	struct memory_session *ms = PT_SESSION_OF(ss, struct memory_session);
	struct pt_profile_allocs *info = &ms->info;
	struct pt_stacks *now = NULL;
	struct pt_profile *p;
	int err = records(ss, &now, info);

	if (!err && ms->delta)
		err = pt_stacks_merge(now, ms->before_st, -1);
	if (!err && !(err = pt_profile_build(now, ss->t, &ss->req->profile))) {
		p = ss->req->profile;
		if (ms->delta)
			pt_profile_drop_zero(p);
		p->alloc = *info;
		p->dropped_stacks = pt_stacks_dropped(now);
		p->time_ns = ss->start_wall;
		p->duration_ns = ms->delta ? pt__now_ns() - ss->start_ns : 0;
		pt__log(ss->s, 0, "%s: pid=%d %zu allocation stacks from the %s (rate %llu)%s",
				ss->kind->name, (int)ss->req->pid, p->nsamples, info->source,
				(unsigned long long)info->rate, ms->delta ? " (delta)" : "");
	}
	pt_stacks_free(now);
	return err;
}

/* ---- the sessions ------------------------------------------------------ */

static int memory_start(struct pt_session *ss)
{
	struct memory_session *ms = PT_SESSION_OF(ss, struct memory_session);
	int err;

	ms->delta = ss->req->duration_ns > 0;
	if (!by_mapping(ss)) {
		if (!ms->delta) {
			ms->stacks = 1;   /* decided at the end */
			return 0;
		}
		err = records(ss, &ms->before_st, &ms->info);
		if (err != -ENOENT) {
			ms->stacks = !err;
			return err;
		}
	}
	return ms->delta ? current(ss, &ms->before) : 0;
}

static int memory_finish(struct pt_session *ss)
{
	struct memory_session *ms = PT_SESSION_OF(ss, struct memory_session);
	struct rows now;
	int err;

	if (ms->stacks) {
		/* Records gone since the window began (an exec): an error. */
		if ((err = stacks_finish(ss)) != -ENOENT || ms->delta)
			return err == -ENOENT ? -EPROTO : err;
	}
	err = current(ss, &now);
	if (!err && ms->delta)
		err = subtract(&now, &ms->before);
	if (!err && !(err = rows_profile(&now, &ss->req->profile))) {
		ss->req->profile->time_ns = ss->start_wall;
		ss->req->profile->duration_ns = ms->delta ? pt__now_ns() - ss->start_ns : 0;
		ss->req->profile->alloc = ms->info;
	}
	pt__log(ss->s, 0, "%s: pid=%d rows=%zu%s in %.1f ms", ss->kind->name,
			(int)ss->req->pid, now.n, ms->delta ? " (delta)" : "",
			(double)(pt__now_ns() - ss->start_ns) / 1e6 -
				(ms->delta ? (double)ss->req->duration_ns / 1e6 : 0));
	base_free(now.v);
	return err;
}

static void memory_free(struct pt_session *ss)
{
	struct memory_session *ms = PT_SESSION_OF(ss, struct memory_session);

	base_free(ms->before.v);
	pt_stacks_free(ms->before_st);
}

#define MEMORY_KIND(kname)                         \
	{                                          \
		.name = kname,                     \
		.size = sizeof(struct memory_session), \
		.flags = PT_KIND_F_WINDOW,         \
		.start = memory_start,             \
		.finish = memory_finish,           \
		.free = memory_free,               \
	}

const struct pt_session_kind pt_kind_heap = MEMORY_KIND("heap");
const struct pt_session_kind pt_kind_allocs = MEMORY_KIND("allocs");
const struct pt_session_kind pt_kind_heap_mappings = MEMORY_KIND("heap by mapping");
const struct pt_session_kind pt_kind_allocs_mappings = MEMORY_KIND("allocs by mapping");
