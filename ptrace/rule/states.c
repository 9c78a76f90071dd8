/* What every thread is doing at a tick, for the views that follow thread
 * states (block, mutex, trace): running, or blocked in which system call,
 * with the stack it blocked at, taken at one stop per wait and cached
 * (snapcache.c). Sampler thread only. */
#include "ptrace/rule/states.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>

#include "ptrace/proc/proc.h"
#include "ptrace/rule/rulestate.h"
#include "ptrace/rule/snapcache.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/mechanism/tracee.h"

#define STATE_STOP_WAIT_NS 10000000ull

/* What th is doing, for a tick's state report. Only a thread that ran since
 * the last look can have changed what it waits in: a thread whose CPU time
 * did not move is where it was (a thread woken but not yet on a core looks
 * the same for up to a tick), so it costs no read at all. One that ran:
 * /proc/<tid>/syscall says "running" for state R, else the system call it
 * is blocked in; /proc/<tid>/stat then tells S from D. */
static void thread_state(struct pt_thread *th, int ran)
{
	struct pt_rule_thread *rt = pt__rt(th);
	uint64_t sp = 0, pc = 0;
	long nr = -1;
	int rc;

	if (th->flags & PT_TH_GROUPSTOP) {
		th->state = 'T';
		rt->syscall = -1;
		return;
	}
	if (!ran && th->state && th->comm[0])
		return;
	rt->sys_sp = rt->sys_pc = 0;
	if (pt_thread_stat_only(th)) {
		rt->syscall = -1;
		if (pt_thread_read_state(th))
			th->state = '?';
		return;
	}
	rc = pt_thread_read_syscall(th, &nr, &sp, &pc);
	if (rc < 0 && rc != -EBADMSG)
		return;
	if (rc == 1) {
		th->state = 'R';
		rt->syscall = -1;
		if (!th->comm[0])
			pt_thread_read_state(th);
		return;
	}
	rt->syscall = rc || nr < 0 ? -1 : (int)nr;
	if (rt->syscall >= 0) {
		rt->sys_sp = sp;
		rt->sys_pc = pc;
	}
	/* A timed wait that a stop of ours interrupted goes on as
	 * restart_syscall: name the call it restarts, as read before the stop
	 * or captured at it. Any other call ends that wait. */
	if (rt->syscall != SYS_restart_syscall)
		rt->cut_syscall = -1;
	else if (pt__cut_here(rt, sp, pc))
		rt->syscall = rt->cut_syscall;
	if (pt_thread_read_state(th))
		th->state = '?';
}

/* Brings every live thread's state up to date for a state report, and
 * selects the blocked ones whose stack is not cached (first seen blocked, or
 * blocked anew since they ran, elsewhere than before): each is stopped once,
 * and its stack is then reused for as long as it stays blocked. A thread the
 * tick did not read has not run since its last look (the process's CPU
 * clock accounts for every thread that did); one that ran only to restart
 * the system call our own stop interrupted did not run either. Returns the
 * number selected. */
static int update_states(struct pt_rule *r, uint64_t now, struct pt_thread **sel, int max)
{
	size_t n = pt_threads_count(r->t);
	int nsel = 0;

	for (size_t i = 0; i < n; i++) {
		struct pt_thread *th = pt_threads_at(r->t, i);
		struct pt_rule_thread *rt;
		int ran, cached;

		if (th->flags & PT_TH_GONE)
			continue;
		rt = pt__rt(th);
		ran = rt->moved_at == now;
		thread_state(th, ran);
		cached = pt__snapcache_still_valid(th, rt->last_run_ns);
		rt->ran = ran && !cached;   /* cached though it ran: our stop's restart */
		if (!cached && pt__snapcache_same_place(th)) {
			rt->snap_run_ns = rt->last_run_ns;
			r->st.snapshot_reused++;
			cached = 1;
		}
		if (cached || nsel >= max || (th->flags & (PT_TH_INTERRUPTING | PT_TH_GROUPSTOP)) ||
		    (th->state != 'S' && th->state != 'D'))
			continue;
		rt->snap_run_ns = rt->last_run_ns;
		rt->snap_ok = 0;   /* until the stop comes and is captured */
		pt__cut_note(rt, rt->syscall, rt->sys_sp, rt->sys_pc);   /* if the stop is late */
		sel[nsel++] = th;
	}
	return nsel;
}

void pt__states_report(struct pt_rule *r, uint64_t now, pt_state_cb state,
		       pt_timing_cb timing, void *arg)
{
	struct pt_thread *sel[256];
	int max = pt_tracee_opts(r->t)->max_per_tick;
	int nsel = update_states(r, now, sel, max < 256 ? max : 256);
	size_t n;

	/* Blocked threads stop only once they get a core: wait for them (a
	 * thread is stopped this way once per wait, not once per tick). */
	if (nsel)
		pt__snapcache_collect(r, sel, nsel, STATE_STOP_WAIT_NS, NULL, timing, arg);
	n = pt_threads_count(r->t);
	for (size_t i = 0; i < n; i++) {
		struct pt_thread *th = pt_threads_at(r->t, i);
		struct pt_rule_thread *rt;
		struct pt_thread_state st;
		int cached;

		if (th->flags & PT_TH_GONE)
			continue;
		rt = pt__rt(th);
		cached = rt->snap_ok && rt->snap_run_ns == rt->last_run_ns;
		st = (struct pt_thread_state){
			.at_ns = now, .pid = th->pid, .tid = th->tid, .comm = th->comm,
			.state = th->state, .syscall = rt->syscall, .run_ns = rt->last_run_ns,
			.wait_ns = rt->wait_ns, .ran = rt->ran, .stack = cached ? rt->snap : NULL,
			.n = cached ? rt->snap_n : 0,
		};
		state(arg, &st);
	}
}
