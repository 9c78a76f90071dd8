/* How a tracee's new threads are followed: by the kernel, each stopped at
 * its birth (PTRACE_O_TRACECLONE: the mechanism's clone event, events.c),
 * or without a stop, seized by its owner when told of the thread otherwise
 * (pt_tracee_adopt, pt_tracee_rescan: the perf_event backend's FORK
 * records). A thread's options can change only in one of its stops, so
 * each thread keeps the options it was given, and any stop of a thread
 * whose options are not the tracee's gives it them. A thread is stopped
 * for its options only when clone events come back (the threadcreate
 * profile's clone stacks), one thread at a time. Tracer thread only. */
#ifndef PT_FOLLOW_H
#define PT_FOLLOW_H

#include <sys/types.h>

struct pt_thread;
struct pt_tracee;

/* The ptrace options t's threads are to have now. */
long pt__follow_opts(const struct pt_tracee *t);
/* In a stop of th (any but an exec's): gives it t's options if it has
 * others. */
void pt__follow_fix(struct pt_tracee *t, struct pt_thread *th);
/* The same for a new thread in its birth stop, not known yet, which has
 * its parent's options (PTRACE_SETOPTIONS only if they differ). */
void pt__follow_fix_tid(struct pt_tracee *t, pid_t tid, long parent_opts);
/* Once clone events are wanted back (t->reopt set), interrupts the next
 * thread that lacks them, so that its options change at the stop (resumed
 * at once: on_event_stop's late interrupt); one thread at a time, never
 * the whole process at once, called again at the end of each poll until
 * none lacks them. Clone events no longer wanted are not worth a stop:
 * each thread drops them at its next stop, a thread that creates threads
 * at its next clone event (one more birth stop, then none). */
void pt__follow_interrupt_stale(struct pt_tracee *t);
/* Seizes tid with t's options (no stop) and adds it (born: its CPU counted
 * from its birth, else from now). Returns 0, -ESRCH or -EPERM (gone or
 * exiting, or traced already: a thread the clone event reports), -E2BIG,
 * -ENOMEM. */
int pt__follow_seize(struct pt_tracee *t, pid_t tid, int born);

#endif
