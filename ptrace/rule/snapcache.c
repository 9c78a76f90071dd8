/* The stacks cached at stops: a thread stopped for a thread dump or a
 * state report keeps its stack, which holds for as long as the thread does
 * not run. An idle thread is so stopped once per wait, not once per look:
 * the dump of a server of a thousand idle threads stops none of them a
 * second time. Sampler thread only. */
#include "ptrace/rule/snapcache.h"

#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>

#include "base/mem.h"
#include "ptrace/proc/proc.h"
#include "ptrace/rule/rulestate.h"
#include "ptrace/mechanism/tracee.h"

void pt__cut_note(struct pt_rule_thread *rt, int nr, uint64_t sp, uint64_t pc)
{
	rt->cut_syscall = nr;
	rt->cut_sp = sp;
	rt->cut_pc = pc;
}

int pt__cut_here(const struct pt_rule_thread *rt, uint64_t sp, uint64_t pc)
{
	return rt->cut_syscall >= 0 && rt->cut_syscall != SYS_restart_syscall && pc &&
	       sp == rt->cut_sp && pc == rt->cut_pc;
}

/* Keeps smp's stack (just captured) in th's cache. */
static void keep(struct pt_rule *r, struct pt_thread *th, const struct pt_sample *smp)
{
	struct pt_rule_thread *rt = pt__rt(th);
	size_t max = (size_t)pt_tracee_opts(r->t)->max_frames;

	if (!rt->snap && !(rt->snap = base_calloc(max, sizeof(*rt->snap))))
		return;
	memcpy(rt->snap, smp->frames, (size_t)smp->n * sizeof(*smp->frames));
	rt->snap_n = smp->n;
	rt->snap_ok = 1;
	rt->snap_sp = smp->sp;
	rt->snap_pc = smp->pc;
	/* Stopped in the restart of a call an earlier stop of ours cut (one
	 * that came too late to be kept), from the same place: it still
	 * waits in that call. */
	rt->snap_syscall = smp->syscall;
	if (smp->syscall == SYS_restart_syscall) {
		if (pt__cut_here(rt, smp->sp, smp->pc))
			rt->snap_syscall = rt->cut_syscall;
	} else {
		pt__cut_note(rt, smp->syscall, smp->sp, smp->pc);
	}
	rt->snap_restart = 1;
	r->st.snapshot_stops++;
}

static void snap_sample(void *arg, struct pt_thread *th, struct pt_sample *smp)
{
	struct pt_rule *r = arg;

	smp->cpu_ns = 0;   /* not a CPU sample */
	keep(r, th, smp);
	if (pt__rt(th)->snap_ok && smp->syscall == SYS_restart_syscall)
		smp->syscall = pt__rt(th)->snap_syscall;   /* the call it goes on with, as cached */
	pt__rt(th)->snap_taken = 1;   /* reported, even if the cache could not keep it */
	if (r->snap_cb)
		r->snap_cb(r->snap_arg, smp);
}

static void snap_timing(void *arg, uint64_t pause_ns, uint64_t unwind_ns)
{
	struct pt_rule *r = arg;

	if (r->snap_timing)
		r->snap_timing(r->snap_arg, pause_ns, unwind_ns);
}

const struct pt_stop_ops pt__snapcache_ops = { .sample = snap_sample, .timing = snap_timing };

int pt__snapcache_collect(struct pt_rule *r, struct pt_thread **sel, int nsel, uint64_t wait_ns,
		     pt_sample_cb cb, pt_timing_cb timing, void *arg)
{
	struct pt_stop_ops ops = pt__snapcache_ops;

	ops.arg = r;
	r->snap_cb = cb;
	r->snap_timing = timing;
	r->snap_arg = arg;
	return r->io.collect(r->t, sel, nsel, wait_ns, 1, &ops);
}

/* The CPU a restart of the interrupted system call may take and still count
 * as "did not run": entering a ptrace stop and going back to sleep. */
#define RESTART_SLACK_NS 200000ull

int pt__snapcache_still_valid(struct pt_thread *th, uint64_t run)
{
	struct pt_rule_thread *rt = pt__rt(th);
	uint64_t sp, pc;
	long nr;

	if (!rt->snap || !rt->snap_ok || run < rt->snap_run_ns)
		return 0;
	if (run == rt->snap_run_ns)
		return 1;
	if (!rt->snap_restart || run - rt->snap_run_ns > RESTART_SLACK_NS || rt->snap_syscall < 0)
		return 0;
	rt->snap_restart = 0;
	if (pt_thread_read_syscall(th, &nr, &sp, &pc) || sp != rt->snap_sp || pc != rt->snap_pc)
		return 0;
	rt->snap_run_ns = run;   /* the restart is absorbed once */
	return 1;
}

/* A loop around a blocking call (a worker waiting for its next job) comes
 * back to exactly the place its cached stack was taken: the same system
 * call entered from the same instruction with the same stack pointer
 * (/proc/<tid>/syscall, no stop). Its stack is then taken as the cached
 * one, without a stop. */
int pt__snapcache_same_place(struct pt_thread *th)
{
	struct pt_rule_thread *rt = pt__rt(th);

	return rt->snap_ok && rt->syscall >= 0 && rt->syscall == rt->snap_syscall && rt->sys_pc &&
	       rt->sys_sp == rt->snap_sp && rt->sys_pc == rt->snap_pc;
}

void pt__snapcache_drop(struct pt_thread *th)
{
	base_free(th->rule->snap);
	th->rule->snap = NULL;
}
