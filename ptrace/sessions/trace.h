/* The timeline session (see trace.c). Sampler thread. */
#ifndef PT_SESSION_TRACE_H
#define PT_SESSION_TRACE_H

#include "ptrace/sampler/session.h"

/* Timeline: each thread's state at each tick over duration_ns at hz (only
 * changes are kept), CPU samples, thread creation and exit, the target's
 * RSS. Result: profile (its samples are the distinct stacks, referred to by
 * index) and profile->timeline. */
extern const struct pt_session_kind pt_kind_trace;

#endif
