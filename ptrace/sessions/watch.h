/* The continuous watch session (see watch.c). Sampler thread. */
#ifndef PT_SESSION_WATCH_H
#define PT_SESSION_WATCH_H

#include "ptrace/sampler/session.h"

/* The continuous watch: keeps the target traced at hz for duration_ns
 * (use a very long one), gathering block and mutex waits, thread creations
 * and memory looks since it started; block and mutex requests without a
 * window answer from it (-EAGAIN where none runs). No result. */
extern const struct pt_session_kind pt_kind_watch;

#endif
