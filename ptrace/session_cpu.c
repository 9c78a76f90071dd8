/* The CPU profile: on-CPU stacks over a window, weighted by the CPU each
 * thread used since its previous sample (the tick's rule is in rule.c).
 * Owns the session's stack table. Sampler thread only, as every session
 * hook. */
#include "ptrace/session_cpu.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ptrace/ptrace_internal.h"
#include "ptrace/sampler.h"
#include "ptrace/session.h"
#include "ptrace/stacks.h"
#include "ptrace/tracee.h"

struct cpu_session {
	struct pt_session base;
	struct pt_stacks *stacks;
	uint64_t thread_samples;
};

static int cpu_start(struct pt_session *ss)
{
	struct cpu_session *cs = PT_SESSION_OF(ss, struct cpu_session);

	return pt_stacks_new(&cs->stacks, (size_t)ss->o->max_stacks);
}

static void cpu_on_sample(struct pt_session *ss, const struct pt_sample *smp)
{
	struct cpu_session *cs = PT_SESSION_OF(ss, struct cpu_session);
	/* The CPU a thread used since it was last looked at covers one tick
	 * period, or the session's if that is longer. */
	int64_t v[PT_MAX_VALUES] = { 1, (int64_t)((double)smp->cpu_ns * ss->scale) };

	cs->thread_samples++;
	pt_stacks_add(cs->stacks, smp, v);
}

static int cpu_finish(struct pt_session *ss)
{
	struct cpu_session *cs = PT_SESSION_OF(ss, struct cpu_session);
	struct pt_request *req = ss->req;
	struct pt_profile *p;
	struct pt_sampler_stats st;
	struct pt_tracee_stats ts;
	int err = pt_profile_build(cs->stacks, ss->t, &req->profile);

	p = req->profile;
	if (p) {
		p->time_ns = ss->start_wall;
		p->duration_ns = pt__now_ns() - ss->start_ns;
		p->hz = req->hz;
		p->thread_samples = cs->thread_samples;
	}
	pt_sampler_stats(ss->s, &st);
	pt_tracee_stats(ss->t, &ts);
	pt__sampler_log(ss->s, 1, "profile: done pid=%d thread_samples=%llu stacks=%zu dropped=%llu "
			"pause_us p50=%.1f p99=%.1f unwind_us p50=%.1f p99=%.1f "
			"symbolize_us_per_loc=%.2f locs=%zu symtabs=%llu in %.1f ms"
			" python_captures=%llu python_us_per_capture=%.2f%s",
			(int)req->pid, (unsigned long long)cs->thread_samples,
			pt_stacks_count(cs->stacks), (unsigned long long)pt_stacks_dropped(cs->stacks),
			(double)st.pause_p50_ns / 1e3, (double)st.pause_p99_ns / 1e3,
			(double)st.unwind_p50_ns / 1e3, (double)st.unwind_p99_ns / 1e3,
			p && p->nlocs ? (double)p->symbolize_ns / 1e3 / (double)p->nlocs : 0.0,
			p ? p->nlocs : 0, (unsigned long long)ts.symtab_loads,
			(double)ts.symtab_load_ns / 1e6, (unsigned long long)ts.py_captures,
			ts.py_captures ? (double)ts.py_capture_ns / 1e3 / (double)ts.py_captures : 0.0,
			atomic_load(&req->cancel) ? " (client gone)" : "");
	return err;
}

static void cpu_free(struct pt_session *ss)
{
	pt_stacks_free(PT_SESSION_OF(ss, struct cpu_session)->stacks);
}

const struct pt_session_kind pt_kind_cpu = {
	.name = "profile",
	.size = sizeof(struct cpu_session),
	.flags = PT_KIND_F_ATTACH | PT_KIND_F_WINDOW | PT_KIND_F_TICKS,
	.start = cpu_start,
	.on_sample = cpu_on_sample,
	.finish = cpu_finish,
	.free = cpu_free,
};
