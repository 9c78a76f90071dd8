/* The stack table (see stacks.h): entries in the order they were first
 * seen, so that an entry's index is its id and the index of its sample in
 * the profile built from it (profile.c); a base_map from the hash of (tid,
 * frames) finds an entry again, and every entry's frames lie in one array.
 * Owns the entries and frames. Sampler thread only. */
#include "ptrace/core/stacks.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/array.h"
#include "base/map.h"
#include "base/mem.h"

/* One (thread, stack) of the table. */
struct entry {
	uint32_t off, n;       /* frames[off .. off+n) */
	int64_t v[PT_MAX_VALUES];
	pid_t tid;
	char comm[16];
	char state;
	int syscall;
	unsigned int flags;
};

struct pt_stacks {
	struct entry *v;       /* by id: the order of first sight */
	size_t n, cap, max;
	struct base_map index; /* hash of (tid, frames) -> id */
	uint64_t *frames;
	size_t nframes, frames_cap;
	uint64_t dropped;
};

int pt_stacks_new(struct pt_stacks **out, size_t max_stacks)
{
	struct pt_stacks *st = base_calloc(1, sizeof(*st));

	*out = st;
	if (!st)
		return -ENOMEM;
	/* Ids are ints: no table holds more than 2^31 entries. */
	st->max = max_stacks < BASE_MAP_MAX ? max_stacks : BASE_MAP_MAX;
	return 0;
}

void pt_stacks_free(struct pt_stacks *st)
{
	if (!st)
		return;
	base_free(st->v);
	base_map_free(&st->index);
	base_free(st->frames);
	base_free(st);
}

size_t pt_stacks_count(const struct pt_stacks *st) { return st->n; }
uint64_t pt_stacks_dropped(const struct pt_stacks *st) { return st->dropped; }

static uint64_t hash_frames(pid_t tid, const uint64_t *f, int n)
{
	uint64_t h = BASE_HASH_SEED ^ (uint64_t)tid;

	for (int i = 0; i < n; i++)
		h = base_hash_word(h, f[i]);
	return h ? h : 1;
}

/* What an entry is looked up by. */
struct key {
	const struct pt_stacks *st;
	pid_t tid;
	const uint64_t *f;
	uint32_t n;
};

static int entry_eq(const void *arg, uint64_t id)
{
	const struct key *k = arg;
	const struct entry *e = &k->st->v[id];

	return e->n == k->n && e->tid == k->tid &&
	       (!k->n || !memcmp(k->st->frames + e->off, k->f, (size_t)k->n * sizeof(*k->f)));
}

int pt_stacks_add(struct pt_stacks *st, const struct pt_sample *smp, const int64_t *v)
{
	static const uint64_t none[1];
	const uint64_t *f = smp->frames && smp->n > 0 ? smp->frames : none;
	int n = smp->frames && smp->n > 0 ? smp->n : 0;   /* no stack: a sample all the same */
	struct key k = { st, smp->tid, f, (uint32_t)n };
	uint64_t h = hash_frames(smp->tid, f, n), *id;
	struct entry *e;
	int err;

	if ((id = base_map_find(&st->index, h, entry_eq, &k))) {
		e = &st->v[*id];
		for (int i = 0; i < PT_MAX_VALUES; i++)
			e->v[i] += v[i];
		return (int)*id;
	}
	/* A new stack: refused past max_stacks (or past what an array or a
	 * map holds, 2^31), and counted as dropped. */
	err = st->n >= st->max ? -E2BIG :
	      BASE_ARRAY_GROW(st->frames, st->frames_cap, st->nframes + (size_t)n);
	if (!err)
		err = BASE_ARRAY_RESERVE(st->v, st->cap, st->n + 1);
	if (!err)
		err = base_map_add(&st->index, h, st->n);
	if (err == -E2BIG)
		st->dropped++;
	if (err)
		return err;
	if (n)
		memcpy(st->frames + st->nframes, f, (size_t)n * sizeof(*f));
	e = &st->v[st->n];
	*e = (struct entry){ .off = (uint32_t)st->nframes, .n = (uint32_t)n,
			     .tid = smp->tid, .state = smp->state, .syscall = smp->syscall,
			     .flags = smp->flags };
	memcpy(e->v, v, sizeof(e->v));
	snprintf(e->comm, sizeof(e->comm), "%s", smp->comm);
	st->nframes += (size_t)n;
	return (int)st->n++;
}

int pt_stacks_add_under(struct pt_stacks *st, const struct pt_sample *e, uint64_t mark,
			const int64_t *v)
{
	struct pt_sample smp = *e;
	uint64_t *f = base_calloc((size_t)smp.n + 1, sizeof(*f));
	char comm[16];
	int err;

	if (!f)
		return -ENOMEM;
	snprintf(comm, sizeof(comm), "%s", e->comm ? e->comm : "");
	smp.comm = comm;
	f[0] = mark;
	if (smp.n > 0)
		memcpy(f + 1, smp.frames, (size_t)smp.n * sizeof(*f));
	smp.frames = f;
	smp.n++;
	smp.tid = 0;
	smp.syscall = -1;   /* the mark is the leaf */
	err = pt_stacks_add(st, &smp, v);
	base_free(f);
	return err < 0 ? err : 0;
}

/* share of `left` for weight w among `weight` left (w <= weight) */
static uint64_t share_of(uint64_t left, uint64_t w, uint64_t weight)
{
	uint64_t share = w >= weight ? left : (uint64_t)((double)left * (double)w / (double)weight);

	return share > left ? left : share;
}

uint64_t pt_stacks_spread(struct pt_stacks *st, size_t n, const struct pt_spread *s, uint64_t amount,
			  uint64_t *copies)
{
	struct pt_sample alone = { .comm = "", .syscall = -1 }, e;
	uint64_t weight = s->alone, left = amount, share;
	size_t had = pt_stacks_count(st);
	int64_t v[PT_MAX_VALUES];
	int refused = 0;

	for (size_t i = 0; i < n; i++) {
		pt_stacks_get(st, i, &e, v);
		weight += s->weight(s->arg, i, &e, v);
	}
	/* nothing weighs: all of it alone, past the loop */
	for (size_t i = 0; i < n && left && weight > s->alone; i++) {
		int64_t u[PT_MAX_VALUES] = { 0 };
		uint64_t w;

		pt_stacks_get(st, i, &e, v);
		if (!(w = s->weight(s->arg, i, &e, v)))
			continue;
		share = share_of(left, w, weight);
		weight -= w;
		u[1] = (int64_t)share;
		if (!share)
			continue;
		if ((refused = pt_stacks_add_under(st, &e, s->mark, u) != 0))
			break;
		left -= share;
	}
	if (left && !refused) {
		int64_t u[PT_MAX_VALUES] = { 0, (int64_t)left };

		if (!pt_stacks_add_under(st, &alone, s->mark, u))
			left = 0;
	}
	if (copies)
		*copies += pt_stacks_count(st) - had;
	return amount - left;
}

void pt_stacks_add_to(struct pt_stacks *st, size_t id, const int64_t *v)
{
	for (int k = 0; k < PT_MAX_VALUES; k++)
		st->v[id].v[k] += v[k];
}

void pt_stacks_get(const struct pt_stacks *st, size_t id, struct pt_sample *smp, int64_t *v)
{
	const struct entry *e = &st->v[id];

	*smp = (struct pt_sample){ .tid = e->tid, .comm = e->comm, .state = e->state,
				   .syscall = e->syscall, .frames = st->frames + e->off,
				   .n = (int)e->n, .flags = e->flags };
	memcpy(v, e->v, sizeof(e->v));
}

size_t pt_stacks_nframes(const struct pt_stacks *st)
{
	return st->nframes;
}

int pt_stacks_merge(struct pt_stacks *dst, const struct pt_stacks *src, int sign)
{
	/* In src's id order: the entries new to dst take dst's next ids in
	 * the order src first saw them. */
	for (size_t i = 0; i < src->n; i++) {
		struct pt_sample smp;
		int64_t v[PT_MAX_VALUES];
		int rc;

		pt_stacks_get(src, i, &smp, v);
		for (int k = 0; k < PT_MAX_VALUES; k++)
			v[k] *= sign;
		if ((rc = pt_stacks_add(dst, &smp, v)) < 0 && rc != -E2BIG)
			return rc;
	}
	return 0;
}
