/* The sampling rule of one tracee: which threads a CPU tick stops (a
 * thread is due once it has used a period of CPU since its last sample),
 * which threads a thread dump must stop and which it answers from their
 * cached stacks, and what every thread is doing at a tick, for the views
 * that follow thread states (block, mutex, trace). It asks the ptrace
 * mechanism (ptrace/tracee.h) to read threads and stop them, and never
 * stops a thread itself. Implemented by rule.c (the CPU tick), states.c
 * (thread states), snapshot.c (the thread dump) and snapcache.c (the
 * stacks cached at stops). Sampler thread only. */
#ifndef PT_RULE_H
#define PT_RULE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/tracee.h"

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
	 * (it has not run since, see pt_rule_snapshot); else NULL. */
	const uint64_t *stack;
	int n;
};
typedef void (*pt_state_cb)(void *arg, const struct pt_thread_state *st);

/* Where a tick reports: each thread-sample, each pause, and, if `state` is
 * not NULL, every thread of the target (each tick then looks at all of
 * them, not only those whose CPU moved). */
struct pt_tick_cbs {
	pt_sample_cb sample;
	pt_timing_cb timing;
	pt_state_cb state;
	void *arg;
};

/* Counters, cumulative since creation. */
struct pt_rule_stats {
	uint64_t preempted_stops;   /* a tick's, dropped: stopped where it waited for a core */
	uint64_t snapshot_stops;    /* stacks cached at a snapshot's or a state report's stop */
	uint64_t snapshot_reused;   /* stacks answered from the cache instead of a stop */
};

/* The rule of tracee t, which keeps its part of each of t's threads
 * (pt_tracee_set_thread_ops): before t's first attach. Returns 0, -ENOMEM
 * or -EBUSY (t holds threads already). */
int pt_rule_new(struct pt_rule **out, struct pt_tracee *t);
/* NULL-safe. Free the tracee first: its threads' parts go with it. */
void pt_rule_free(struct pt_rule *r);
void pt_rule_stats(const struct pt_rule *r, struct pt_rule_stats *out);

/* One CPU tick. A thread is due for a sample once it has used cpu_period_ns
 * of CPU since its last sample (one /proc read per thread that did not run,
 * no stop); the due threads that are running now are stopped together
 * (pt_tracee_collect) and passed to cbs->sample with the CPU they used since
 * their last sample as weight. A thread that stops later (one that was
 * runnable but not on a core) is captured by pt_tracer_poll and reported by
 * the next tick, with this tick's callbacks. A thread has at most one
 * interrupt pending: it is not selected again until its stop came. With
 * cbs->state, every thread is looked at and reported. Returns the number of
 * thread-samples taken now or a negative errno. */
int pt_rule_tick(struct pt_rule *r, uint64_t cpu_period_ns, const struct pt_tick_cbs *cbs);

/* Every thread's stack now (the thread dump). Threads are stopped one batch
 * of max_per_tick at a time, each resumed at once after its capture. A
 * thread blocked since its last snapshot is not stopped again: if it has
 * not run since (one /proc read), or if it ran only to restart the system
 * call our own stop interrupted (same stack and instruction pointers in
 * /proc/<tid>/syscall), its cached stack is reported with cached=1.
 * Threads in a group-stop are reported with state 'T' and their last stack
 * (n=0 if none). Returns the number of threads reported or a negative errno;
 * *stopped counts the threads stopped. */
int pt_rule_snapshot(struct pt_rule *r, uint64_t wait_ns, pt_sample_cb cb, void *arg,
		     int *stopped);

#endif
