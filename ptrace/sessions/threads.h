/* The thread dump session (see threads.c). Sampler thread. */
#ifndef PT_SESSION_THREADS_H
#define PT_SESSION_THREADS_H

#include <stdint.h>

#include "ptrace/sampler/session.h"

/* Thread dump: every thread's stack now, one sample per thread (value 1).
 * Result: profile. */
extern const struct pt_session_kind pt_kind_threads;

struct pt_stacks;

/* The thread dump itself, for a session of another kind too (goroutine
 * of a program that is no Go podprof reads): every thread's stack now
 * added to stacks with the value sign, *samples counting them, the
 * threads stopped for it in *stopped; logs the snapshot line. Returns the
 * threads seen or a negative errno. */
int pt_threads_take(struct pt_session *ss, struct pt_stacks *stacks, int sign, int *stopped,
		    uint64_t *samples);

#endif
