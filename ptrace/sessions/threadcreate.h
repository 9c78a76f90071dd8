/* The thread creation session (see threadcreate.c). Sampler
 * thread. */
#ifndef PT_SESSION_THREADCREATE_H
#define PT_SESSION_THREADCREATE_H

#include "ptrace/sampler/session.h"

/* Thread creation: the stacks that created threads (the parent's stack at
 * each clone event), counted, for as long as podprof watches the target
 * (from the first such request on, while attached); and every live thread
 * whose creation was not seen, under its start routine (its stack's
 * outermost frames), flagged PT_SAMPLE_F_UNSEEN. Result: profile, value
 * threads created. */
extern const struct pt_session_kind pt_kind_threadcreate;

/* Starts counting thread creations on ss's target from now on
 * (threadcreate.c). Returns 0 or -ENOMEM. */
int pt__creations_watch(struct pt_session *ss);

#endif
