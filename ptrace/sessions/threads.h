/* The thread dump session (see threads.c). Sampler thread. */
#ifndef PT_SESSION_THREADS_H
#define PT_SESSION_THREADS_H

#include "ptrace/sampler/session.h"

/* Thread dump: every thread's stack now, one sample per thread (value 1).
 * Result: profile. */
extern const struct pt_session_kind pt_kind_threads;

#endif
