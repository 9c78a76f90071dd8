/* The sampler's counters (struct pt_sampler_stats) made of its parts: each
 * target's counts added up, and the recent pauses and unwinds kept for their
 * medians. Sampler thread, but for the ring's readers (under the sampler's
 * lock, as its writer). */
#ifndef PT_STATS_H
#define PT_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "ptrace/sampler/request.h"

struct pt_rule;
struct pt_tracee;

#define PT_STATS_RING 4096   /* recent pauses kept for medians */

/* The recent pause and unwind times of thread-samples. */
struct pt__timing_ring {
	uint64_t pauses[PT_STATS_RING], unwinds[PT_STATS_RING], sorted[PT_STATS_RING];
	size_t n;
};

/* Adds one thread-sample's pause and unwind time. */
void pt__stats_ring_add(struct pt__timing_ring *r, uint64_t pause_ns, uint64_t unwind_ns);
/* Sets out's pause and unwind p50 and p99 from the ring (left alone when
 * it is empty). */
void pt__stats_ring_quantiles(struct pt__timing_ring *r, struct pt_sampler_stats *out);
/* Adds the counters of one target (its tracee and its rule) into st. */
void pt__stats_add_target(struct pt_sampler_stats *st, const struct pt_tracee *t, const struct pt_rule *r);

#endif
