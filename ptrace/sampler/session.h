/* Sessions: how a kind of request plugs into the sampler (CONVENTIONS H1: shared
 * only inside ptrace/). The sampler thread owns the thread, the request
 * queue, the targets and the tick schedule; what a request gathers and how
 * it turns that into a result is its kind's, one file each in
 * ptrace/sessions/ (cpu.c, threads.c, symbols.c, ...), through the ops
 * below. A new kind is a new file, ptrace/sessions/<name>.c, and its
 * header, <name>.h, declaring its pt_kind_<name>. Types only: the sampler
 * implements the calls a kind may make back (pt__target_slot in
 * targets.h, pt__log in log.h).
 *
 * Every hook runs on the sampler thread, between ticks or inside one; none
 * may call back into the sampler or stop threads itself, except `start`,
 * which may use the tracee and its rule (pt_snapshot_take,
 * pt_space_name). Long work in `start`, `on_tick` and `finish` breathes
 * (pt_tracee_breathe: the tracees' stops answered meanwhile, a signal
 * passed on); the others are called inside walks over the threads or the
 * sessions, where a poll must not come. */
#ifndef PT_SESSION_H
#define PT_SESSION_H

#include <stdint.h>
#include <sys/types.h>

#include "ptrace/core/types.h"
#include "ptrace/runtimes/runtimes.h"

struct pt_request;
struct pt_rule;
struct pt_sampler;
struct pt_sampler_opts;
struct pt_session_kind;
struct pt_tracee;

/* One request being served. A kind's own session structure embeds this one
 * as its first member and recovers itself with PT_SESSION_OF. */
struct pt__target;

#define PT_TOOK_TICKS 1024

struct pt_session {
	const struct pt_session_kind *kind;
	struct pt_sampler *s;
	const struct pt_sampler_opts *o;
	struct pt_request *req;
	struct pt_tracee *t;
	struct pt_rule *rule;        /* t's sampling rule (pt_snapshot_take) */
	uint64_t start_ns, end_ns;   /* CLOCK_MONOTONIC; end_ns == start_ns without a window */
	uint64_t start_wall;         /* CLOCK_REALTIME at start, for profiles' time stamps */
	/* the sampler's, for the tick schedule */
	uint64_t period_ns, next_due;
	int take;                    /* the current tick is this session's */
	/* The last PT_TOOK_TICKS ticks, a bit each (tick % PT_TOOK_TICKS) set
	 * if it took it; took_at the last tick it was told of, first_tick the
	 * first (see pt__session_took). */
	uint64_t took[PT_TOOK_TICKS / 64];
	uint64_t took_at, first_tick;
	double scale;                /* this session's period over the tick's */
	struct pt__target *target;   /* the sampler's record of the target */
	/* Set by start: it needs no thread states, despite its kind (a Go
	 * program's waits come from its goroutines, at the tick's end): no
	 * thread's state is read for it, none stopped. */
	int no_states;
	const char *cut;             /* at finish: the window was cut short (see pt_profile) */
	uint64_t lost0, fail0;       /* the target's perf samples lost, opens failed, before it */
	uint64_t draws0, drawn0;     /* its draws and threads drawn before it (ptrace) */
	struct pt_runtimes_counts rt0;   /* its runtimes' samples merged, before it (attached kinds) */
	struct pt_session *next;
};

#define PT_SESSION_OF(ss, type) ((type *)(void *)(ss))

static inline void pt__session_took_bit(struct pt_session *ss, uint64_t tick, int on)
{
	uint64_t bit = 1ull << (tick % 64);

	if (on)
		ss->took[tick / 64 % (PT_TOOK_TICKS / 64)] |= bit;
	else
		ss->took[tick / 64 % (PT_TOOK_TICKS / 64)] &= ~bit;
}

/* Tick number tick (the sampler's count, from 1 up): ss takes it or not. */
static inline void pt__session_tick(struct pt_session *ss, uint64_t tick, int take)
{
	if (!ss->first_tick || tick - ss->took_at >= PT_TOOK_TICKS) {
		for (size_t i = 0; i < PT_TOOK_TICKS / 64; i++)
			ss->took[i] = 0;
		if (!ss->first_tick)
			ss->first_tick = tick;
	} else {
		for (uint64_t k = ss->took_at + 1; k < tick; k++)
			pt__session_took_bit(ss, k, 0);   /* ticks it was not told of */
	}
	pt__session_took_bit(ss, tick, take);
	ss->took_at = tick;
	ss->take = take;
}

/* Whether a sample of tick (0: the current one; PT_TICK_DRAW: a draw) is
 * ss's. A tick's samples go to the sessions that took it, whenever its
 * stops come: on a loaded machine a thread interrupted at one tick may stop
 * after the next, which a session may not take (its own rate, or a tick
 * that came early after an overrun), and the sample was lost with the CPU
 * it carried (a ptrace profile of eight busy threads beside two busy
 * processes held 0.88-0.93 of their CPU). A stop later than PT_TOOK_TICKS
 * ticks (a thread throttled by its CPU quota): the session's if it was
 * there then and takes the current tick, as before. A draw: every session
 * that has begun its ticks. */
static inline int pt__session_took(const struct pt_session *ss, uint64_t tick)
{
	if (!tick)
		return ss->take;
	if (tick == PT_TICK_DRAW)
		return ss->first_tick != 0;
	if (!ss->first_tick || tick > ss->took_at || tick < ss->first_tick)
		return 0;
	if (ss->took_at - tick >= PT_TOOK_TICKS)
		return ss->take;
	return (int)((ss->took[tick / 64 % (PT_TOOK_TICKS / 64)] >> (tick % 64)) & 1);
}

#define PT_KIND_F_ATTACH 0x1u   /* needs the target traced (seized) */
#define PT_KIND_F_WINDOW 0x2u   /* lasts req->duration_ns if > 0 */
#define PT_KIND_F_STATES 0x4u   /* wants every thread's state at each of its ticks */
#define PT_KIND_F_TICKS  0x8u   /* its window is sampled by ticks (else only its ends count) */

/* A thread's end, as sessions are told of it. */
struct pt_exit {
	pid_t tid;
	/* When it ended: seen_ns, when podprof saw it (pt__now_ns), is after
	 * its end; at_ns is an estimate. Each SIGCHLD wakes the sampler,
	 * which may then wait for a core: the ends polled right after are
	 * timed at the wake less that wait (ptrace/sampler's sleep_until_due),
	 * the one that woke it so to within the kernel's wake-up, one that
	 * came while the sampler waited up to that wait early. Elsewhere
	 * at_ns is seen_ns. pt_exit_end gives a thread's end. */
	uint64_t at_ns, seen_ns;
	uint64_t run_ns, wait_ns;  /* its clocks at its end (struct pt_event), 0 if unknown */
};

/* When x's thread ended, for a thread last known alive at `alive` (its
 * last look or its birth): at_ns, unless that is not after `alive` (it was
 * born, or looked at, after the wake): seen_ns then. */
static inline uint64_t pt_exit_end(const struct pt_exit *x, uint64_t alive)
{
	return x->at_ns > alive ? x->at_ns : x->seen_ns;
}

struct pt_session_kind {
	const char *name;            /* for logs */
	size_t size;                 /* of the kind's session structure */
	unsigned int flags;          /* PT_KIND_F_* */
	/* The session begins: returns 0 or a negative errno (the request then
	 * fails with it). A kind without a window does all its work here. */
	int (*start)(struct pt_session *ss);
	/* A thread-sample taken by one of the session's ticks (the CPU it used
	 * since its previous sample is in smp->cpu_ns, for a tick period:
	 * scale it by ss->scale for the session's). May be NULL. */
	void (*on_sample)(struct pt_session *ss, const struct pt_sample *smp);
	/* Each thread of the target at each of the session's ticks
	 * (PT_KIND_F_STATES only). */
	void (*on_thread_state)(struct pt_session *ss, const struct pt_thread_state *st);
	/* After each of the session's ticks, its threads all reported: the
	 * session's own work that may be long (a Go program's look at its
	 * goroutines), outside every walk over the target's threads, so that
	 * it may breathe (pt_tracee_breathe). May be NULL. */
	void (*on_tick)(struct pt_session *ss, uint64_t now);
	/* A thread of the target was created (ev: PT_EV_CLONE, its birth time
	 * or its clocks as it was told: one followed with no stop is told after
	 * it has run, maybe long after on a busy machine) or ended while the
	 * session ran. */
	void (*on_clone)(struct pt_session *ss, const struct pt_event *ev);
	void (*on_exit)(struct pt_session *ss, const struct pt_exit *x);
	/* The session ends (its window is over, its target exited or exec'd, or
	 * the client left): fill the request's results. Returns 0 or a negative
	 * errno. Not called when start failed. */
	int (*finish)(struct pt_session *ss);
	/* The window is over: called for every session ending at once (a
	 * group's members) before the first of them finishes, to read what
	 * must be read as the window ends, not as it is finished. May be NULL. */
	void (*on_end)(struct pt_session *ss);
	/* Frees what the kind allocated (not the session itself). May be NULL. */
	void (*free)(struct pt_session *ss);
};

#endif
