#include "ptrace/stacks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrace/gopclntab.h"
#include "ptrace/module.h"
#include "ptrace/proc.h"
#include "ptrace/ptrace_internal.h"
#include "ptrace/python.h"

/* One (thread, stack) of the table. */
struct entry {
	uint64_t hash;         /* 0: an empty slot */
	uint32_t id;           /* insertion order: 0 .. used-1 */
	uint32_t off, n;       /* frames[off .. off+n) */
	int64_t v[PT_MAX_VALUES];
	pid_t tid;
	char comm[16];
	char state;
	int syscall;
	unsigned int flags;
};

struct pt_stacks {
	struct entry *tab;     /* open addressing, cap a power of two */
	size_t cap, used, max;
	uint64_t *frames;
	size_t nframes, frames_cap;
	uint64_t dropped;
};

int pt_stacks_new(struct pt_stacks **out, size_t max_stacks)
{
	struct pt_stacks *st = calloc(1, sizeof(*st));

	*out = st;
	if (!st)
		return -ENOMEM;
	st->max = max_stacks;
	return 0;
}

void pt_stacks_free(struct pt_stacks *st)
{
	if (!st)
		return;
	free(st->tab);
	free(st->frames);
	free(st);
}

size_t pt_stacks_count(const struct pt_stacks *st) { return st->used; }
uint64_t pt_stacks_dropped(const struct pt_stacks *st) { return st->dropped; }

static uint64_t hash_frames(pid_t tid, const uint64_t *f, int n)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)tid;

	for (int i = 0; i < n; i++) {
		h ^= f[i];
		h *= 1099511628211ull;
		h ^= h >> 29;
	}
	return h | 1;   /* 0 marks an empty slot */
}

static int table_grow(struct pt_stacks *st)
{
	size_t cap = st->cap ? st->cap * 2 : 1024;
	struct entry *t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < st->cap; i++) {
		size_t j;

		if (!st->tab[i].hash)
			continue;
		for (j = st->tab[i].hash & (cap - 1); t[j].hash; j = (j + 1) & (cap - 1)) {
		}
		t[j] = st->tab[i];
	}
	free(st->tab);
	st->tab = t;
	st->cap = cap;
	return 0;
}

static int frames_reserve(struct pt_stacks *st, size_t n)
{
	size_t cap = st->frames_cap ? st->frames_cap * 2 : 4096;
	uint64_t *v;

	if (st->nframes + n <= st->frames_cap)
		return 0;
	while (cap < st->nframes + n)
		cap *= 2;
	v = realloc(st->frames, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	st->frames = v;
	st->frames_cap = cap;
	return 0;
}

int pt_stacks_add(struct pt_stacks *st, const struct pt_sample *smp, const int64_t *v)
{
	static const uint64_t none[1];
	const uint64_t *f = smp->frames && smp->n > 0 ? smp->frames : none;
	int n = smp->frames && smp->n > 0 ? smp->n : 0;   /* no stack: a sample all the same */
	uint64_t h = hash_frames(smp->tid, f, n);
	struct entry *e;
	size_t j;

	if ((st->used + 1) * 4 > st->cap * 3 && table_grow(st))
		return -ENOMEM;
	for (j = h & (st->cap - 1); st->tab[j].hash; j = (j + 1) & (st->cap - 1)) {
		e = &st->tab[j];
		if (e->hash == h && e->n == (uint32_t)n && e->tid == smp->tid &&
		    (!n || !memcmp(st->frames + e->off, f, (size_t)n * sizeof(*f)))) {
			for (int k = 0; k < PT_MAX_VALUES; k++)
				e->v[k] += v[k];
			return (int)e->id;
		}
	}
	if (st->used >= st->max) {
		st->dropped++;
		return -E2BIG;
	}
	if (frames_reserve(st, (size_t)n))
		return -ENOMEM;
	if (n)
		memcpy(st->frames + st->nframes, f, (size_t)n * sizeof(*f));
	e = &st->tab[j];
	*e = (struct entry){ .hash = h, .id = (uint32_t)st->used, .off = (uint32_t)st->nframes,
			     .n = (uint32_t)n,
			     .tid = smp->tid, .state = smp->state, .syscall = smp->syscall,
			     .flags = smp->flags };
	memcpy(e->v, v, sizeof(e->v));
	snprintf(e->comm, sizeof(e->comm), "%s", smp->comm);
	st->nframes += (size_t)n;
	return (int)st->used++;
}

int pt_stacks_merge(struct pt_stacks *dst, const struct pt_stacks *src, int sign)
{
	for (size_t i = 0; i < src->cap; i++) {
		const struct entry *e = &src->tab[i];
		struct pt_sample smp = { .tid = e->tid, .comm = e->comm, .state = e->state,
					 .syscall = e->syscall, .frames = src->frames + e->off,
					 .n = (int)e->n, .flags = e->flags };
		int64_t v[PT_MAX_VALUES];
		int rc;

		if (!e->hash)
			continue;
		for (int k = 0; k < PT_MAX_VALUES; k++)
			v[k] = sign * e->v[k];
		if ((rc = pt_stacks_add(dst, &smp, v)) < 0 && rc != -E2BIG)
			return rc;
	}
	return 0;
}

void pt_profile_drop_zero(struct pt_profile *p)
{
	size_t w = 0;

	for (size_t i = 0; i < p->nsamples; i++) {
		int zero = 1;

		for (int k = 0; k < PT_MAX_VALUES; k++)
			zero &= !p->samples[i].value[k];
		if (!zero)
			p->samples[w++] = p->samples[i];
	}
	p->nsamples = w;
}

/* ---- building the profile --------------------------------------------- */

struct addr_slot {
	uint64_t addr;   /* + 1; 0 = empty */
	uint32_t loc;
};

static const char *basename_of(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* Every executable mapping, as Go lists /proc/self/maps. */
static int build_maps(struct pt_tracee *t, struct pt_profile *p)
{
	const struct pt_maps *maps;

	if (!pt_tracee_gone(t))
		pt_tracee_refresh_maps(t);
	maps = pt_tracee_maps(t);
	if (!maps)
		return 0;
	p->maps = calloc(maps->n ? maps->n : 1, sizeof(*p->maps));
	if (!p->maps)
		return -ENOMEM;
	for (size_t i = 0; i < maps->n; i++) {
		const struct pt_map *m = &maps->v[i];
		struct pt_profile_map *pm;

		if (!(m->flags & PT_MAP_X) || (!m->inode && m->path[0] != '['))
			continue;
		pm = &p->maps[p->nmaps];
		pm->start = m->start;
		pm->limit = m->end;
		pm->offset = m->offset;
		if (!(pm->path = strdup(m->path)))
			return -ENOMEM;
		snprintf(pm->build_id, sizeof(pm->build_id), "%s", pt_tracee_build_id(t, m->start));
		p->nmaps++;
	}
	return 0;
}

/* Inlined functions named at one address, at most. */
#define PT_MAX_INLINED 16

/* Python frames at one location at most (the frames one eval call runs). */
#define PT_MAX_PY_LINES PT_PY_MAX_FRAMES

/* Fills l from fr[0..n) (innermost first): one Line per frame, each with
 * its function, file (NULL: "?", as Go says), line and first line. */
static int set_lines(struct pt_profile_loc *l, const struct pt_goline *fr, int n)
{
	if (!(l->file = calloc((size_t)n, sizeof(*l->file))) ||
	    !(l->line = calloc((size_t)n, sizeof(*l->line))) ||
	    !(l->start = calloc((size_t)n, sizeof(*l->start))) ||
	    (n > 1 && !(l->outer = calloc((size_t)n - 1, sizeof(*l->outer)))) ||
	    !(l->name = strdup(fr[0].name)))
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		if (i && !(l->outer[l->nouter++] = strdup(fr[i].name)))
			return -ENOMEM;
		if (!(l->file[i] = strdup(fr[i].file ? fr[i].file : "?")))
			return -ENOMEM;
		l->line[i] = fr[i].line > 0 ? (uint32_t)fr[i].line : 0;
		l->start[i] = fr[i].start > 0 ? (uint32_t)fr[i].start : 0;
	}
	return 0;
}

/* The location of a Python token: one Line per Python frame, innermost
 * first, with its file and lines; no mapping (the code is the
 * interpreter's data, not a file's). */
static int add_python_location(struct pt_tracee *t, struct pt_profile *p,
			       struct pt_profile_loc *l, uint64_t a)
{
	struct pt_py_line ln[PT_MAX_PY_LINES];
	uint64_t t0 = pt__now_ns();
	int n = pt_tracee_python_lines(t, a, ln, PT_MAX_PY_LINES);

	l->map = -1;
	if (n <= 0) {
		p->symbolize_ns += pt__now_ns() - t0;
		return (l->name = strdup("python")) ? 0 : -ENOMEM;
	}
	{
		struct pt_goline fr[PT_MAX_PY_LINES];

		for (int i = 0; i < n; i++)
			fr[i] = (struct pt_goline){ ln[i].func, ln[i].file, ln[i].line, ln[i].start_line };
		if (set_lines(l, fr, n))
			return -ENOMEM;
	}
	p->symbolize_ns += pt__now_ns() - t0;
	return 0;
}

/* The location of Go code: Go's traceback frames at a (the functions
 * inlined there, then the one holding the code) with their files and
 * lines, as Go's own profiles give them. Returns 1 if a is Go code. */
static int add_go_location(struct pt_tracee *t, struct pt_profile_loc *l, uint64_t a)
{
	struct pt_goline gl[PT_MAX_INLINED];
	int n = pt_tracee_go_frames(t, a, gl, PT_MAX_INLINED);

	if (n <= 0)
		return 0;
	return set_lines(l, gl, n) ? -ENOMEM : 1;
}

/* A new location for address a: its mapping and its name (the symbol, else
 * an honest "<module>+0x<vaddr>", else the address). */
static int add_location(struct pt_tracee *t, struct pt_profile *p, uint64_t a)
{
	struct pt_profile_loc *l = &p->locs[p->nlocs];
	const struct pt_module *mod;
	const char *name;
	char buf[PT_PROC_MAX_PATH + 32];
	uint64_t t0;
	int go;

	p->nlocs++;            /* counted now: pt_profile_free frees what is set */
	l->addr = a;
	l->map = -1;
	for (size_t m = 0; m < p->nmaps; m++)
		if (a >= p->maps[m].start && a < p->maps[m].limit) {
			l->map = (int)m;
			break;
		}
	t0 = pt__now_ns();
	if (pt_py_is_token(a))
		return add_python_location(t, p, l, a);
	if ((go = add_go_location(t, l, a)) != 0) {
		p->symbolize_ns += pt__now_ns() - t0;
		return go < 0 ? go : 0;
	}
	pt_tracee_symbolize(t, a, &name, &mod);
	p->symbolize_ns += pt__now_ns() - t0;
	if (name)
		snprintf(buf, sizeof(buf), "%s", name);
	else if (mod)
		snprintf(buf, sizeof(buf), "%s+0x%llx", basename_of(mod->path),
			 (unsigned long long)(a - mod->bias));
	else
		snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)a);
	if (!(l->name = strdup(buf)))
		return -ENOMEM;
	return 0;
}

/* One sample per entry, in the entries' order (sample i is the stack of id
 * i); one location per distinct address (idx: an open addressing index of
 * icap slots, a power of two). */
static int build_samples(const struct pt_stacks *st, struct pt_tracee *t, struct pt_profile *p,
			 struct addr_slot *idx, size_t icap)
{
	const struct entry **order = calloc(st->used ? st->used : 1, sizeof(*order));
	size_t nids = 0;

	if (!order)
		return -ENOMEM;
	for (size_t e = 0; e < st->cap; e++)
		if (st->tab[e].hash)
			order[st->tab[e].id] = &st->tab[e];
	for (size_t e = 0; e < st->used; e++) {
		const struct entry *en = order[e];
		struct pt_profile_sample *sm;

		sm = &p->samples[p->nsamples++];
		*sm = (struct pt_profile_sample){ .first = (uint32_t)nids, .n = en->n, .tid = en->tid,
						  .state = en->state, .syscall = en->syscall,
						  .flags = en->flags };
		memcpy(sm->value, en->v, sizeof(sm->value));
		memcpy(sm->thread, en->comm, sizeof(sm->thread));
		for (uint32_t k = 0; k < en->n; k++) {
			uint64_t a = st->frames[en->off + k];
			size_t j;

			for (j = (a * 0x9e3779b97f4a7c15ull >> 20) & (icap - 1);
			     idx[j].addr && idx[j].addr != a + 1; j = (j + 1) & (icap - 1)) {
			}
			if (!idx[j].addr) {
				idx[j] = (struct addr_slot){ a + 1, (uint32_t)p->nlocs };
				if (add_location(t, p, a)) {
					free(order);
					return -ENOMEM;
				}
			}
			p->loc_ids[nids++] = idx[j].loc;
		}
	}
	free(order);
	return 0;
}

int pt_stacks_build(const struct pt_stacks *st, struct pt_tracee *t, struct pt_profile **out)
{
	struct pt_profile *p = calloc(1, sizeof(*p));
	struct addr_slot *idx = NULL;
	size_t icap = 64, nf = st->nframes ? st->nframes : 1;
	int err = -ENOMEM;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	if ((err = build_maps(t, p)))
		goto out;
	err = -ENOMEM;
	while (icap < st->nframes * 2)
		icap *= 2;
	idx = calloc(icap, sizeof(*idx));
	p->locs = calloc(nf, sizeof(*p->locs));
	p->samples = calloc(st->used ? st->used : 1, sizeof(*p->samples));
	p->loc_ids = calloc(nf, sizeof(*p->loc_ids));
	if (!idx || !p->locs || !p->samples || !p->loc_ids)
		goto out;
	if ((err = build_samples(st, t, p, idx, icap)))
		goto out;
	p->dropped_stacks = st->dropped;
	*out = p;
	p = NULL;
out:
	free(idx);
	pt_profile_free(p);
	return err;
}

void pt_profile_free(struct pt_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nmaps; i++)
		free(p->maps[i].path);
	for (size_t i = 0; i < p->nlocs; i++) {
		free(p->locs[i].name);
		for (uint32_t k = 0; k < p->locs[i].nouter; k++)
			free(p->locs[i].outer[k]);
		free(p->locs[i].outer);
		if (p->locs[i].file)
			for (uint32_t k = 0; k <= p->locs[i].nouter; k++)
				free(p->locs[i].file[k]);
		free(p->locs[i].file);
		free(p->locs[i].line);
		free(p->locs[i].start);
	}
	free(p->maps);
	free(p->locs);
	free(p->samples);
	free(p->loc_ids);
	if (p->timeline) {
		free(p->timeline->threads);
		free(p->timeline->events);
		free(p->timeline);
	}
	free(p);
}
