/* The waiting profiles: time threads spend blocked, from their states at
 * each tick, never from a stop of a blocked thread beyond the first (its
 * stack is the one cached since it blocked: it executed nothing since).
 *   block: every wait (state S or D), weighted by the time since the tick
 *          before less what the thread spent on a core or waiting for one
 *          meanwhile (its clocks: a thread that ran in between waited only
 *          the rest); a new wait (the thread ran or changed system call in
 *          between, or is seen for the first time) counts one contention.
 *          A thread born in the window counts from its birth, not from
 *          the window's start. A thread that ends while waiting adds its
 *          wait up to its end (its clocks read then), as the next tick
 *          would have; one that waited where no tick saw it (a thread per
 *          request that sleeps between two ticks), its clocks say how
 *          long: that goes, under a frame that says so, to the stacks
 *          the ended threads were seen waiting in, in proportion to their
 *          time (as the CPU profile settles its unsampled CPU).
 *   mutex: the part of it spent in futex (lock and condition waiters).
 * A Go program podprof reads is looked at through its goroutines instead
 * (gowaits.c): its threads park in futex whatever its goroutines wait for.
 * Its threads' waits are the threads view's (pt_kind_block_threads,
 * pt_kind_mutex_threads), as every other program's.
 * With a window (seconds=) a session gathers its own; without one it
 * answers with what the continuous watch gathered since it started
 * (watch.c), or -EAGAIN if there is none. */
#include "ptrace/sessions/waiting.h"

#include <errno.h>
#include <stdio.h>
#include <sys/syscall.h>

#include "base/array.h"
#include "base/map.h"
#include "base/mem.h"
#include "ptrace/sampler/log.h"
#include "ptrace/sampler/targets.h"
#include "ptrace/sampler/group.h"
#include "ptrace/profile/profile.h"
#include "ptrace/core/internal.h"
#include "ptrace/sampler/sampler.h"
#include "ptrace/sampler/session.h"
#include "ptrace/core/stacks.h"
#include "ptrace/sessions/gowaits.h"

/* What the waits remember of a thread between ticks. */
struct seen {
	pid_t tid;
	int syscall;
	int waiting;           /* blocked at the tick before */
	int32_t stack;         /* then, the entry its wait went to, or -1 */
	int32_t last;          /* the entry its last wait went to, or -1 */
	uint64_t at_ns;        /* when it was last looked at */
	uint64_t run_ns, rq_ns;   /* its CPU and its time waiting for a core, then */
	/* A thread born in the window: its birth (at 0: not born in it, or
	 * told too late to know its clocks then) and its clocks then, what its
	 * waits put into stacks since, and whether a look found it stopped.
	 * At its end its whole life's wait, from its final clocks, less what
	 * went into stacks, is unseen: waits between looks that found it not
	 * waiting (on a busy machine a look often finds a short thread back
	 * from its nap and waiting for a core) count too. Not from the looks'
	 * own clocks: a thread waiting for a core, or running, has clocks
	 * that lag (its run delay is added when it gets its core back). */
	uint64_t born_at, born_run, born_rq, stacked_ns;
	int stopped;
};

/* Waits gathered from thread states: futex_only keeps the futex ones
 * (mutex); a thread first seen counts from since_ns. */
struct waits {
	int futex_only;
	uint64_t since_ns;     /* a thread first seen counts from here */
	struct pt_stacks *stacks;
	struct seen *seen;     /* the live threads' (an ended one's goes) */
	size_t nseen, cap;
	struct base_map by_tid;   /* tid -> index into seen */
	uint64_t samples;
	uint64_t unseen_ns;       /* waits of ended threads that no tick saw */
	struct base_map ended;    /* entry id + 1 -> 1: an ended thread's last wait
				   * (bounded as the entries are, by max_stacks) */
	struct pt__gowaits *go;   /* a Go program's goroutines fill stacks instead
				   * (the owner's, shared by block and mutex) */
};

/* Less than this of a thread's life neither on a core nor waiting for one,
 * unseen, is not counted: a traced thread spends some in its birth stop and
 * in podprof's stops, which its clocks cannot tell from a wait. */
#define UNSEEN_MIN_NS 200000ull

static void waits_free(struct waits *w)
{
	if (!w)
		return;
	pt_stacks_free(w->stacks);
	base_free(w->seen);
	base_map_free(&w->by_tid);
	base_map_free(&w->ended);
	base_free(w);
}

static int waits_new(struct waits **out, int futex_only, uint64_t since_ns, size_t max_stacks)
{
	struct waits *w = base_calloc(1, sizeof(*w));
	int err;

	*out = NULL;
	if (!w)
		return -ENOMEM;
	w->futex_only = futex_only;
	w->since_ns = since_ns;
	if ((err = pt_stacks_new(&w->stacks, max_stacks))) {
		waits_free(w);
		return err;
	}
	*out = w;
	return 0;
}

/* The record of tid, created at its first sight; NULL if memory ran out. */
static struct seen *seen_get(struct waits *w, pid_t tid)
{
	uint64_t *i = base_map_get(&w->by_tid, (uint64_t)tid);
	struct seen *sn;

	if (i)
		return &w->seen[*i];
	if (base_map_put(&w->by_tid, (uint64_t)tid, w->nseen))
		return NULL;
	if (!(sn = BASE_ARRAY_PUSH(w->seen, w->nseen, w->cap))) {
		base_map_del(&w->by_tid, (uint64_t)tid);
		return NULL;
	}
	sn->tid = tid;
	sn->syscall = -1;
	sn->stack = sn->last = -1;
	return sn;
}

/* Forgets tid's record: the last one takes its place. */
static void seen_drop(struct waits *w, pid_t tid)
{
	uint64_t *i = base_map_get(&w->by_tid, (uint64_t)tid), at;

	if (!i)
		return;
	at = *i;
	base_map_del(&w->by_tid, (uint64_t)tid);
	if (at != --w->nseen) {
		w->seen[at] = w->seen[w->nseen];
		if ((i = base_map_get(&w->by_tid, (uint64_t)w->seen[at].tid)))
			*i = at;
	}
}

/* The time since sn's last look, at_ns, at which the thread's clocks said
 * run_ns and rq_ns, that it spent neither on a core nor waiting for one:
 * blocked. The whole time if its clocks then are not known. */
static uint64_t blocked_ns(const struct seen *sn, uint64_t since, uint64_t at_ns, uint64_t run_ns,
			   uint64_t rq_ns)
{
	uint64_t span = at_ns - since, busy;

	if (!sn->at_ns || run_ns < sn->run_ns || rq_ns < sn->rq_ns)
		return span;
	busy = (run_ns - sn->run_ns) + (rq_ns - sn->rq_ns);
	return span > busy ? span - busy : 0;
}

static void waits_on_state(struct waits *w, const struct pt_thread_state *st)
{
	struct seen *sn = seen_get(w, st->tid);
	int waiting = st->state == 'S' || st->state == 'D';
	uint64_t since;

	if (!sn)
		return;
	since = sn->at_ns ? sn->at_ns : w->since_ns;
	if (st->at_ns <= sn->at_ns)
		return;   /* a look from before its birth (a tick that began before the clone) */
	sn->stack = -1;
	if (st->state == 'T' || st->state == 't')
		sn->stopped = 1;   /* a group stop or ours: neither running nor waiting */
	if (waiting && (!w->futex_only || st->syscall == SYS_futex) && st->at_ns > since) {
		int fresh = !sn->waiting || st->ran || st->syscall != sn->syscall;
		int64_t v[PT_MAX_VALUES] = { fresh, (int64_t)blocked_ns(sn, since, st->at_ns,
									  st->run_ns, st->wait_ns) };
		struct pt_sample smp = { .pid = st->pid, .tid = st->tid, .comm = st->comm,
					 .state = st->state, .syscall = st->syscall,
					 .frames = st->stack, .n = st->stack ? st->n : 0 };
		int id = pt_stacks_add(w->stacks, &smp, v);

		w->samples++;
		sn->stack = id >= 0 ? id : -1;
		if (id >= 0) {
			sn->last = id;
			sn->stacked_ns += (uint64_t)v[1];
		}
	}
	sn->waiting = waiting;
	sn->syscall = st->syscall;
	sn->at_ns = st->at_ns;
	sn->run_ns = st->run_ns;
	sn->rq_ns = st->wait_ns;
}

/* A thread ended: if it was waiting at its last look, its wait lasted until
 * its end, less what its clocks (read at its end) say it ran or waited for
 * a core since; what it waited where no look saw it wait is unseen (for
 * one born in the window, from its whole life: struct seen). Its record
 * goes: a new thread may take its tid. */
static void waits_on_exit(struct waits *w, const struct pt_exit *x)
{
	uint64_t *i = base_map_get(&w->by_tid, (uint64_t)x->tid);
	struct seen *sn = i ? &w->seen[*i] : NULL;

	uint64_t blocked, end;
	int life;

	if (!sn)
		return;
	end = pt_exit_end(x, sn->at_ns);   /* its last look or its birth */
	life = !w->futex_only && sn->born_at && !sn->stopped && x->run_ns && end > sn->born_at &&
	       x->run_ns >= sn->born_run && x->wait_ns >= sn->born_rq;
	if (sn->at_ns && x->run_ns && end > sn->at_ns) {
		blocked = blocked_ns(sn, sn->at_ns, end, x->run_ns, x->wait_ns);
		if (sn->stack >= 0) {
			int64_t v[PT_MAX_VALUES] = { 0, (int64_t)blocked };

			pt_stacks_add_to(w->stacks, (size_t)sn->stack, v);
			sn->stacked_ns += blocked;
		} else if (!w->futex_only && !life && !sn->stopped && blocked >= UNSEEN_MIN_NS) {
			w->unseen_ns += blocked;   /* where, no tick saw */
		}
	}
	if (life) {
		uint64_t span = end - sn->born_at;
		uint64_t busy = (x->run_ns - sn->born_run) + (x->wait_ns - sn->born_rq);
		uint64_t all = span > busy ? span - busy : 0;

		if (all > sn->stacked_ns && all - sn->stacked_ns >= UNSEEN_MIN_NS)
			w->unseen_ns += all - sn->stacked_ns;   /* where, no tick saw */
	}
	if (sn->last >= 0)
		base_map_put(&w->ended, (uint64_t)sn->last + 1, 1);   /* no memory: less to settle on */
	seen_drop(w, x->tid);
}

/* A thread born (ev, a PT_EV_CLONE): it counts from its birth, its clocks
 * from 0, when its FORK record's time is known and within the waits;
 * else from now, with the clocks the event carries as it was told at its
 * birth stop or a rescan (it may have run and waited for a core before:
 * not a wait). A record of the same tid, whose end was not seen, is
 * forgotten. */
static void waits_on_clone(struct waits *w, const struct pt_event *ev, uint64_t now)
{
	struct seen *sn;

	seen_drop(w, ev->child);
	if (!(sn = seen_get(w, ev->child)))
		return;
	if (ev->born_ns && ev->born_ns >= w->since_ns) {
		sn->at_ns = ev->born_ns;
	} else {
		sn->at_ns = now;
		sn->run_ns = ev->born_ns ? 0 : ev->run_ns;
		sn->rq_ns = ev->born_ns ? 0 : ev->wait_ns;
		if (ev->born_ns)
			return;   /* born before the waits, told late: its clocks at now are not known */
	}
	sn->born_at = sn->at_ns;
	sn->born_run = sn->run_ns;
	sn->born_rq = sn->rq_ns;
}

static uint64_t ended_weight(void *arg, size_t id, const struct pt_sample *e, const int64_t *v)
{
	(void)e;
	return v[1] > 0 && base_map_get(arg, (uint64_t)id + 1) ? (uint64_t)v[1] : 0;
}

/* The waits no tick saw, `unseen` ns, settled on st as the header says
 * (ended: the entries of the ended threads' last waits). Returns how much
 * of it went in (a table full refuses the rest). */
static uint64_t settle_unseen(struct pt_stacks *st, const struct base_map *ended, uint64_t unseen)
{
	struct pt_spread spread = { .mark = PT_MARK_UNSEEN_WAIT, .weight = ended_weight,
				    .arg = (void *)ended };

	return unseen ? pt_stacks_spread(st, pt_stacks_count(st), &spread, unseen, NULL) : 0;
}

/* ---- the continuous watch's waits ---------------------------------------- */

/* The watch's waits (watch.c), in a target slot of this file's:
 * requests without a window find them there. */
struct pt__watched {
	struct waits *block, *mutex;
	struct pt__gowaits *go;    /* a Go program: its goroutines' waits */
};

static const char watched_key;

static void watched_free(void *p)
{
	struct pt__watched *w = p;

	if (!w)
		return;
	waits_free(w->block);
	waits_free(w->mutex);
	pt__gowaits_free(w->go);
	base_free(w);
}

int pt__watched_start(struct pt_session *ss, struct pt__watched **out)
{
	void **slot = pt__target_slot(ss, &watched_key, watched_free, NULL);
	size_t max = (size_t)ss->o->max_stacks;
	struct pt__watched *w;
	int err;

	*out = NULL;
	if (!slot)
		return -ENOMEM;
	/* A new watch (the target's last one ended): counts start again. */
	watched_free(*slot);
	if (!(*slot = w = base_calloc(1, sizeof(*w))))
		return -ENOMEM;
	if ((err = waits_new(&w->block, 0, ss->start_ns, max)) ||
	    (err = waits_new(&w->mutex, 1, ss->start_ns, max)) ||
	    (err = pt__gowaits_new(ss, w->block->stacks, w->mutex->stacks, &w->go)))
		return err;
	w->block->go = w->mutex->go = w->go;
	ss->no_states = w->go != NULL;   /* the goroutines', not the threads' */
	*out = w;
	return 0;
}

void pt__watched_end(struct pt__watched *w)
{
	pt__gowaits_end(w->go);
}

void pt__watched_on_state(struct pt__watched *w, const struct pt_thread_state *st)
{
	if (w->go)
		return;   /* the goroutines', at the tick's end */
	waits_on_state(w->block, st);
	waits_on_state(w->mutex, st);
}

void pt__watched_on_tick(struct pt__watched *w, uint64_t now)
{
	if (w->go)
		pt__gowaits_look(w->go, now, 0);
}

void pt__watched_on_exit(struct pt__watched *w, const struct pt_exit *x)
{
	if (w->go)
		return;
	waits_on_exit(w->block, x);
	waits_on_exit(w->mutex, x);
}

void pt__watched_on_clone(struct pt__watched *w, const struct pt_event *ev)
{
	uint64_t now = pt__now_ns();

	if (w->go)
		return;
	waits_on_clone(w->block, ev, now);
	waits_on_clone(w->mutex, ev, now);
}

/* The watch's waits of ss's target, or NULL if no watch runs on it. */
static const struct waits *watched_waits(struct pt_session *ss, int futex_only)
{
	void **slot = pt__target_slot(ss, &watched_key, watched_free, NULL);
	struct pt__watched *w = slot ? *slot : NULL;

	return w ? (futex_only ? w->mutex : w->block) : NULL;
}

/* ---- the block and mutex sessions ---------------------------------------- */

struct waiting_session {
	struct pt_session base;
	struct waits *w;           /* a window's own */
	struct pt_stacks *copy;    /* without a window: the watch's, copied */
	uint64_t samples, since_ns, unseen_ns;
	struct pt__gowaits_stats go;   /* a Go program's looks (go_version set) */
	char go_version[32];
};

static int is_mutex(const struct pt_session *ss)
{
	return ss->kind == &pt_kind_mutex || ss->kind == &pt_kind_mutex_threads;
}

static int threads_view(const struct pt_session *ss)
{
	return ss->kind == &pt_kind_block_threads || ss->kind == &pt_kind_mutex_threads;
}

/* What the goroutines' looks found, for the profile. */
static void keep_go(struct waiting_session *ws, const struct pt__gowaits *go)
{
	pt__gowaits_stats(go, &ws->go);
	snprintf(ws->go_version, sizeof(ws->go_version), "%s", pt__gowaits_version(go));
}

static int waiting_start(struct pt_session *ss)
{
	struct waiting_session *ws = PT_SESSION_OF(ss, struct waiting_session);
	int futex_only = is_mutex(ss), err;
	const struct waits *watch;

	if (ss->req->duration_ns) {
		if ((err = waits_new(&ws->w, futex_only, ss->start_ns, (size_t)ss->o->max_stacks)))
			return err;
		if (threads_view(ss))
			return 0;
		err = pt__gowaits_new(ss, futex_only ? NULL : ws->w->stacks,
				      futex_only ? ws->w->stacks : NULL, &ws->w->go);
		ss->no_states = ws->w->go != NULL;   /* the goroutines', not the threads' */
		return err;
	}
	if (!(watch = watched_waits(ss, futex_only)))
		return -EAGAIN;   /* no continuous watch of this target */
	if (watch->go && threads_view(ss))
		return -ENOTSUP;   /* the watch of a Go program keeps its goroutines' waits */
	if (watch->go) {
		/* A look now: the answer holds the waits up to the request, not
		 * up to the watch's last look, which can be a whole period old
		 * (gowaits.c: 50 times a look's cost, 0.2 s when a busy
		 * machine makes one take 4 ms). None if the watch ended. */
		pt__gowaits_look(watch->go, pt__now_ns(), PT__GOWAITS_FRESH);
		keep_go(ws, watch->go);
	}
	if ((err = pt_stacks_new(&ws->copy, (size_t)ss->o->max_stacks)))
		return err;
	ws->samples = watch->samples;
	ws->since_ns = watch->since_ns;
	if ((err = pt_stacks_merge(ws->copy, watch->stacks, 1)))
		return err;
	/* An empty copy: its entries have the watch's ids. */
	ws->unseen_ns = settle_unseen(ws->copy, &watch->ended, watch->unseen_ns);
	return 0;
}

static void waiting_on_state(struct pt_session *ss, const struct pt_thread_state *st)
{
	struct waiting_session *ws = PT_SESSION_OF(ss, struct waiting_session);

	if (ws->w && !ws->w->go)   /* a Go program's: its goroutines, at the tick's end */
		waits_on_state(ws->w, st);
}

static void waiting_on_tick(struct pt_session *ss, uint64_t now)
{
	struct waiting_session *ws = PT_SESSION_OF(ss, struct waiting_session);

	if (ws->w && ws->w->go)
		pt__gowaits_look(ws->w->go, now, 0);
}

static void waiting_on_exit(struct pt_session *ss, const struct pt_exit *x)
{
	struct waiting_session *ws = PT_SESSION_OF(ss, struct waiting_session);

	if (ws->w && !ws->w->go)
		waits_on_exit(ws->w, x);
}

static void waiting_on_clone(struct pt_session *ss, const struct pt_event *ev)
{
	struct waiting_session *ws = PT_SESSION_OF(ss, struct waiting_session);

	if (ws->w && !ws->w->go)
		waits_on_clone(ws->w, ev, pt__now_ns());
}

static int waiting_finish(struct pt_session *ss)
{
	struct waiting_session *ws = PT_SESSION_OF(ss, struct waiting_session);
	const struct pt_stacks *st = ws->w ? ws->w->stacks : ws->copy;
	uint64_t since = ws->w ? ss->start_ns : ws->since_ns;
	struct pt_profile *p;
	int err;

	if (ws->w && ws->w->go) {
		pt__gowaits_look(ws->w->go, pt__now_ns(), PT__GOWAITS_NOW);   /* the window's end */
		keep_go(ws, ws->w->go);
	} else if (ws->w) {
		ws->unseen_ns = settle_unseen(ws->w->stacks, &ws->w->ended, ws->w->unseen_ns);
	}
	err = pt_profile_build(st, ss->t, &ss->req->profile);

	if ((p = ss->req->profile)) {
		p->time_ns = ss->start_wall - (ss->start_ns - since);
		p->duration_ns = pt__now_ns() - since;
		p->hz = ss->req->hz;
		p->thread_samples = ws->w ? ws->w->samples : ws->samples;
		p->unsampled_ns = ws->unseen_ns;   /* what was settled */
		if (ws->go_version[0]) {
			/* A Go program's goroutines: waits seen, goroutines
			 * that moved while read (the looks in the note). */
			snprintf(p->go_version, sizeof(p->go_version), "%s", ws->go_version);
			p->thread_samples = ws->go.waits;
			p->goroutines_torn = ws->go.torn;
		}
	}
	if (ws->go_version[0])
		pt__log(ss->s, 1, "%s: pid=%d %s: %llu looks at the goroutines (%llu on another "
				"session's read), the last %.2f ms, every %.0f ms; %llu parked",
				ss->kind->name, (int)ss->req->pid, ws->go_version,
				(unsigned long long)ws->go.looks, (unsigned long long)ws->go.reads_shared,
				(double)ws->go.look_ns / 1e6, (double)ws->go.period_ns / 1e6,
				(unsigned long long)ws->go.parked);
	pt__log(ss->s, 1, "%s: done pid=%d waits=%llu stacks=%zu%s%s", ss->kind->name,
			(int)ss->req->pid, (unsigned long long)(p ? p->thread_samples : 0),
			pt_stacks_count(st), ws->w ? "" : " (since the watch began)",
			pt__request_cancelled(ss->req) ? " (client gone)" : "");
	return err;
}

static void waiting_free(struct pt_session *ss)
{
	struct waiting_session *ws = PT_SESSION_OF(ss, struct waiting_session);

	if (ws->w)
		pt__gowaits_free(ws->w->go);
	waits_free(ws->w);
	pt_stacks_free(ws->copy);
}

/* The four kinds differ only in what they keep (is_mutex, threads_view). */
#define WAITING_KIND(label)                                                              \
	{                                                                                \
		.name = label, .size = sizeof(struct waiting_session),                   \
		.flags = PT_KIND_F_ATTACH | PT_KIND_F_WINDOW | PT_KIND_F_TICKS | PT_KIND_F_STATES, \
		.start = waiting_start, .on_thread_state = waiting_on_state,             \
		.on_tick = waiting_on_tick,                                              \
		.on_clone = waiting_on_clone, .on_exit = waiting_on_exit,                \
		.finish = waiting_finish, .free = waiting_free,                          \
	}

const struct pt_session_kind pt_kind_block = WAITING_KIND("block");
const struct pt_session_kind pt_kind_mutex = WAITING_KIND("mutex");
const struct pt_session_kind pt_kind_block_threads = WAITING_KIND("block");
const struct pt_session_kind pt_kind_mutex_threads = WAITING_KIND("mutex");
