/* New threads under the perf_event backend, followed without a stop (one
 * of the rule's files, see ptrace/rule/rule.h): the target is seized
 * without clone events (pt_tracee_set_clone_stops), and a thread is told
 * of each thread it creates by the kernel's FORK records, which every
 * thread's sampling event asks for (task=1). Those come at the ticks; a
 * thread that creates threads (a server's acceptor) gets an event of its
 * own besides, with nothing but FORK records, whose ring wakes the sampler
 * at each one (pt_tracer_watch), so that the new thread is seized and its
 * sampling event opened as soon as the sampler gets a core: 99 % of 300 us
 * threads were, both cores busy (docs/ARCHITECTURE.md). Threads a new thread creates before it
 * is seized are found by a rescan of /proc/<pid>/task at the ticks.
 * Sampler thread only. */
#ifndef PT_PERFBORN_H
#define PT_PERFBORN_H

#include <stdint.h>
#include <sys/types.h>

struct pt_rule;
struct pt_thread;

/* The rule's follow state (inside struct pt_rule). */
#define PT_PERFBORN_QUEUE 256
struct pt__perfborn {
	int on;                  /* followed without a stop (the backend is perf_event) */
	struct { pid_t parent, child; uint64_t born_ns; } q[PT_PERFBORN_QUEUE];   /* FORK records to act on */
	int nq;
	uint64_t rescan_ns;      /* the last rescan */
};

/* The perf_event backend was chosen: from now on new threads are adopted,
 * not stopped; every sampling event opened from now asks for FORK records. */
void pt__perfborn_start(struct pt_rule *r);
/* A FORK record (struct pt_perfev_cfg on_fork; arg: the rule): queued,
 * acted on by pt__perfborn_settle (never inside a drain). */
void pt__perfborn_on_fork(void *arg, pid_t parent, pid_t child, uint64_t born_ns);
/* Acts on the queued records: each child not known yet seized and told
 * born (its sampling event opens then, while a session samples:
 * pt_perftick_born), each parent given its wake event. */
void pt__perfborn_settle(struct pt_rule *r);
/* At every tick of the target, a session sampling or not (block, trace):
 * the wake rings read, the queue settled, and /proc/<pid>/task read again
 * every 100 ms for threads no record told of. */
void pt__perfborn_tick(struct pt_rule *r, uint64_t now);
/* The wake events sleep while no session samples (on 0), and wake. */
void pt__perfborn_enable(struct pt_rule *r, int on);
/* Closes th's wake event, if any (the thread is forgotten or exec'd). */
void pt__perfborn_drop(struct pt_thread *th);

#endif
