/* The tracer: the one thread that traces (ptrace is per thread), taking
 * the events of all its tracees with one wait per event (pt__events_wait)
 * and handing each to its tracee. Tracer thread only, but for new and free. */
#ifndef PT_TRACER_H
#define PT_TRACER_H

#include <stdint.h>

#include "ptrace/core/types.h"

struct pt_tracer;

/* A tracer: the thread that first attaches one of its tracees becomes the
 * tracer thread, and every other call on it and its tracees must come from
 * that thread (except pt_tracer_new and pt_tracer_free, and pt_tracee_free
 * after that thread ended). wake_fd is a signalfd for SIGCHLD (readable
 * when a tracee changes state), or -1. Returns 0 or -ENOMEM. Any thread. */
int pt_tracer_new(struct pt_tracer **out, int wake_fd);
/* Frees the tracer; its tracees must have been freed. NULL-safe. */
void pt_tracer_free(struct pt_tracer *tr);
/* Where thread life events go (may be NULL). */
void pt_tracer_set_events(struct pt_tracer *tr, pt_event_cb cb, void *arg);
/* Handles every pending state change of every tracee of this tracer (one
 * system call per event): re-injects signals, honours group-stop with
 * PTRACE_LISTEN, registers new threads, notices exec and exit, and captures
 * the stops that came after their tick (kept for pt_stop_report_late).
 * Returns 1 if it stopped with events left (call again soon), else 0. */
int pt_tracer_poll(struct pt_tracer *tr);
/* The same, before a tick: the wake-up mark stays for the tick's looks and
 * for the pt_tracer_poll after it. */
int pt_tracer_poll_before_tick(struct pt_tracer *tr);
/* Long work on the tracer thread (a dump reading thousands of goroutines)
 * calls this between its pieces: what pt_tracer_poll does (a signal on its
 * way re-injected, a new thread's first stop answered), at most once every
 * PT_TRACER_BREATHE_NS, as part of the same wake-up as the poll before the
 * tick. Without it, a thread that gets a signal while the work runs waits
 * in its stop until the work ends: a Go program's running goroutine, sent
 * SIGURG every 10 ms by its runtime, lost 1-2 % of its progress to a dump
 * a second. Not from inside a walk over a tracee's threads (a poll may add
 * and compact them). */
#define PT_TRACER_BREATHE_NS 250000ull
void pt_tracer_breathe(struct pt_tracer *tr);
/* Marks the tracer's wake-up from a sleep: the pause of a stop that the next
 * pt_tracer_poll takes counts from then (else from that call). */
void pt_tracer_woke(struct pt_tracer *tr);
/* Time pt_tracer_poll spent taking stops that came after their tick, since
 * the last call. */
uint64_t pt_tracer_take_late_ns(struct pt_tracer *tr);

/* An fd the tracer thread acts on when it is readable (a perf_event ring
 * that tells of a new thread): fn is called from pt_tracer_run_watches,
 * and must find out itself whether its fd has something (a perf event's
 * readiness is spent by the first poll that sees it, and the caller's
 * poll of pt_tracer_watch_fd is that poll: so every watch is called when
 * any may have something). The structure is the caller's, registered until
 * unwatched. */
struct pt_watch {
	void (*fn)(struct pt_watch *w);
	int fd;
	struct pt_watch *next, **pprev;   /* the tracer's */
};
/* Watches fd with w. Returns 0 or -errno. */
int pt_tracer_watch(struct pt_tracer *tr, int fd, struct pt_watch *w);
/* Stops watching (before its fd is closed); w unused since is a no-op. */
void pt_tracer_unwatch(struct pt_tracer *tr, struct pt_watch *w);
/* The fd that is readable when a watched one is (for the caller's poll),
 * or -1 if nothing was ever watched. */
int pt_tracer_watch_fd(const struct pt_tracer *tr);
/* Calls fn of every watch (see above); none may unwatch another. Returns
 * how many it called. */
int pt_tracer_run_watches(struct pt_tracer *tr);

#endif
