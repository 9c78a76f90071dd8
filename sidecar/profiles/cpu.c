/* /debug/pprof/profile: on-CPU stacks, Go's CPU profile: its parameters
 * on the loop thread, a CPU session on the sampler thread, the pprof
 * encoding on a work thread (its job owns the profile until then). */
#include "sidecar/profiles/cpu.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "encoder/pprof.h"
#include "ptrace/sessions/cpu.h"
#include "sidecar/server/cfg.h"
#include "sidecar/server/http.h"
#include "sidecar/server/params.h"
#include "sidecar/server/job.h"
#include "sidecar/server/reply.h"
#include "sidecar/server/server.h"
#include "sidecar/server/stacks.h"

static const struct sc_stack_value cpu_values[] = {
	{ "samples", "count", SC_COL_COUNT },
	{ "cpu", "nanoseconds", SC_COL_CPU_NS },
};
/* Which thread each sample is of: pprof -tagfocus=thread=NAME or tid=N. */
static const struct sc_stack_spec cpu_spec = { cpu_values, 2, SC_LABEL_THREAD | SC_LABEL_TID | SC_LABEL_GO };

static int build(struct enc_pprof *e, const struct pt_profile *pr)
{
	struct sc_stacks_info in;
	char comment[768];
	int err;

	sc_stacks_info(pr, &in);
	if ((err = sc_stacks_types(e, &cpu_spec)) ||
	    (err = enc_pprof_period(e, "cpu", "nanoseconds", 1000000000ll / in.hz)))
		return err;
	enc_pprof_time(e, (int64_t)in.time_ns, (int64_t)in.duration_ns);
	snprintf(comment, sizeof(comment),
		 "podprof: on-CPU thread samples taken with %s at %d Hz; thread_samples=%" PRIu64
		 " dropped_stacks=%" PRIu64 "%s", pr->backend ? pr->backend : "ptrace", in.hz,
		 in.thread_samples, in.dropped_stacks,
		 !pr->backend || !strcmp(pr->backend, "ptrace") ? " (each sample stops its thread)" :
		 !strcmp(pr->backend, "perf_event") ?
		 " (the kernel copied each sample's stack; no thread was stopped)" : "");
	if ((err = enc_pprof_comment(e, comment)))
		return err;
	if (pr->backend_why[0]) {
		snprintf(comment, sizeof(comment), "podprof: backend %s: %s", pr->backend,
			 pr->backend_why);
		if ((err = enc_pprof_comment(e, comment)))
			return err;
	}
	if (pr->open_failures) {
		snprintf(comment, sizeof(comment),
			 "podprof: perf_event_open failed %" PRIu64 " times for threads (last: %s): "
			 "their CPU is under \"" PT_MARK_PENDING_NAME "\"", pr->open_failures,
			 strerror(pr->open_err));
		if ((err = enc_pprof_comment(e, comment)))
			return err;
	}
	if (pr->draw_threads || pr->draw_err) {
		if (pr->draw_err)
			snprintf(comment, sizeof(comment),
				 "podprof: threads born in the window were sampled at the ticks, not "
				 "stopped by the CPU they used (perf_event_open: %s)", strerror(pr->draw_err));
		else
			snprintf(comment, sizeof(comment),
				 "podprof: draws=%" PRIu64 ": the %" PRIu64 " threads born in the window "
				 "were sampled by the CPU they used from their first instruction (a "
				 "counting event's signal stopped a thread where it ran, and was never "
				 "delivered to it), each sample standing for a period of its thread's CPU",
				 pr->draws, pr->draw_threads);
		if ((err = enc_pprof_comment(e, comment)))
			return err;
	}
	if (pr->samples_lost) {
		snprintf(comment, sizeof(comment),
			 "podprof: samples_lost=%" PRIu64 " the kernel could not write (a ring buffer "
			 "full); their CPU is carried by their threads' next samples", pr->samples_lost);
		if ((err = enc_pprof_comment(e, comment)))
			return err;
	}
	/* What the samples did not carry (ptrace/sessions/cpu.c): the live
	 * threads' CPU since their last sample, then the ended threads'. */
	if (pr->process_cpu_ns) {
		snprintf(comment, sizeof(comment),
			 "podprof: process_cpu_ns=%" PRIu64 " over the window; pending_ns=%" PRIu64
			 " (%.1f%%) used by live threads since their last sample, added under \""
			 PT_MARK_PENDING_NAME "\" to %" PRIu64 " stacks (each thread's last); "
			 "unsettled_ns=%" PRIu64 " the profile lacks",
			 pr->process_cpu_ns, pr->pending_ns,
			 100.0 * (double)pr->pending_ns / (double)pr->process_cpu_ns, pr->pending_stacks,
			 pr->unsettled_ns);
		if ((err = enc_pprof_comment(e, comment)))
			return err;
	}
	if (pr->process_cpu_ns && pr->unsampled_ns) {
		snprintf(comment, sizeof(comment),
			 "podprof: process_cpu_ns=%" PRIu64 " over the window; unsampled_ns=%" PRIu64
			 " (%.1f%%) used by threads between samples (%" PRIu64 " threads ended), "
			 "added under \"" PT_MARK_UNSAMPLED_NAME "\" to %" PRIu64
			 " stacks of sampled threads that ended", pr->process_cpu_ns, pr->unsampled_ns,
			 100.0 * (double)pr->unsampled_ns / (double)pr->process_cpu_ns, pr->exited_threads,
			 pr->exited_stacks);
		if ((err = enc_pprof_comment(e, comment)))
			return err;
	}
	if (pr->process_cpu_ns && pr->overdrawn_ns) {
		snprintf(comment, sizeof(comment),
			 "podprof: process_cpu_ns=%" PRIu64 " over the window; overdrawn_ns=%" PRIu64
			 " (%.1f%%) more than the threads that ended used was drawn (each draw stands for a "
			 "period), taken off their stacks in proportion to their CPU",
			 pr->process_cpu_ns, pr->overdrawn_ns,
			 100.0 * (double)pr->overdrawn_ns / (double)pr->process_cpu_ns);
		if ((err = enc_pprof_comment(e, comment)))
			return err;
	}
	if (pr->process_cpu_ns && pr->clock_over_ns) {
		snprintf(comment, sizeof(comment),
			 "podprof: process_cpu_ns=%" PRIu64 " over the window; clock_over_ns=%" PRIu64
			 " (%.1f%%) more than it used was carried by the kernel's samples and the live "
			 "threads' pending (their cpu-clock counts time the host took from a thread as "
			 "it ran), taken off both in proportion", pr->process_cpu_ns, pr->clock_over_ns,
			 100.0 * (double)pr->clock_over_ns / (double)pr->process_cpu_ns);
		if ((err = enc_pprof_comment(e, comment)))
			return err;
	}
	if ((err = sc_stacks_note_cut(e, pr)))
		return err;
	return sc_stacks_pprof(e, pr, &cpu_spec);
}

static enum sc_job_next cpu_done(struct sc_job *j)
{
	return sc_job_check(j, "Could not enable CPU profiling: ");
}

static void cpu_encode(struct sc_job *j, struct sc_reply *r)
{
	struct enc_pprof *e = NULL;
	int err = enc_pprof_new(&e);

	if (!err)
		err = build(e, j->req.profile);
	sc_reply_pprof(r, e, err, "profile");
	enc_pprof_free(e);
}

static const struct sc_job_ops cpu_ops = { cpu_done, cpu_encode, NULL };

void sc_profile_cpu(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	struct sc_job *j;

	if (!(j = sc_job_new(sc_server_jobs(srv), c, req, p, &cpu_ops, sizeof(*j))))
		return;
	j->req.kind = &pt_kind_cpu;
	sc_job_target(j, &p->target);
	j->req.duration_ns = (uint64_t)p->seconds * 1000000000ull;
	j->req.hz = p->hz;
	sc_job_submit(j);
}
