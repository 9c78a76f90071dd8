/* The sampler: one thread that owns every ptrace and waitpid call (CONVENTIONS H12).
 * Other threads hand it requests (a CPU profile session, a symbol lookup)
 * with pt_sampler_submit(); it answers each through the done callback, on
 * the sampler thread, exactly once. One sampler serves any number of
 * overlapping sessions: each gets its own aggregate of the shared ticks.
 *
 * SIGCHLD must be blocked in every thread of the process before
 * pt_sampler_new() (the sampler reads it through a signalfd). */
#ifndef PT_SAMPLER_H
#define PT_SAMPLER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/sampler/request.h"

/* Starts the sampler thread. Returns 0, -ENOMEM or another negative errno.
 * Any thread; `done` and `log` are then called on the sampler thread. */
int pt_sampler_new(struct pt_sampler **out, const struct pt_sampler_opts *opts, pt_done_cb done,
		   pt_log_cb log, void *arg);
/* Any thread. The request belongs to the sampler until done is called,
 * exactly once, on the sampler thread. */
void pt_sampler_submit(struct pt_sampler *s, struct pt_request *req);
/* Any thread: ends a submitted request early; done is still called once. */
void pt_sampler_cancel(struct pt_sampler *s, struct pt_request *req);
/* Any thread. While paused (paused=1), every running session and every
 * request submitted ends with -ECANCELED, and every target is detached at
 * once (no grace period); pause 0 lifts it. Takes effect at the sampler's
 * next turn of its loop (at once: the call wakes it). */
void pt_sampler_pause(struct pt_sampler *s, int paused);
/* Any thread: 1 if the sampler thread runs and went round its loop in the
 * last max_ns (it wakes at least once a second), else 0. */
int pt_sampler_alive(struct pt_sampler *s, uint64_t max_ns);
/* Stops the thread (pending requests complete with -ECANCELED), detaches
 * every target and frees. NULL-safe. */
void pt_sampler_free(struct pt_sampler *s);

/* Any thread: a snapshot of the counters and recent pause/unwind medians. */
void pt_sampler_stats(struct pt_sampler *s, struct pt_sampler_stats *out);

#endif
