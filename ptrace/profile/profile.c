/* The neutral profile (see profile.h): built from a stack table, one
 * sample per entry in id order, each distinct address named once (found
 * again through a map keyed by address + 1), against the tracee's maps
 * read again. A built profile belongs to its caller. Sampler thread, but
 * for pt_profile_free and pt_profile_drop_zero (any thread). */
#include "ptrace/profile/profile.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/array.h"
#include "base/map.h"
#include "base/mem.h"
#include "ptrace/space/gopclntab.h"
#include "ptrace/space/module.h"
#include "ptrace/proc/proc.h"
#include "ptrace/core/internal.h"
#include "ptrace/runtimes/runtimes.h"
#include "ptrace/core/stacks.h"
#include "ptrace/space/space.h"
#include "ptrace/mechanism/tracee.h"

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
		pt_space_refresh_maps(pt_tracee_space(t));
	maps = pt_space_maps(pt_tracee_space(t));
	if (!maps)
		return 0;
	p->maps = base_calloc(maps->n ? maps->n : 1, sizeof(*p->maps));
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
		if (!(pm->path = base_strdup(m->path)))
			return -ENOMEM;
		snprintf(pm->build_id, sizeof(pm->build_id), "%s", pt_space_build_id(pt_tracee_space(t), m->start));
		p->nmaps++;
	}
	return 0;
}

/* Inlined functions named at one address, at most. */
#define PT_MAX_INLINED 16

/* Python frames at one location at most (the frames one eval call runs). */
#define PT_MAX_RT_LINES 128

/* Fills l from fr[0..n) (innermost first): one Line per frame, each with
 * its function, file (NULL: "?", as Go says), line and first line. */
static int set_lines(struct pt_profile_loc *l, const struct pt_goline *fr, int n)
{
	if (!(l->file = base_calloc((size_t)n, sizeof(*l->file))) ||
	    !(l->line = base_calloc((size_t)n, sizeof(*l->line))) ||
	    !(l->start = base_calloc((size_t)n, sizeof(*l->start))) ||
	    (n > 1 && !(l->outer = base_calloc((size_t)n - 1, sizeof(*l->outer)))) ||
	    !(l->name = base_strdup(fr[0].name)))
		return -ENOMEM;
	l->entry = fr[0].entry;
	for (int i = 0; i < n; i++) {
		if (i && !(l->outer[l->nouter++] = base_strdup(fr[i].name)))
			return -ENOMEM;
		if (!(l->file[i] = base_strdup(fr[i].file ? fr[i].file : "?")))
			return -ENOMEM;
		l->line[i] = fr[i].line > 0 ? (uint32_t)fr[i].line : 0;
		l->start[i] = fr[i].start > 0 ? (uint32_t)fr[i].start : 0;
	}
	return 0;
}

/* The location of a runtime's token (Python's): one Line per frame of
 * the runtime's, innermost first, with its file and lines; no mapping (the
 * code is the interpreter's data, not a file's). */
static int add_runtime_location(struct pt_tracee *t, struct pt_profile *p,
				struct pt_profile_loc *l, uint64_t a)
{
	struct pt_rt_line ln[PT_MAX_RT_LINES];
	uint64_t t0 = pt__now_ns();
	int n = pt_tracee_rt_lines(t, a, ln, PT_MAX_RT_LINES);
	const char *name;

	l->map = -1;
	if (n <= 0) {
		p->symbolize_ns += pt__now_ns() - t0;
		name = pt_runtimes_token_name(a);
		return (l->name = base_strdup(name ? name : "runtime")) ? 0 : -ENOMEM;
	}
	{
		struct pt_goline fr[PT_MAX_RT_LINES];

		for (int i = 0; i < n; i++)
			fr[i] = (struct pt_goline){ ln[i].func, ln[i].file, ln[i].line, ln[i].start_line, 0 };
		if (set_lines(l, fr, n))
			return -ENOMEM;
		for (int i = 0; i < n; i++) {
			if (!ln[i].system)
				continue;
			if ((!l->system && !(l->system = base_calloc((size_t)n, sizeof(*l->system)))) ||
			    !(l->system[i] = base_strdup(ln[i].system)))
				return -ENOMEM;
		}
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
	int n = pt_space_go_lines(pt_tracee_space(t), a, gl, PT_MAX_INLINED);

	if (n <= 0)
		return 0;
	return set_lines(l, gl, n) ? -ENOMEM : 1;
}

/* The frames podprof adds itself (profile.h), by name. */
static const struct {
	uint64_t addr;
	const char *name;
} marks[] = {
	{ PT_MARK_UNSAMPLED, PT_MARK_UNSAMPLED_NAME },
	{ PT_MARK_UNSEEN_WAIT, PT_MARK_UNSEEN_WAIT_NAME },
	{ PT_MARK_PENDING, PT_MARK_PENDING_NAME },
};

/* A new location for address a: its mapping and its name (a mark's, the
 * symbol, else an honest "<module>+0x<vaddr>", else the address). */
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
	for (size_t i = 0; i < BASE_LEN(marks); i++)
		if (a == marks[i].addr)
			return (l->name = base_strdup(marks[i].name)) ? 0 : -ENOMEM;
	t0 = pt__now_ns();
	if (pt_rt_is_token(a))
		return add_runtime_location(t, p, l, a);
	if ((go = add_go_location(t, l, a)) != 0) {
		p->symbolize_ns += pt__now_ns() - t0;
		return go < 0 ? go : 0;
	}
	pt_space_name(pt_tracee_space(t), a, &name, &mod);
	p->symbolize_ns += pt__now_ns() - t0;
	if (name)
		snprintf(buf, sizeof(buf), "%s", name);
	else if (mod)
		snprintf(buf, sizeof(buf), "%s+0x%llx", basename_of(mod->path),
			 (unsigned long long)(a - mod->bias));
	else
		snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)a);
	if (!(l->name = base_strdup(buf)))
		return -ENOMEM;
	return 0;
}

/* The labels a runtime's token stands for (the last frame of a stack: Go's
 * pprof labels), as the sample's, their strings copied into p once per
 * token (sets: token -> first pair + 1). Returns 1 if tok is labels, 0 if
 * not, -ENOMEM. */
static int sample_labels(struct pt_tracee *t, struct pt_profile *p, struct base_map *sets,
			 uint64_t tok, struct pt_profile_sample *sm)
{
	const char *const *kv;
	uint64_t *at;
	size_t n;
	char **grown;

	if (!pt_rt_is_token(tok) || !pt_runtimes_labels(pt_tracee_runtimes(t), tok, &kv, &n))
		return 0;
	if ((at = base_map_get(sets, tok))) {
		sm->labels = (uint32_t)(*at >> 32);
		sm->nlabels = (uint32_t)*at;
		return 1;
	}
	if (!(grown = base_realloc(p->label_kv, (p->nlabel_kv + 2 * n + 1) * sizeof(*grown))))
		return -ENOMEM;
	p->label_kv = grown;
	sm->labels = (uint32_t)(p->nlabel_kv / 2);
	sm->nlabels = 0;
	for (size_t i = 0; i < n; i++) {
		char *k = base_strdup(kv[2 * i]), *v = base_strdup(kv[2 * i + 1]);

		if (!k || !v) {
			base_free(k);
			base_free(v);
			return -ENOMEM;
		}
		p->label_kv[p->nlabel_kv++] = k;
		p->label_kv[p->nlabel_kv++] = v;
		sm->nlabels++;
	}
	return base_map_put(sets, tok, (uint64_t)sm->labels << 32 | sm->nlabels) ? -ENOMEM : 1;
}

/* One sample per entry, in id order (sample i is the stack of id i); one
 * location per distinct address, found again through idx (address + 1,
 * as a key is never 0). */
static int build_samples(const struct pt_stacks *st, struct pt_tracee *t, struct pt_profile *p,
			 struct base_map *idx)
{
	size_t nids = 0, n = pt_stacks_count(st);
	struct base_map sets = { 0 };
	int err = 0;

	for (size_t e = 0; e < n; e++) {
		struct pt_profile_sample *sm;
		struct pt_sample en;
		int64_t v[PT_MAX_VALUES];

		/* Naming thousands of stacks (symbol tables read at first
		 * sight) holds no signal of the target's meanwhile. */
		if (e && !(e % 64))
			pt_tracee_breathe(t);
		pt_stacks_get(st, e, &en, v);
		sm = &p->samples[p->nsamples++];
		*sm = (struct pt_profile_sample){ .first = (uint32_t)nids, .n = (uint32_t)en.n,
						  .tid = en.tid, .state = en.state,
						  .syscall = en.syscall, .flags = en.flags };
		memcpy(sm->value, v, sizeof(sm->value));
		/* A Java thread's name is longer than the kernel keeps. */
		if (!pt_tracee_thread_name(t, en.tid, sm->thread, sizeof(sm->thread)))
			snprintf(sm->thread, sizeof(sm->thread), "%s", en.comm);
		/* A last frame that stands for labels is the sample's labels. */
		if (en.n > 0 && (err = sample_labels(t, p, &sets, en.frames[en.n - 1], sm)) != 0) {
			if (err < 0)
				break;
			en.n--;
			sm->n = (uint32_t)en.n;
			err = 0;
		}
		for (int k = 0; k < en.n; k++) {
			uint64_t a = en.frames[k], *loc;
			uint32_t id;

			/* UINT64_MAX has no key (a + 1 wraps to 0): such a
			 * frame (a lie) gets a location at each sight. */
			loc = a + 1 ? base_map_get(idx, a + 1) : NULL;
			if (loc) {
				id = (uint32_t)*loc;
			} else {
				id = (uint32_t)p->nlocs;
				if ((err = add_location(t, p, a)) ||
				    (a + 1 && (err = base_map_put(idx, a + 1, id))))
					goto out;
			}
			p->loc_ids[nids++] = id;
		}
	}
out:
	base_map_free(&sets);
	return err;
}

int pt_profile_build(const struct pt_stacks *st, struct pt_tracee *t, struct pt_profile **out)
{
	struct pt_profile *p = base_calloc(1, sizeof(*p));
	struct base_map idx = { 0 };
	size_t nf = pt_stacks_nframes(st) ? pt_stacks_nframes(st) : 1, ns = pt_stacks_count(st);
	int err = -ENOMEM;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	if ((err = build_maps(t, p)))
		goto out;
	err = -ENOMEM;
	/* At most one location per frame. */
	p->locs = base_calloc(nf, sizeof(*p->locs));
	p->samples = base_calloc(ns ? ns : 1, sizeof(*p->samples));
	p->loc_ids = base_calloc(nf, sizeof(*p->loc_ids));
	if (!p->locs || !p->samples || !p->loc_ids)
		goto out;
	if ((err = build_samples(st, t, p, &idx)))
		goto out;
	p->dropped_stacks = pt_stacks_dropped(st);
	*out = p;
	p = NULL;
out:
	base_map_free(&idx);
	pt_profile_free(p);
	return err;
}

int pt_profile_locate(struct pt_profile *p, struct pt_tracee *t, uint64_t a, uint32_t *loc)
{
	struct pt_profile_loc *grown;
	int err;

	for (size_t i = 0; i < p->nlocs; i++)
		if (p->locs[i].addr == a) {
			*loc = (uint32_t)i;
			return 0;
		}
	if (!(grown = base_realloc(p->locs, (p->nlocs + 1) * sizeof(*p->locs))))
		return -ENOMEM;
	p->locs = grown;
	memset(&p->locs[p->nlocs], 0, sizeof(*p->locs));
	*loc = (uint32_t)p->nlocs;
	err = add_location(t, p, a);   /* counts the location even when it fails */
	return err;
}

void pt_profile_free(struct pt_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nlabel_kv; i++)
		base_free(p->label_kv[i]);
	base_free(p->label_kv);
	base_free(p->goroutines);
	for (size_t i = 0; i < p->nmaps; i++)
		base_free(p->maps[i].path);
	for (size_t i = 0; i < p->nlocs; i++) {
		base_free(p->locs[i].name);
		for (uint32_t k = 0; k < p->locs[i].nouter; k++)
			base_free(p->locs[i].outer[k]);
		base_free(p->locs[i].outer);
		if (p->locs[i].file)
			for (uint32_t k = 0; k <= p->locs[i].nouter; k++)
				base_free(p->locs[i].file[k]);
		base_free(p->locs[i].file);
		if (p->locs[i].system)
			for (uint32_t k = 0; k <= p->locs[i].nouter; k++)
				base_free(p->locs[i].system[k]);
		base_free(p->locs[i].system);
		base_free(p->locs[i].line);
		base_free(p->locs[i].start);
	}
	base_free(p->maps);
	base_free(p->locs);
	base_free(p->samples);
	base_free(p->loc_ids);
	if (p->timeline) {
		base_free(p->timeline->threads);
		base_free(p->timeline->events);
		base_free(p->timeline);
	}
	base_free(p->procs);
	base_free(p);
}
