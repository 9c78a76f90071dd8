/* Threads sampled by the kernel from their first instruction, with no stop:
 * a family of cpu-clock events with inherit on the threads that create
 * threads (a server's acceptor), one event per CPU on each, so that every
 * thread such a thread creates later is sampled by the kernel's copies of
 * these events (perf_event_open(2): an inherited event cannot be mapped
 * with cpu -1; events of one CPU write into one ring, joined with
 * PERF_EVENT_IOC_SET_OUTPUT). Each sample says its thread and CPU, and
 * carries a count (PERF_SAMPLE_READ with inherit: Linux 6.12 and later).
 * That count is not its thread's own CPU: when sibling threads take turns
 * on a CPU the kernel may pass one's inherited event on to the other (on
 * 6.18 with the cores busy, a thread of 20.0 ms carried 33.1 ms). Each
 * thread is still sampled by the CPU it uses, so a sample weighs one
 * period, and the family's whole count (pt_perffam_count) is exact. The
 * family's own threads are sampled by it too. Knows nothing of tracees or
 * sessions; sampler thread only. */
#ifndef PT_PERFFAM_H
#define PT_PERFFAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/perf/perfev.h"

struct pt_perffam;

/* A family of no thread yet, its events to be opened as cfg says (its
 * period, stack copy and exclude_kernel; ring_samples per CPU's ring; no
 * on_fork). Returns 0, -EINVAL (cfg) or -ENOMEM. */
int pt_perffam_new(struct pt_perffam **out, const struct pt_perfev_cfg *cfg);
/* Frees the family: its events closed, its rings unmapped. NULL-safe. */
void pt_perffam_free(struct pt_perffam *f);
/* Adds tid: one inherited event per online CPU, enabled, each writing into
 * its CPU's ring (the first event of a CPU maps it). 0 if tid is in already.
 * Returns 0, -ESRCH (gone), -EOPNOTSUPP (the kernel refuses inherit with
 * PERF_SAMPLE_READ: before 6.12), -EMFILE, -ENOMEM, or another negative
 * errno of perf_event_open; nothing of tid is left open then. */
int pt_perffam_add(struct pt_perffam *f, pid_t tid);
/* Threads added, and their events (one per CPU each). */
size_t pt_perffam_threads(const struct pt_perffam *f);
size_t pt_perffam_events(const struct pt_perffam *f);
/* Stops or resumes every event's sampling. Returns 0 or the first -errno. */
int pt_perffam_enable(struct pt_perffam *f, int on);
/* Sets a new period on every event (the kernel passes it on to the
 * inherited copies as they overflow next). Returns 0 or the first -errno. */
int pt_perffam_set_period(struct pt_perffam *f, uint64_t period_ns);
/* The family's whole count: the CPU of its threads and of every thread they
 * created since they were added, ended ones included, in ns. */
int pt_perffam_count(struct pt_perffam *f, uint64_t *ns);
/* Reads every CPU's ring, as pt_perfev_drain reads one (smp->cpu set). */
int pt_perffam_drain(struct pt_perffam *f, int (*fn)(void *arg, const struct pt_perfev_sample *smp),
		     void *arg, uint64_t *lost);

#endif
