/* What every thread is doing at a tick, for the views that follow thread
 * states (block, mutex, trace): running, or blocked in which system call,
 * with the stack it blocked at, taken at one stop per wait. Sampler thread
 * only. */
#ifndef PT_STATES_H
#define PT_STATES_H

#include <stdint.h>
#include <sys/types.h>

#include "ptrace/core/types.h"

struct pt_rule;

/* Reports every live thread's state to state(arg, ...), after stopping once
 * the blocked threads whose stack is not cached yet (their pauses to
 * timing, which may be NULL). now: the tick's time (a thread whose CPU
 * moved at this tick has moved_at == now). */
void pt__states_report(struct pt_rule *r, uint64_t now, pt_state_cb state,
		       pt_timing_cb timing, void *arg);

#endif
