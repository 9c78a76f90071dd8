/* Draws: threads born while sampled, stopped by the CPU they used (see
 * cpudraw.h). Sampler thread only. */
#include "ptrace/rule/cpudraw.h"

#include <errno.h>
#include <unistd.h>

#include "ptrace/perf/cpuwake.h"
#include "ptrace/rule/rulestate.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/mechanism/tracee.h"

#define MIN_PERIOD_NS 10000ull   /* the kernel's least hrtimer period */

int pt__drawn(struct pt_thread *th)
{
	struct pt_rule_thread *rt = pt__rt(th);

	return rt->dw_fd1 && rt->dw_armed;
}

void pt__draw_drop(struct pt_thread *th)
{
	struct pt_rule_thread *rt = th->rule;

	if (rt && rt->dw_fd1) {
		close(rt->dw_fd1 - 1);
		rt->dw_fd1 = 0;
		rt->dw_armed = 0;
	}
}

/* 1 while new threads are drawn. */
static int drawing(const struct pt_rule *r)
{
	return r->backend == PT_BACKEND_PTRACE && r->decided && r->dw_on && !r->dw_off &&
	       pt_tracee_opts(r->t)->draw_threads;
}

/* A random part of a period: where in its CPU a new thread is first
 * drawn, as a tick would come at a random point of a period. */
static uint64_t first_period(struct pt_rule *r)
{
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	if (r->dw_period <= MIN_PERIOD_NS)
		return MIN_PERIOD_NS;
	return MIN_PERIOD_NS + r->rng % (r->dw_period - MIN_PERIOD_NS);
}

void pt__draw_born(void *arg, struct pt_thread *th)
{
	struct pt_rule *r = arg;
	struct pt_rule_thread *rt = pt__rt(th);
	uint64_t first;
	int fd;

	if (rt->dw_fd1 || !drawing(r) || (th->flags & PT_TH_GONE))
		return;
	if (!r->dw_sig) {
		r->dw_sig = pt_cpuwake_signal(pt_tracee_pid(r->t), NULL, 0);
		pt_tracee_set_own_signal(r->t, r->dw_sig);
	}
	first = first_period(r);
	fd = pt_cpuwake_open(th->tid, r->dw_sig, first, r->dw_ek);
	if (fd == -EACCES && !r->dw_ek) {
		/* kernel ticks not allowed (perf_event_paranoid 2): user time only */
		r->dw_ek = 1;
		fd = pt_cpuwake_open(th->tid, r->dw_sig, first, 1);
	}
	if (fd < 0) {
		/* Refused (perf_event_paranoid, a seccomp filter, no such
		 * syscall): the ticks sample every thread, as before. Out of
		 * fds or gone: this one only. */
		if (fd != -EMFILE && fd != -ENFILE && fd != -ESRCH && fd != -ENOMEM) {
			r->dw_off = 1;
			r->st.draw_err = -fd;
		}
		return;
	}
	rt->dw_fd1 = fd + 1;
	/* Its first draw stands for a whole period all the same: began at a
	 * random point of one, the draws of a thread of CPU c number c / period
	 * on average. */
	rt->dw_armed = r->dw_period;
	r->st.draw_threads++;
}

int pt__draw_own_signal(void *arg, struct pt_thread *th, const siginfo_t *si)
{
	struct pt_rule *r = arg;
	struct pt_rule_thread *rt = pt__rt(th);

	if (!rt->dw_fd1 || !pt_cpuwake_ours(si, r->dw_sig, rt->dw_fd1 - 1))
		return 0;
	/* The draw's weight, reported with its capture (tick_sample); one
	 * whose capture was lost is carried by the next. */
	rt->cpu_ns += rt->dw_armed;
	rt->dw_armed = 0;
	rt->sel_tick = PT_TICK_DRAW;   /* no tick's: every CPU session's */
	r->st.draws++;
	/* Armed again before the thread runs on (pt_cpuwake_arm); not
	 * armed, the ticks sample it from its next look on. */
	if (r->dw_on && r->dw_period && !pt_cpuwake_arm(rt->dw_fd1 - 1, r->dw_period))
		rt->dw_armed = r->dw_period;
	return 1;
}

void pt__draw_tick(struct pt_rule *r, uint64_t cpu_period_ns)
{
	r->dw_period = cpu_period_ns;
	if (r->dw_on)
		return;
	r->dw_on = 1;
	/* Sampling again: the drawn threads' events, left unarmed by the
	 * pause, draw again from a whole period. */
	for (size_t i = 0; i < pt_threads_count(r->t); i++) {
		struct pt_thread *th = pt_threads_at(r->t, i);
		struct pt_rule_thread *rt = th->rule;

		if (rt && rt->dw_fd1 && !rt->dw_armed && !(th->flags & PT_TH_GONE) &&
		    !pt_cpuwake_arm(rt->dw_fd1 - 1, cpu_period_ns))
			rt->dw_armed = cpu_period_ns;
	}
}

void pt__draw_idle(struct pt_rule *r)
{
	r->dw_on = 0;
}
