/* The waiting sessions, block and mutex, and the continuous watch's waits
 * they answer from without a window (see waiting.c). Sampler thread. */
#ifndef PT_SESSION_WAITING_H
#define PT_SESSION_WAITING_H

#include "ptrace/sampler/session.h"

/* Waiting: threads blocked (S or D) at each tick over duration_ns at hz,
 * weighted by the time since the tick before; mutex only those in futex.
 * Stacks are those cached since each thread blocked (one stop at its first
 * sight blocked, none after). Result: profile, values (contentions: new
 * waits, delay ns). A Go program podprof reads: its goroutines' waits
 * instead (gowaits.h), with the profile's go_version set and its note
 * telling the looks. */
extern const struct pt_session_kind pt_kind_block;
extern const struct pt_session_kind pt_kind_mutex;
/* The same of a Go program's threads, not its goroutines (for any other
 * program, the same as block and mutex). */
extern const struct pt_session_kind pt_kind_block_threads;
extern const struct pt_session_kind pt_kind_mutex_threads;

/* The continuous watch's waits (block and mutex) of ss's target, kept by
 * waiting.c in a target slot of its own, where block and mutex
 * requests without a window find them: started anew (counts start again)
 * for the watch (watch.c), which feeds it each thread state and tick.
 * Returns 0 or -ENOMEM. */
struct pt__watched;
int pt__watched_start(struct pt_session *ss, struct pt__watched **out);
void pt__watched_on_state(struct pt__watched *w, const struct pt_thread_state *st);
/* ... and each of its ticks' end (a Go program's look at its goroutines). */
void pt__watched_on_tick(struct pt__watched *w, uint64_t now);
/* ... and each thread's birth and end. */
void pt__watched_on_clone(struct pt__watched *w, const struct pt_event *ev);
void pt__watched_on_exit(struct pt__watched *w, const struct pt_exit *x);
/* The watch ended (its session freed): its waits stay, for requests
 * without a window, but nothing looks at the target for them any more. */
void pt__watched_end(struct pt__watched *w);

#endif
