/* The thread dump: every thread's stack now, each blocked thread's from
 * its cache where it still holds, the others stopped a batch at a time.
 * Sampler thread only. */
#ifndef PT_SNAPSHOT_H
#define PT_SNAPSHOT_H

#include <stdint.h>

#include "ptrace/core/types.h"

struct pt_rule;

/* How long a snapshot waits for the threads that stop late: a thread
 * waiting for its core (a busy machine) stops only once it runs again,
 * which can take tens of milliseconds; past this its stack is reported as
 * not captured. */
#define PT_SNAPSHOT_WAIT_NS 200000000ull

/* Every thread's stack now. Threads are stopped one batch of max_per_tick
 * at a time, each resumed at once after its capture. A thread blocked
 * since its last snapshot is not stopped again: if it has not run since
 * (one /proc read), or if it ran only to restart the system call our own
 * stop interrupted (same stack and instruction pointers in
 * /proc/<tid>/syscall), its cached stack is reported with cached=1.
 * Threads in a group-stop are reported with state 'T' and their last stack
 * (n=0 if none). Returns the number of threads reported or a negative
 * errno; *stopped counts the threads stopped. */
int pt_snapshot_take(struct pt_rule *r, uint64_t wait_ns, pt_sample_cb cb, void *arg,
		     int *stopped);

#endif
