/* The sampler's counters from its parts (see stats.h). */
#include "ptrace/sampler/stats.h"

#include <stdlib.h>
#include <string.h>

#include "ptrace/rule/rule.h"
#include "ptrace/mechanism/tracee.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void pt__stats_ring_add(struct pt__timing_ring *r, uint64_t pause_ns, uint64_t unwind_ns)
{
	r->pauses[r->n % PT_STATS_RING] = pause_ns;
	r->unwinds[r->n % PT_STATS_RING] = unwind_ns;
	r->n++;
}

void pt__stats_ring_quantiles(struct pt__timing_ring *r, struct pt_sampler_stats *out)
{
	uint64_t *tmp = r->sorted;
	size_t n = r->n < PT_STATS_RING ? r->n : PT_STATS_RING;

	if (!n)
		return;
	memcpy(tmp, r->pauses, n * sizeof(*tmp));
	qsort(tmp, n, sizeof(*tmp), cmp_u64);
	out->pause_p50_ns = tmp[n / 2];
	out->pause_p99_ns = tmp[n * 99 / 100];
	memcpy(tmp, r->unwinds, n * sizeof(*tmp));
	qsort(tmp, n, sizeof(*tmp), cmp_u64);
	out->unwind_p50_ns = tmp[n / 2];
	out->unwind_p99_ns = tmp[n * 99 / 100];
}

void pt__stats_add_target(struct pt_sampler_stats *st, const struct pt_tracee *t, const struct pt_rule *r)
{
	struct pt_tracee_stats ts;
	struct pt_rule_stats rs;

	pt_tracee_stats(t, &ts);
	pt_rule_stats(r, &rs);
	st->thread_samples += ts.thread_samples;
	st->stops += ts.stops;
	st->late_stops += ts.late_stops;
	st->preempted_stops += rs.preempted_stops;
	st->handler_stops += rs.handler_stops;
	st->unpaid_stops += rs.unpaid_stops;
	st->incomplete_stacks += ts.incomplete_stacks;
	st->signals_reinjected += ts.signals_reinjected;
	st->frames_total += ts.frames_total;
	st->pause_ns_total += ts.pause_ns_total;
	st->unwind_ns_total += ts.unwind_ns_total;
	st->snapshot_stops += rs.snapshot_stops;
	st->snapshot_reused += rs.snapshot_reused;
	st->maps_rereads += ts.maps_rereads;
	st->short_copies += ts.short_copies;
	st->signal_copies += ts.signal_copies;
	st->group_stops += ts.group_stops;
	st->clones += ts.clones + ts.adopted + ts.rescanned;
	st->clones_resumed_at_once += ts.clones_resumed_at_once;
	st->threads_adopted += ts.adopted + ts.rescanned;
	st->forks += ts.forks;
	st->execs += ts.execs;
	st->perf_samples += rs.perf_samples;
	st->perf_lost += rs.perf_lost;
	st->perf_stack_bytes += rs.perf_stack_bytes;
	st->perf_open_failures += rs.perf_open_failures;
	st->draw_threads += rs.draw_threads;
	st->draws += rs.draws;
	st->own_signals += ts.own_signals;
}
