/* The thread dump: every thread's stack now, each blocked thread's from
 * its cache where it still holds, the others stopped a batch at a time.
 * Sampler thread only. */
#include "ptrace/rule/snapshot.h"

#include <errno.h>

#include "base/mem.h"
#include "ptrace/rule/rulestate.h"
#include "ptrace/rule/snapcache.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/mechanism/tracee.h"

static void report_cached(const struct pt_thread *th, char state, int syscall, pt_sample_cb cb,
			  void *arg)
{
	const struct pt_rule_thread *rt = th->rule;
	struct pt_sample smp = { .pid = th->pid, .tid = th->tid, .comm = th->comm, .state = state,
				 .syscall = syscall, .frames = rt->snap,
				 .n = rt->snap ? rt->snap_n : 0, .cached = 1 };

	cb(arg, &smp);
}

/* A thread of the dump whose stack could not be taken now (a stop of ours
 * still pending, or it did not stop in time): listed all the same, without
 * a stack, so that the dump has every thread. */
static void report_bare(const struct pt_thread *th, pt_sample_cb cb, void *arg)
{
	struct pt_sample smp = { .pid = th->pid, .tid = th->tid, .comm = th->comm,
				 .state = th->state ? th->state : '?', .syscall = -1 };

	cb(arg, &smp);
}

/* Selects from tids[*next..count) the threads of the next batch (at most
 * max), reporting at once those that need no stop. Returns the number
 * selected; *reported counts those reported. */
static int select_batch(struct pt_rule *r, const pid_t *tids, size_t count, size_t *next, int max,
			struct pt_thread **sel, pid_t *seltid, pt_sample_cb cb, void *arg,
			int *reported)
{
	int nsel = 0;

	for (; *next < count && nsel < max; (*next)++) {
		struct pt_thread *th = pt_threads_find(r->t, tids[*next]);
		uint64_t run;

		if (!th)
			continue;
		if (th->flags & PT_TH_INTERRUPTING) {
			report_bare(th, cb, arg);
			(*reported)++;
			continue;
		}
		/* Group-stopped, or blocked since its last snapshot: its last
		 * stack, without a stop. */
		if (th->flags & PT_TH_GROUPSTOP) {
			pt__rt(th);
			report_cached(th, 'T', -1, cb, arg);
			(*reported)++;
			continue;
		}
		if (pt_thread_read_sched(th, &run, NULL, NULL))
			continue;
		if (pt__snapcache_still_valid(th, run)) {
			report_cached(th, th->state, th->rule->snap_syscall, cb, arg);
			r->st.snapshot_reused++;
			(*reported)++;
			continue;
		}
		if (pt_thread_read_state(th))
			continue;
		th->rule->snap_run_ns = run;
		th->rule->snap_ok = 0;   /* until the stop comes and is captured */
		th->rule->snap_taken = 0;
		seltid[nsel] = th->tid;
		sel[nsel++] = th;
	}
	return nsel;
}

int pt_snapshot_take(struct pt_rule *r, uint64_t wait_ns, pt_sample_cb cb, void *arg,
		     int *stopped)
{
	struct pt_tracee *t = r->t;
	struct pt_thread *sel[256];
	pid_t seltid[256], *tids;
	size_t count = 0, next = 0, n = pt_threads_count(t);
	int max = pt_tracee_opts(t)->max_per_tick, reported = 0;

	*stopped = 0;
	if (max > 256)
		max = 256;
	if (!pt_tracee_attached(t) || pt_tracee_detaching(t) || pt_tracee_exec_pending(t))
		return -ESRCH;
	/* The thread list may grow (clones seen while collecting) and shrink
	 * (compacted between batches): walk a copy of the tids, finding each
	 * thread again per batch. */
	if (!(tids = base_calloc(n ? n : 1, sizeof(*tids))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!(pt_threads_at(t, i)->flags & PT_TH_GONE))
			tids[count++] = pt_threads_at(t, i)->tid;
	while (next < count && !pt_tracee_exec_pending(t)) {
		int nsel = select_batch(r, tids, count, &next, max, sel, seltid, cb, arg, &reported);

		if (nsel) {
			reported += pt__snapcache_collect(r, sel, nsel, wait_ns, cb, NULL, arg);
			*stopped += nsel;
			/* The ones not captured (late, or a capture that failed). */
			for (int i = 0; i < nsel; i++) {
				struct pt_thread *th = pt_threads_find(t, seltid[i]);

				if (th && !pt__rt(th)->snap_taken) {
					report_bare(th, cb, arg);
					reported++;
				}
			}
		}
		pt_threads_compact(t);
	}
	base_free(tids);
	return reported;
}
