/* The timeline (trace): each thread's state at each tick, kept as changes,
 * its running drawn from its CPU clock (draw_run), with the CPU samples the
 * ticks take anyway, thread creation and exit, and the target's RSS. A blocked thread's stack is its cached one (no stop for
 * a thread that has not run since it was last seen). Bounded: past
 * max_trace_events the timeline ends early, says so, and stays valid.
 * Owns the timeline until the profile takes it, the session's stack table
 * and what it remembers of each thread (found by tid through a base_map).
 * Sampler thread only, as every session hook. */
#include "ptrace/sessions/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/array.h"
#include "base/map.h"
#include "base/mem.h"
#include "ptrace/sampler/log.h"
#include "ptrace/sampler/group.h"
#include "ptrace/proc/proc.h"
#include "ptrace/core/internal.h"
#include "ptrace/sampler/sampler.h"
#include "ptrace/sampler/session.h"
#include "ptrace/core/stacks.h"
#include "ptrace/mechanism/mechanism.h"

#define MAX_EVENTS 400000u          /* 24 bytes each: about 10 MB (--max-trace-events) */
#define RSS_EVERY_NS 100000000ull   /* the RSS counter, ten times a second */
#define SCHED_TICK_NS 12000000ull    /* longer than a scheduler tick at HZ=100 */
#define RAN_GAP_NS 1000ull          /* a run shorter than an interval by less: all of it */

/* What the session remembers of a thread between ticks: one per thread of
 * the timeline (thrs[i] is tl->threads[i]). */
struct thr {
	pid_t tid;
	uint32_t idx;          /* into the timeline's threads (and thrs) */
	uint8_t state;         /* enum pt_tl_state last emitted, 0 if none */
	int16_t syscall;
	int exited;
	uint64_t run_ns, wait_ns, last_ns;
	/* CPU its clock counted that no interval had room for yet (a clock
	 * moves in lumps, at scheduler ticks, while a thread keeps its core):
	 * drawn in the next ones, so the running drawn adds up to the clock. */
	uint64_t carry_ns;
};

struct trace_session {
	struct pt_session base;
	struct pt_stacks *stacks;
	struct pt_timeline *tl;
	size_t threads_cap, events_cap;
	struct thr *thrs;      /* as many as tl->nthreads */
	size_t thrs_cap;
	struct base_map by_tid;   /* tid (never 0) -> the index of its latest thread */
	uint64_t rss_at, page;
	int statm_fd;
};

static int16_t syscall_of(int nr)
{
	return nr >= 0 && nr < INT16_MAX ? (int16_t)nr : -1;
}

/* The timeline state of a thread state (0: not one a timeline shows). */
static uint8_t classify(const struct pt_thread_state *st, const struct thr *th)
{
	switch (st->state) {
	case 'R':
		/* Runnable but not on a core: its run delay grew more than its
		 * CPU time since the tick before, or its CPU clock did not move
		 * over more than a scheduler tick (a thread on a core has its
		 * clock brought up at every tick; one waiting has its run delay
		 * counted only once it gets a core back). */
		if (!th->last_ns)
			return PT_TL_RUNNING;
		if (st->run_ns == th->run_ns && st->at_ns - th->last_ns > SCHED_TICK_NS)
			return PT_TL_RUNNABLE;
		return st->wait_ns - th->wait_ns > st->run_ns - th->run_ns ? PT_TL_RUNNABLE : PT_TL_RUNNING;
	case 'T':
	case 't':
		return PT_TL_STOPPED;
	case 'D':
		return PT_TL_SYSCALL;
	case 'S':
		break;
	default:
		return 0;
	}
	switch (st->syscall) {
	case SYS_futex:
		return PT_TL_SYNC;
	case SYS_epoll_wait: case SYS_epoll_pwait: case SYS_epoll_pwait2: case SYS_poll:
	case SYS_ppoll: case SYS_select: case SYS_pselect6: case SYS_accept: case SYS_accept4:
	case SYS_recvfrom: case SYS_recvmsg: case SYS_recvmmsg: case SYS_connect:
		return PT_TL_NET;
	case SYS_nanosleep: case SYS_clock_nanosleep: case SYS_pause:
		return PT_TL_SLEEP;
	default:
		return PT_TL_SYSCALL;
	}
}

/* Appends an event; returns 0, or -E2BIG once the cap is reached (the
 * timeline then ends: truncated). */
static int emit(struct trace_session *ts, const struct pt_tl_event *ev)
{
	struct pt_timeline *tl = ts->tl;
	size_t cap = ts->base.o->max_trace_events > 0 ? (size_t)ts->base.o->max_trace_events : MAX_EVENTS;
	struct pt_tl_event *e;

	if (tl->truncated)
		return -E2BIG;
	if (tl->nevents >= cap) {
		tl->truncated = 1;
		tl->duration_ns = ev->t_ns;   /* the trace ends here */
		pt__log(ts->base.s, 2, "trace: pid=%d: %zu events, the cap (--max-trace-events): "
				"the trace ends at %.3f s", (int)ts->base.req->pid, cap,
				(double)ev->t_ns / 1e9);
		return -E2BIG;
	}
	if (!(e = BASE_ARRAY_PUSH(tl->events, tl->nevents, ts->events_cap)))
		return -ENOMEM;
	*e = *ev;
	return 0;
}

/* The thread with this tid, added to the timeline at its first sight (or
 * when its tid is reused after an exit: a new timeline thread). */
static struct thr *thread_get(struct trace_session *ts, pid_t tid, const char *comm, uint64_t t,
			      int created)
{
	struct pt_timeline *tl = ts->tl;
	uint64_t *at = base_map_get(&ts->by_tid, (uint64_t)tid);
	size_t i = tl->nthreads;
	struct pt_tl_thread *nt;

	if (at && !ts->thrs[*at].exited) {
		/* Seen at its clone, before it had a name: name it now. */
		nt = &tl->threads[*at];
		if (!nt->name[0] && comm && comm[0])
			snprintf(nt->name, sizeof(nt->name), "%s", comm);
		return &ts->thrs[*at];
	}
	if (BASE_ARRAY_RESERVE(tl->threads, ts->threads_cap, i + 1) ||
	    BASE_ARRAY_RESERVE(ts->thrs, ts->thrs_cap, i + 1) ||
	    base_map_put(&ts->by_tid, (uint64_t)tid, i))
		return NULL;
	nt = &tl->threads[i];
	*nt = (struct pt_tl_thread){ .tid = tid, .start_ns = t, .created = created };
	snprintf(nt->name, sizeof(nt->name), "%s", comm ? comm : "");
	ts->thrs[i] = (struct thr){ .tid = tid, .idx = (uint32_t)i, .syscall = -1 };
	tl->nthreads++;
	return &ts->thrs[i];
}

static uint64_t since_start(const struct pt_session *ss, uint64_t at)
{
	return at > ss->start_ns ? at - ss->start_ns : 0;
}

static int trace_start(struct pt_session *ss)
{
	struct trace_session *ts = PT_SESSION_OF(ss, struct trace_session);
	char path[64];

	ts->statm_fd = -1;
	if (!(ts->tl = base_calloc(1, sizeof(*ts->tl))))
		return -ENOMEM;
	ts->page = (uint64_t)sysconf(_SC_PAGESIZE);
	snprintf(path, sizeof(path), "/proc/%d/statm", (int)ss->req->pid);
	ts->statm_fd = open(path, O_RDONLY | O_CLOEXEC);
	return pt_stacks_new(&ts->stacks, (size_t)ss->o->max_stacks);
}

/* The target's RSS as a counter, at most every RSS_EVERY_NS. */
static void sample_rss(struct trace_session *ts, uint64_t at)
{
	char buf[128], *end;
	unsigned long long size, rss;

	if (ts->rss_at && at - ts->rss_at < RSS_EVERY_NS)
		return;
	ts->rss_at = at;
	if (pt__thread_pread(ts->statm_fd, buf, sizeof(buf)) <= 0)
		return;
	/* "1234 567 ..." : size, then resident, in pages */
	size = strtoull(buf, &end, 10);
	rss = strtoull(end, NULL, 10);
	if (!size)
		return;
	emit(ts, &(struct pt_tl_event){ .t_ns = since_start(&ts->base, at), .value = rss * ts->page,
					.stack = -1, .syscall = -1, .kind = PT_TL_EV_RSS });
}

/* The stack id of a thread's frames (threads share stacks), or -1. */
static int32_t stack_id(struct trace_session *ts, const struct pt_sample *smp)
{
	struct pt_sample any = *smp;
	int64_t v[PT_MAX_VALUES] = { 1, 0 };
	int id;

	if (!smp->frames || smp->n <= 0)
		return -1;
	any.tid = 0;
	id = pt_stacks_add(ts->stacks, &any, v);
	return id < 0 ? -1 : id;
}

static void state_at(struct trace_session *ts, const struct thr *th, uint64_t t, uint8_t state)
{
	emit(ts, &(struct pt_tl_event){ .t_ns = t, .thread = th->idx, .stack = -1, .syscall = -1,
					.kind = PT_TL_EV_STATE, .state = state });
}

/* Draws the CPU th used between its last look (at `from`, or its
 * creation) and `to`, `ran` ns, as that much running: a thread running or
 * runnable at both ends (runs_on: `to` found it so) ran `ran` of the
 * interval (and what earlier intervals had no room for, th->carry_ns) and
 * waited for a core the rest: its clock is the measure, not its wait
 * (schedstat's wait moves only as the thread gets its core back, so an
 * interval spent waiting shows none); one shown running that is not so at
 * `to` ran first and stopped at from + ran, when what `to` found began
 * (returned); one shown waiting ran last, just before `to` (drawn, *drawn
 * set). Returns when what `to` found began. So a thread's running time in
 * the timeline is its CPU time (its clock, read at each tick and at its
 * end), not the ticks' guess: a thread born and ended between two ticks is
 * seen running, and one a tick found running is not drawn running until
 * the next unless it was. Where in the interval it ran is not known; this
 * order is the one the states at both ends suggest. */
static uint64_t draw_run(struct trace_session *ts, struct thr *th, uint64_t from, uint64_t to,
			 uint64_t ran, int runs_on, int *drawn)
{
	uint64_t span = to - from, slack = span / 50 > RAN_GAP_NS ? span / 50 : RAN_GAP_NS, run;

	*drawn = 0;
	if (runs_on && (th->state == PT_TL_RUNNING || th->state == PT_TL_RUNNABLE)) {
		/* Running or waiting for a core at both ends (within 2 %: clocks
		 * and looks are not read at one instant). Shown running at
		 * `from`: its wait drawn last; shown waiting: first. */
		run = ran + th->carry_ns < span ? ran + th->carry_ns : span;
		th->carry_ns = ran + th->carry_ns - run;
		if (run + slack >= span)
			run = span;
		else if (run <= slack)
			run = 0;
		if (th->state == PT_TL_RUNNING && run < span) {
			state_at(ts, th, from + run, PT_TL_RUNNABLE);
			*drawn = 1;
		} else if (th->state == PT_TL_RUNNABLE && run) {
			state_at(ts, th, to - run, PT_TL_RUNNING);
			*drawn = 1;
		}
		return to;
	}
	/* It stopped running (or never did) by `to`: a switch brought its
	 * clock up to date, no lump is left to carry. */
	ran += th->carry_ns;
	th->carry_ns = 0;
	if (th->state == PT_TL_RUNNING)
		return from + ran + slack >= to ? to : from + ran;
	if (ran) {
		state_at(ts, th, to > from + ran ? to - ran : from, PT_TL_RUNNING);
		*drawn = 1;
	}
	return to;
}

/* When th was last looked at (since the session began), or created; and
 * the CPU clock it had then, in *run0. 0 if it is not known (a thread seen
 * for the first time, older than the session). */
static int last_look(struct trace_session *ts, const struct thr *th, uint64_t *from, uint64_t *run0)
{
	if (th->last_ns) {
		*from = since_start(&ts->base, th->last_ns);
		*run0 = th->run_ns;
		return 1;
	}
	if (ts->tl->threads[th->idx].created) {
		*from = ts->tl->threads[th->idx].start_ns;
		*run0 = 0;
		return 1;
	}
	return 0;
}

static void trace_on_state(struct pt_session *ss, const struct pt_thread_state *st)
{
	struct trace_session *ts = PT_SESSION_OF(ss, struct trace_session);
	uint64_t t = since_start(ss, st->at_ns), at, from, run0, ran;
	struct thr *th = thread_get(ts, st->tid, st->comm, t ? t : 0, 0);
	uint8_t state;
	int drawn = 0;

	sample_rss(ts, st->at_ns);
	if (!th || !(state = classify(st, th)))
		return;
	/* A tick that began before the thread was born looks at it after:
	 * not before its birth. */
	if (t < ts->tl->threads[th->idx].start_ns)
		t = ts->tl->threads[th->idx].start_ns;
	at = t;
	if (last_look(ts, th, &from, &run0) && from <= t) {
		/* A clock that moved only for our stop's restart (a blocked
		 * thread stopped for its stack) is no run of its own. */
		ran = st->ran && st->run_ns > run0 ? st->run_ns - run0 : 0;
		at = draw_run(ts, th, from, t, ran, state == PT_TL_RUNNING || state == PT_TL_RUNNABLE,
			      &drawn);
	}
	if (state != th->state || syscall_of(st->syscall) != th->syscall || drawn) {
		struct pt_sample smp = { .comm = "", .syscall = -1, .frames = st->stack, .n = st->n };
		int32_t stk = state >= PT_TL_SYNC ? stack_id(ts, &smp) : -1;

		emit(ts, &(struct pt_tl_event){ .t_ns = at, .thread = th->idx, .stack = stk,
						.syscall = syscall_of(st->syscall),
						.kind = PT_TL_EV_STATE, .state = state });
	}
	th->state = state;
	th->syscall = syscall_of(st->syscall);
	th->run_ns = st->run_ns;
	th->wait_ns = st->wait_ns;
	th->last_ns = st->at_ns;
}

static void trace_on_sample(struct pt_session *ss, const struct pt_sample *smp)
{
	struct trace_session *ts = PT_SESSION_OF(ss, struct trace_session);
	uint64_t t = since_start(ss, pt__now_ns());
	struct thr *th = thread_get(ts, smp->tid, smp->comm, t, 0);

	if (th)
		emit(ts, &(struct pt_tl_event){ .t_ns = t, .thread = th->idx,
						.stack = stack_id(ts, smp), .syscall = -1,
						.kind = PT_TL_EV_SAMPLE });
}

static void trace_on_clone(struct pt_session *ss, const struct pt_event *ev)
{
	struct trace_session *ts = PT_SESSION_OF(ss, struct trace_session);
	uint64_t now = pt__now_ns();

	/* born when its FORK record says (followed with no stop), else now */
	thread_get(ts, ev->child, "", since_start(ss, ev->born_ns >= ss->start_ns && ev->born_ns < now ?
						  ev->born_ns : now), 1);
}

static void trace_on_exit(struct pt_session *ss, const struct pt_exit *x)
{
	struct trace_session *ts = PT_SESSION_OF(ss, struct trace_session);
	uint64_t *at = base_map_get(&ts->by_tid, (uint64_t)x->tid);
	uint64_t t, from, run0, end, queued;
	struct thr *th;
	int drawn;

	if (!at || ts->thrs[*at].exited)
		return;
	th = &ts->thrs[*at];
	th->exited = 1;
	t = since_start(ss, pt_exit_end(x, last_look(ts, th, &from, &run0) ? ss->start_ns + from : 0));
	/* Its CPU since its last look, from its clocks read at its end. One
	 * that stopped running before it ended (end < t) waited for a core
	 * for `queued` of the rest, drawn last, and was blocked where no tick
	 * saw for the rest (a system call unknown). */
	if (x->run_ns && last_look(ts, th, &from, &run0) && from <= t &&
	    (end = draw_run(ts, th, from, t, x->run_ns > run0 ? x->run_ns - run0 : 0, 0, &drawn)) < t) {
		queued = x->wait_ns > th->wait_ns ? x->wait_ns - th->wait_ns : 0;
		if (t - end > queued + RAN_GAP_NS)
			state_at(ts, th, end, PT_TL_SYSCALL);
		if (queued > RAN_GAP_NS)
			state_at(ts, th, t - end > queued ? t - queued : end, PT_TL_RUNNABLE);
	}
	emit(ts, &(struct pt_tl_event){ .t_ns = t, .thread = th->idx,
					.stack = -1, .syscall = -1, .kind = PT_TL_EV_EXIT });
}

static int trace_finish(struct pt_session *ss)
{
	struct trace_session *ts = PT_SESSION_OF(ss, struct trace_session);
	struct pt_profile *p;
	int err = pt_profile_build(ts->stacks, ss->t, &ss->req->profile);

	if ((p = ss->req->profile)) {
		p->time_ns = ss->start_wall;
		p->duration_ns = pt__now_ns() - ss->start_ns;
		p->hz = ss->req->hz;
		if (!ts->tl->truncated)
			ts->tl->duration_ns = p->duration_ns;
		p->timeline = ts->tl;
		ts->tl = NULL;
	}
	pt__log(ss->s, 1, "trace: done pid=%d threads=%zu events=%zu stacks=%zu%s%s",
			(int)ss->req->pid, p ? p->timeline->nthreads : 0,
			p ? p->timeline->nevents : 0, pt_stacks_count(ts->stacks),
			p && p->timeline->truncated ? " (truncated)" : "",
			pt__request_cancelled(ss->req) ? " (client gone)" : "");
	return err;
}

static void trace_free(struct pt_session *ss)
{
	struct trace_session *ts = PT_SESSION_OF(ss, struct trace_session);

	pt_stacks_free(ts->stacks);
	if (ts->tl) {
		base_free(ts->tl->threads);
		base_free(ts->tl->events);
		base_free(ts->tl);
	}
	base_free(ts->thrs);
	base_map_free(&ts->by_tid);
	if (ts->statm_fd >= 0)
		close(ts->statm_fd);
}

const struct pt_session_kind pt_kind_trace = {
	.name = "trace",
	.size = sizeof(struct trace_session),
	.flags = PT_KIND_F_ATTACH | PT_KIND_F_WINDOW | PT_KIND_F_TICKS | PT_KIND_F_STATES,
	.start = trace_start,
	.on_sample = trace_on_sample,
	.on_thread_state = trace_on_state,
	.on_clone = trace_on_clone,
	.on_exit = trace_on_exit,
	.finish = trace_finish,
	.free = trace_free,
};
