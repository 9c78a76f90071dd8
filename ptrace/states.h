/* What every thread is doing at a tick, for the views that follow thread
 * states (block, mutex, trace): running, or blocked in which system call,
 * with the stack it blocked at, taken at one stop per wait. Sampler thread
 * only. */
#ifndef PT_STATES_H
#define PT_STATES_H

#include <stdint.h>
#include <sys/types.h>

#include "ptrace/sample.h"

struct pt_rule;

/* What one thread was doing when a tick looked at it, without a stop. */
struct pt_thread_state {
	uint64_t at_ns;         /* when the tick looked (CLOCK_MONOTONIC) */
	pid_t pid, tid;
	const char *comm;
	char state;             /* R (running or runnable), S, D, T, t ... */
	int syscall;            /* the system call it is blocked in; -1 if none or running */
	uint64_t run_ns;        /* CPU time so far (schedstat) */
	uint64_t wait_ns;       /* time so far runnable but waiting for a core */
	int ran;                /* it ran since the tick before */
	/* Its stack as cached at its last snapshot stop, if that still holds
	 * (it has not run since, see pt_snapshot_take); else NULL. */
	const uint64_t *stack;
	int n;
};
typedef void (*pt_state_cb)(void *arg, const struct pt_thread_state *st);

/* Reports every live thread's state to state(arg, ...), after stopping once
 * the blocked threads whose stack is not cached yet (their pauses to
 * timing, which may be NULL). now: the tick's time (a thread whose CPU
 * moved at this tick has moved_at == now). */
void pt__states_report(struct pt_rule *r, uint64_t now, pt_state_cb state, pt_timing_cb timing,
		       void *arg);

#endif
