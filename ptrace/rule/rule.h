/* The sampling rule of one tracee: which threads a CPU tick stops (a
 * thread is due once it has used a period of CPU since its last sample)
 * and which of those stops to keep. It asks the ptrace mechanism
 * (ptrace/mechanism/tracee.h) to read threads and stop them, and never stops a
 * thread itself. The rule is this header's module and those it lists, one
 * file and header each, bottom-up: snapcache (stacks cached at stops),
 * states (what every thread is doing at a tick), snapshot (the thread
 * dump), cpudraw (the ptrace backend's new threads, stopped by the CPU
 * they used), perftick (the CPU tick of the perf_event backend: samples
 * the kernel took without a stop) and rule (the CPU tick, the rule's life);
 * their shared state is ptrace/rule/rulestate.h. Sampler thread only. */
#ifndef PT_RULE_H
#define PT_RULE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/core/types.h"

struct pt_rule;
struct pt_tracee;

/* The rule of tracee t, which keeps its part of each of t's threads
 * (pt_threads_set_ops): before t's first attach. Returns 0, -ENOMEM
 * or -EBUSY (t holds threads already). */
int pt_rule_new(struct pt_rule **out, struct pt_tracee *t);
/* NULL-safe. Free the tracee first: its threads' parts go with it. */
void pt_rule_free(struct pt_rule *r);
void pt_rule_stats(const struct pt_rule *r, struct pt_rule_stats *out);
/* The CPU the live threads used since their last sample, which their next
 * sample would carry (one /proc read per thread); each thread's, if fn is
 * given, passed to it as it is read (threads with none are not). */
typedef void (*pt_rule_pending_fn)(void *arg, pid_t tid, uint64_t ns);
uint64_t pt_rule_pending_ns(struct pt_rule *r, pt_rule_pending_fn fn, void *arg);

/* One CPU tick. A thread is due for a sample once it has used cpu_period_ns
 * of CPU since its last sample (one /proc read per thread that did not run,
 * no stop); the due threads that are running now are stopped together
 * (pt_stop_collect) and passed to cbs->sample with the CPU they used since
 * their last sample as weight. A thread that stops later (one that was
 * runnable but not on a core) is captured by pt_tracer_poll and reported by
 * a later tick, to the last sample callback a tick gave, with this tick's
 * number (pt_sample's tick). A thread has at most one
 * interrupt pending: it is not selected again until its stop came. With
 * cbs->state, every thread is looked at and reported. Under the perf_event
 * backend no thread is stopped: what the kernel sampled since the last tick
 * is reported instead (perftick.h). Returns the number of thread-samples
 * taken now or a negative errno. */
int pt_rule_tick(struct pt_rule *r, uint64_t cpu_period_ns, const struct pt_tick_cbs *cbs);

#endif
