/* New threads followed without a stop under perf_event (see perfborn.h). */
#include "ptrace/rule/perfborn.h"

#include <errno.h>

#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/mechanism/tracee.h"
#include "ptrace/mechanism/tracer.h"
#include "ptrace/perf/perfev.h"
#include "ptrace/rule/rulestate.h"

#define RESCAN_NS 100000000ull

/* A thread's wake event: its FORK records, read as they come. */
struct pt__fwake {
	struct pt_watch w;       /* first: the watch is the structure */
	struct pt_rule *r;
	struct pt_perfev *ev;
};


static void on_wake(struct pt_watch *w)
{
	struct pt__fwake *fw = (struct pt__fwake *)(void *)w;
	struct pt_rule *r = fw->r;

	if (!pt_perfev_pending(fw->ev))
		return;
	(void)pt_perfev_drain(fw->ev, NULL, NULL, &r->st.perf_lost);
	pt__perfborn_settle(r);
}

/* Gives th (a thread that created one) its wake event. */
static void open_wake(struct pt_rule *r, struct pt_thread *th)
{
	struct pt_rule_thread *rt = pt__rt(th);
	struct pt_perfev_cfg c = r->pcfg;
	struct pt__fwake *fw;

	if (rt->pf_wake || rt->pf_wake_failed)
		return;
	if (!(fw = base_calloc(1, sizeof(*fw)))) {
		rt->pf_wake_failed = 1;
		return;
	}
	fw->w.fn = on_wake;
	fw->r = r;
	c.on_fork = pt__perfborn_on_fork;
	c.fork_arg = r;
	if (pt_perfev_open_forks(&fw->ev, th->tid, &c) ||
	    pt_tracee_watch(r->t, pt_perfev_fd(fw->ev), &fw->w)) {
		/* its records still come at the ticks, in its sampling ring */
		pt_perfev_close(fw->ev);
		base_free(fw);
		rt->pf_wake_failed = 1;
		return;
	}
	rt->pf_wake = fw;
	r->st.perf_wakes++;
}

static void close_wake(struct pt_rule_thread *rt)
{
	struct pt__fwake *fw = rt->pf_wake;

	if (!fw)
		return;
	pt_tracee_unwatch(fw->r->t, &fw->w);
	pt_perfev_close(fw->ev);
	base_free(fw);
	rt->pf_wake = NULL;
}

void pt__perfborn_start(struct pt_rule *r)
{
	r->pb.on = 1;
	r->pcfg.on_fork = pt__perfborn_on_fork;
	r->pcfg.fork_arg = r;
	pt_tracee_set_clone_stops(r->t, 0);
}

void pt__perfborn_on_fork(void *arg, pid_t parent, pid_t child, uint64_t born_ns)
{
	struct pt_rule *r = arg;

	/* (a full queue: the rest are found by the next rescan) */
	if (r->pb.nq < PT_PERFBORN_QUEUE) {
		r->pb.q[r->pb.nq].parent = parent;
		r->pb.q[r->pb.nq].child = child;
		r->pb.q[r->pb.nq].born_ns = born_ns;
		r->pb.nq++;
	}
}

void pt__perfborn_settle(struct pt_rule *r)
{
	int n = r->pb.nq;

	r->pb.nq = 0;
	if (!r->pb.on)
		return;
	/* A child may come twice (its parent's wake ring and sampling ring):
	 * known the second time, or gone. One a clone event reports (clone
	 * stops back for the threadcreate profile) is traced already: the
	 * adoption fails, nothing else. */
	for (int i = 0; i < n; i++) {
		struct pt_thread *parent = pt_threads_find(r->t, r->pb.q[i].parent);

		/* the child first: it runs meanwhile */
		if (!pt_threads_find(r->t, r->pb.q[i].child) &&
		    !pt_tracee_adopt(r->t, r->pb.q[i].child, r->pb.q[i].parent, r->pb.q[i].born_ns) &&
		    pt_threads_find(r->t, r->pb.q[i].child))
			r->st.perf_adopted++;
		if (parent)
			open_wake(r, parent);
	}
}

void pt__perfborn_tick(struct pt_rule *r, uint64_t now)
{
	if (!r->pb.on)
		return;
	/* (a wake that never came: its ring is read here all the same) */
	for (size_t i = 0; i < pt_threads_count(r->t); i++) {
		struct pt_rule_thread *rt = pt__rt(pt_threads_at(r->t, i));

		if (rt->pf_wake && pt_perfev_pending(rt->pf_wake->ev))
			(void)pt_perfev_drain(rt->pf_wake->ev, NULL, NULL, &r->st.perf_lost);
	}
	pt__perfborn_settle(r);
	/* (whatever the clone stops now: threads born while none were kept,
	 * or born to a thread not yet adopted, are found only so) */
	if (now < r->pb.rescan_ns + RESCAN_NS)
		return;
	r->pb.rescan_ns = now;
	(void)pt_tracee_rescan(r->t);
}

void pt__perfborn_enable(struct pt_rule *r, int on)
{
	for (size_t i = 0; i < pt_threads_count(r->t); i++) {
		struct pt_rule_thread *rt = pt__rt(pt_threads_at(r->t, i));

		if (rt->pf_wake)
			(void)pt_perfev_enable(rt->pf_wake->ev, on);
	}
	if (!on)
		r->pb.nq = 0;
}

void pt__perfborn_drop(struct pt_thread *th)
{
	struct pt_rule_thread *rt = th->rule;

	if (rt) {
		close_wake(rt);
		rt->pf_wake_failed = 0;
	}
}
