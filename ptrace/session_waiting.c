/* The waiting profiles: time threads spend blocked, from their states at
 * each tick, never from a stop of a blocked thread beyond the first (its
 * stack is the one cached since it blocked: it executed nothing since).
 *   block: every wait (state S or D), weighted by the time since the tick
 *          before; a new wait (the thread ran or changed system call in
 *          between, or is seen for the first time) counts one contention.
 *   mutex: the part of it spent in futex (lock and condition waiters).
 * With a window (seconds=) a session gathers its own; without one it
 * answers with what the continuous watch gathered since it started
 * (session_watch.c), or -EAGAIN if there is none. */
#include <errno.h>
#include <stdlib.h>
#include <sys/syscall.h>

#include "ptrace/ptrace_internal.h"
#include "ptrace/session.h"
#include "ptrace/stacks.h"

/* What the waits remember of a thread between ticks. */
struct seen {
	pid_t tid;             /* 0: an empty slot */
	int syscall;
	int waiting;           /* blocked at the tick before */
	uint64_t at_ns;        /* when it was last looked at */
};

struct pt__waits {
	int futex_only;
	uint64_t since_ns;     /* a thread first seen counts from here */
	struct pt_stacks *stacks;
	struct seen *seen;     /* open addressing by tid, cap a power of two */
	size_t cap, used;
	uint64_t samples;
};

int pt__waits_new(struct pt__waits **out, int futex_only, uint64_t since_ns, size_t max_stacks)
{
	struct pt__waits *w = calloc(1, sizeof(*w));
	int err;

	*out = NULL;
	if (!w)
		return -ENOMEM;
	w->futex_only = futex_only;
	w->since_ns = since_ns;
	if ((err = pt_stacks_new(&w->stacks, max_stacks))) {
		free(w);
		return err;
	}
	*out = w;
	return 0;
}

void pt__waits_free(struct pt__waits *w)
{
	if (!w)
		return;
	pt_stacks_free(w->stacks);
	free(w->seen);
	free(w);
}

const struct pt_stacks *pt__waits_stacks(const struct pt__waits *w) { return w->stacks; }
uint64_t pt__waits_samples(const struct pt__waits *w) { return w->samples; }
uint64_t pt__waits_since(const struct pt__waits *w) { return w->since_ns; }

static int seen_grow(struct pt__waits *w)
{
	size_t cap = w->cap ? w->cap * 2 : 256;
	struct seen *v = calloc(cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < w->cap; i++) {
		size_t j;

		if (!w->seen[i].tid)
			continue;
		for (j = (size_t)w->seen[i].tid & (cap - 1); v[j].tid; j = (j + 1) & (cap - 1)) {
		}
		v[j] = w->seen[i];
	}
	free(w->seen);
	w->seen = v;
	w->cap = cap;
	return 0;
}

/* The record of tid, created (zeroed but for tid) at its first sight; NULL
 * if memory ran out. */
static struct seen *seen_get(struct pt__waits *w, pid_t tid)
{
	size_t j;

	if ((w->used + 1) * 2 > w->cap && seen_grow(w))
		return NULL;
	for (j = (size_t)tid & (w->cap - 1); w->seen[j].tid; j = (j + 1) & (w->cap - 1))
		if (w->seen[j].tid == tid)
			return &w->seen[j];
	w->used++;
	w->seen[j] = (struct seen){ .tid = tid, .syscall = -1 };
	return &w->seen[j];
}

void pt__waits_on_state(struct pt__waits *w, const struct pt_thread_state *st)
{
	struct seen *sn = seen_get(w, st->tid);
	int waiting = st->state == 'S' || st->state == 'D';
	uint64_t since;

	if (!sn)
		return;
	since = sn->at_ns ? sn->at_ns : w->since_ns;
	if (waiting && (!w->futex_only || st->syscall == SYS_futex) && st->at_ns > since) {
		int fresh = !sn->waiting || st->ran || st->syscall != sn->syscall;
		int64_t v[PT_MAX_VALUES] = { fresh, (int64_t)(st->at_ns - since) };
		struct pt_sample smp = { .pid = st->pid, .tid = st->tid, .comm = st->comm,
					 .state = st->state, .syscall = st->syscall,
					 .frames = st->stack, .n = st->stack ? st->n : 0 };

		w->samples++;
		pt_stacks_add(w->stacks, &smp, v);
	}
	sn->waiting = waiting;
	sn->syscall = st->syscall;
	sn->at_ns = st->at_ns;
}

/* ---- the block and mutex sessions ---------------------------------------- */

struct waiting_session {
	struct pt_session base;
	struct pt__waits *w;       /* a window's own */
	struct pt_stacks *copy;    /* without a window: the watch's, copied */
	uint64_t samples, since_ns;
};

static int waiting_start(struct pt_session *ss)
{
	struct waiting_session *ws = PT_SESSION_OF(ss, struct waiting_session);
	int futex_only = ss->kind == &pt_kind_mutex, err;
	const struct pt__waits *watch;

	if (ss->req->duration_ns)
		return pt__waits_new(&ws->w, futex_only, ss->start_ns, (size_t)ss->o->max_stacks);
	if (!(watch = pt__watch_waits(ss, futex_only)))
		return -EAGAIN;   /* no continuous watch of this target */
	if ((err = pt_stacks_new(&ws->copy, (size_t)ss->o->max_stacks)))
		return err;
	ws->samples = pt__waits_samples(watch);
	ws->since_ns = pt__waits_since(watch);
	return pt_stacks_merge(ws->copy, pt__waits_stacks(watch), 1);
}

static void waiting_on_state(struct pt_session *ss, const struct pt_thread_state *st)
{
	struct waiting_session *ws = PT_SESSION_OF(ss, struct waiting_session);

	if (ws->w)
		pt__waits_on_state(ws->w, st);
}

static int waiting_finish(struct pt_session *ss)
{
	struct waiting_session *ws = PT_SESSION_OF(ss, struct waiting_session);
	const struct pt_stacks *st = ws->w ? pt__waits_stacks(ws->w) : ws->copy;
	uint64_t since = ws->w ? ss->start_ns : ws->since_ns;
	struct pt_profile *p;
	int err = pt_stacks_build(st, ss->t, &ss->req->profile);

	if ((p = ss->req->profile)) {
		p->time_ns = ss->start_wall - (ss->start_ns - since);
		p->duration_ns = pt__now_ns() - since;
		p->hz = ss->req->hz;
		p->thread_samples = ws->w ? pt__waits_samples(ws->w) : ws->samples;
	}
	pt__sampler_log(ss->s, 1, "%s: done pid=%d waits=%llu stacks=%zu%s%s", ss->kind->name,
			(int)ss->req->pid, (unsigned long long)(p ? p->thread_samples : 0),
			pt_stacks_count(st), ws->w ? "" : " (since the watch began)",
			atomic_load(&ss->req->cancel) ? " (client gone)" : "");
	return err;
}

static void waiting_free(struct pt_session *ss)
{
	struct waiting_session *ws = PT_SESSION_OF(ss, struct waiting_session);

	pt__waits_free(ws->w);
	pt_stacks_free(ws->copy);
}

const struct pt_session_kind pt_kind_block = {
	.name = "block",
	.size = sizeof(struct waiting_session),
	.flags = PT_KIND_F_ATTACH | PT_KIND_F_WINDOW | PT_KIND_F_TICKS | PT_KIND_F_STATES,
	.start = waiting_start,
	.on_thread_state = waiting_on_state,
	.finish = waiting_finish,
	.free = waiting_free,
};

const struct pt_session_kind pt_kind_mutex = {
	.name = "mutex",
	.size = sizeof(struct waiting_session),
	.flags = PT_KIND_F_ATTACH | PT_KIND_F_WINDOW | PT_KIND_F_TICKS | PT_KIND_F_STATES,
	.start = waiting_start,
	.on_thread_state = waiting_on_state,
	.finish = waiting_finish,
	.free = waiting_free,
};
