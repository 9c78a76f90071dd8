/* The sampling rule: which threads a tick stops, which a snapshot can
 * answer from its cache, and what every thread is doing at a tick. The stops
 * themselves (interrupt, capture, resume, unwind) are the mechanism's, in
 * tracee.c. Sampler thread only. */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <time.h>
#include <unistd.h>

#include "ptrace/proc.h"
#include "ptrace/ptrace_internal.h"
#include "ptrace/tracee_internal.h"

/* 1 if polling for stops costs the target nothing: no more threads of the
 * whole system are runnable (this one included) than there are cores, so
 * the core we poll on has nobody else to run. Else polling takes that core
 * from a thread that wants it, and the selected threads are mostly waiting
 * for a core: they stop only once they get one, after the polling gave up.
 * With 8 busy threads on 2 cores at 1000 Hz polling cost 65 us of our CPU
 * per sample against 41 us without, for no shorter pauses. Unknown (no
 * /proc/loadavg): as configured. */
int pt__spare_core(const struct pt_tracee *t)
{
	char buf[128];
	uint64_t running;

	if (pt__pread_own(&t->tr->loadavg_fd, "/proc/loadavg", buf, sizeof(buf)) <= 0)
		return 1;
	return pt_proc_parse_loadavg(buf, &running) || running <= (uint64_t)t->ncpu;
}

/* Reads a word at each selected thread's stack pointer of its last stop, all
 * in one system call, before they are interrupted. The stack copy during the
 * stop then finds the page tables and pages warm: with ticks 10 ms apart it
 * took 7-8 us of the pause instead of 2.5 (a stop cycle measured alone). A
 * thread that moved its stack costs nothing more than a short read. */
static void warm_stacks(struct pt_tracee *t, const size_t *sel, int nsel)
{
	struct iovec rem[64], loc;
	uint64_t words[64];
	int n = 0;

	for (int i = 0; i < nsel && n < 64; i++) {
		const struct thread *th = &t->th[sel[i]];

		if (th->last_sp)
			rem[n++] = (struct iovec){ (void *)(uintptr_t)(th->last_sp & ~7ull), 8 };
	}
	if (!n)
		return;
	loc = (struct iovec){ words, (size_t)n * 8 };
	(void)!process_vm_readv(t->pid, &loc, 1, rem, (unsigned long)n, 0);
}

/* 1 if th is runnable (state R) now. /proc/<tid>/syscall says "running"
 * for exactly that, for a third of the cost of /proc/<tid>/stat. The name
 * comes from stat, at most once a second (threads rename themselves rarely,
 * and mostly right after they start). */
static int is_running(struct pt_tracee *t, struct thread *th)
{
	char buf[16];
	ssize_t n;

	if (th->sys_fd < 0)   /* another uid's thread: its stat (see reopen_thread) */
		return !pt__read_state_fd(th) && th->state == 'R';
	n = pread(th->sys_fd, buf, sizeof(buf), 0);

	if (n < 7 || memcmp(buf, "running", 7))
		return 0;
	if (!th->comm[0] || pt__now_ns() - th->comm_ns > 1000000000ull)
		pt__read_state(t, th);   /* the caller sets the state it saw: R */
	return 1;
}

/* The target's CPU clock (all its threads, the exited ones too; the same
 * sums as each thread's schedstat), 0 if unreadable. */
static uint64_t process_cpu_ns(const struct pt_tracee *t)
{
	return pt__clock_ns((clockid_t)((~(unsigned int)t->pid << 3) | 2));   /* CPUCLOCK_SCHED */
}

/* Looks at one thread for a tick: adds the CPU it used since its last look
 * to *moved and to its weight and credit. Returns 1 if it is due and running
 * (selected), with its weight in cpu_ns. A thread being interrupted is only
 * accounted. */
static int look(struct pt_tracee *t, struct thread *th, uint64_t cpu_period_ns, uint64_t now,
		uint64_t *moved, int sampling)
{
	uint64_t run, slices = 0, need = cpu_period_ns;

	if (th->flags & (TH_GONE | TH_GROUPSTOP) ||
	    pt__read_run_ns(th, &run, &th->wait_ns, &slices) || run <= th->last_run_ns)
		return 0;
	th->moved_at = now;
	*moved += run - th->last_run_ns;
	if (th->credit_ns == NEW_CREDIT)
		th->credit_ns = need = 0;
	th->acc_ns += run - th->last_run_ns;
	th->credit_ns += run - th->last_run_ns;
	th->last_run_ns = run;
	if (!sampling) {
		/* A tick for thread states only: CPU used now is nobody's sample. */
		th->acc_ns = th->credit_ns = 0;
		return 0;
	}
	if (th->flags & TH_SIGNALLED) {
		/* Resumed with a signal (tracee.c on_status) and not on a core
		 * since: the kernel sets up its handler's frame as it next
		 * runs, so our stop would come at the handler's first
		 * instruction, once per signal, whatever the thread runs. It is
		 * sampled once it has run; its CPU waits in its credit. */
		if (slices == th->sig_slices)
			return 0;
		th->flags &= ~TH_SIGNALLED;
	}
	if (th->flags & TH_INTERRUPTING || th->credit_ns < need || !is_running(t, th))
		return 0;
	/* schedstat moves only at scheduler ticks and switches (every 4 ms at
	 * HZ=250) for a thread that keeps its core, so credit comes in lumps:
	 * keep up to four periods of it, no more (a thread found running after
	 * a long wait is not sampled at every tick after). */
	th->credit_paid = th->credit_ns < cpu_period_ns ? th->credit_ns : cpu_period_ns;
	th->credit_ns -= th->credit_paid;
	th->tick_ns = t->tr->woke_ns && t->tr->woke_ns < now ? t->tr->woke_ns : now;
	th->tick_wait_ns = th->wait_ns;
	th->tick_cpu = sched_getcpu();
	if (th->credit_ns > 4 * cpu_period_ns)
		th->credit_ns = 4 * cpu_period_ns;
	th->cpu_ns = th->acc_ns;
	th->acc_ns = 0;
	th->state = 'R';
	return 1;
}

/* Stops the selected threads (see pt__collect): polling for their stops only
 * with a core to spare, their stacks' pages warmed first. */
static int stop_selected(struct pt_tracee *t, size_t *sel, int nsel, uint64_t wait_ns, int snap,
			 const struct pt_tick_cbs *cbs)
{
	uint64_t spin_ns;

	pt__report_late(t);
	spin_ns = t->o.spin_ns && pt__spare_core(t) ? t->o.spin_ns : 0;
	warm_stacks(t, sel, nsel);
	return pt__collect(t, sel, nsel, wait_ns, spin_ns, snap, cbs);
}

/* What th is doing, for a tick's state report. Only a thread that ran since
 * the last look can have changed what it waits in: a thread whose CPU time
 * did not move is where it was (a thread woken but not yet on a core looks
 * the same for up to a tick), so it costs no read at all. One that ran:
 * /proc/<tid>/syscall says "running" for state R, else the system call it
 * is blocked in; /proc/<tid>/stat then tells S from D. */
static void thread_state(struct pt_tracee *t, struct thread *th, int ran)
{
	char buf[256];
	uint64_t sp, pc;
	long nr;

	if (th->flags & TH_GROUPSTOP) {
		th->state = 'T';
		th->syscall = -1;
		return;
	}
	if (!ran && th->state && th->comm[0])
		return;
	th->sys_sp = th->sys_pc = 0;
	if (th->sys_fd < 0) {   /* another uid's thread: its stat (see reopen_thread) */
		th->syscall = -1;
		if (pt__read_state_fd(th))
			th->state = '?';
		return;
	}
	if (pt__pread_text(th->sys_fd, buf, sizeof(buf)) <= 0)
		return;
	if (!strncmp(buf, "running", 7)) {
		th->state = 'R';
		th->syscall = -1;
		if (!th->comm[0])
			pt__read_state(t, th);
		return;
	}
	th->syscall = pt_proc_parse_syscall(buf, &nr, &sp, &pc) || nr < 0 ? -1 : (int)nr;
	if (th->syscall >= 0) {
		th->sys_sp = sp;
		th->sys_pc = pc;
	}
	/* A sleep that a stop of ours interrupted goes on as restart_syscall:
	 * name the call it restarts, as captured at that stop. */
	if (th->syscall == SYS_restart_syscall && th->snap_ok && th->snap_syscall >= 0)
		th->syscall = th->snap_syscall;
	if (pt__read_state(t, th))
		th->state = '?';
}

static int snap_still_valid(struct thread *th, uint64_t run);

#define STATE_STOP_WAIT_NS 10000000ull

/* 1 if th, blocked anew, waits where its cached stack was taken: the same
 * system call entered from the same instruction with the same stack
 * pointer (/proc/<tid>/syscall, no stop). A loop around a blocking call
 * (a worker waiting for its next job) comes back to exactly that place;
 * its stack is then taken as the cached one, without a stop. */
static int same_place(const struct thread *th)
{
	return th->snap_ok && th->syscall >= 0 && th->syscall == th->snap_syscall && th->sys_pc &&
	       th->sys_sp == th->snap_sp && th->sys_pc == th->snap_pc;
}

/* Brings every live thread's state up to date for a state report, and
 * selects the blocked ones whose stack is not cached (first seen blocked, or
 * blocked anew since they ran, elsewhere than before): each is stopped once,
 * and its stack is then reused for as long as it stays blocked. A thread the tick did not read
 * has not run since its last look (the process's CPU clock accounts for
 * every thread that did); one that ran only to restart the system call our
 * own stop interrupted did not run either. Returns the number selected. */
static int update_states(struct pt_tracee *t, uint64_t now, size_t *sel, int max)
{
	int nsel = 0;

	for (size_t i = 0; i < t->n; i++) {
		struct thread *th = &t->th[i];
		int ran = th->moved_at == now, cached;

		if (th->flags & TH_GONE)
			continue;
		thread_state(t, th, ran);
		cached = snap_still_valid(th, th->last_run_ns);
		th->ran = ran && !cached;   /* cached though it ran: our stop's restart */
		if (!cached && same_place(th)) {
			th->snap_run_ns = th->last_run_ns;
			t->st.snapshot_reused++;
			cached = 1;
		}
		if (cached || nsel >= max || (th->flags & (TH_INTERRUPTING | TH_GROUPSTOP)) ||
		    (th->state != 'S' && th->state != 'D'))
			continue;
		th->snap_run_ns = th->last_run_ns;
		th->snap_ok = 0;   /* until the stop comes and is captured */
		th->cpu_ns = 0;
		sel[nsel++] = i;
	}
	return nsel;
}

/* Reports every live thread's state to cbs->state (see pt_tick_cbs), after
 * stopping once the blocked threads whose stack is not cached yet. */
static void report_states(struct pt_tracee *t, uint64_t now, const struct pt_tick_cbs *cbs)
{
	struct pt_tick_cbs stops = { .timing = cbs->timing, .arg = cbs->arg };
	size_t sel[256];
	int max = t->o.max_per_tick < 256 ? t->o.max_per_tick : 256;
	int nsel = update_states(t, now, sel, max);

	/* Blocked threads stop only once they get a core: wait for them (a
	 * thread is stopped this way once per wait, not once per tick). */
	if (nsel)
		stop_selected(t, sel, nsel, STATE_STOP_WAIT_NS, 1, &stops);
	for (size_t i = 0; i < t->n; i++) {
		struct thread *th = &t->th[i];
		int cached = th->snap_ok && th->snap_run_ns == th->last_run_ns;
		struct pt_thread_state st;

		if (th->flags & TH_GONE)
			continue;
		st = (struct pt_thread_state){
			.at_ns = now, .pid = t->pid, .tid = th->tid, .comm = th->comm, .state = th->state,
			.syscall = th->syscall, .run_ns = th->last_run_ns, .wait_ns = th->wait_ns,
			.ran = th->ran, .stack = cached ? th->snap : NULL, .n = cached ? th->snap_n : 0,
		};
		cbs->state(cbs->arg, &st);
	}
}

/* Every thread is looked at this often at least, and a thread whose CPU
 * moved within QUIET_NS at every tick (see pt_tracee_tick). */
#define FULL_LOOK_NS 100000000ull
#define QUIET_NS 20000000ull

int pt_tracee_tick(struct pt_tracee *t, uint64_t cpu_period_ns, const struct pt_tick_cbs *cbs)
{
	size_t sel[256];   /* indices: t->th may move when a clone is seen */
	int nsel = 0, ncap, max = t->o.max_per_tick;
	uint64_t moved = 0, now = pt__now_ns(), pcpu = 0;
	int full = !t->pcpu_last || now - t->full_at >= FULL_LOOK_NS;

	if (max > 256)
		max = 256;
	if (!t->attached || t->detaching || t->execed)
		return 0;
	/* Late captures belong to the previous tick's sessions and weights. */
	pt__report_late(t);
	/* Select: like Go's profiler (a SIGPROF per period of CPU), a thread
	 * is due for a sample once it has used a period of CPU since it was
	 * last sampled; it is sampled at the first tick that finds it due and
	 * running, weighted by all the CPU it used since its last sample.
	 * Threads sharing cores are so sampled in proportion to the CPU they
	 * get, not once per tick each; a thread that runs in short bursts is
	 * sampled when a tick catches it running, its CPU in between counted.
	 * With more due threads than `max`, the start rotates so that every
	 * thread gets its turn (the CPU of the threads not looked at is counted
	 * at their next look).
	 *   A look is one pread per thread (1.3 us): 64 threads at 1000 Hz took
	 * 8 % of a core. So the threads whose CPU moved in the last QUIET_NS
	 * come first (pass 0: schedstat moves in lumps, every 4 ms for a thread
	 * that keeps its core), then the process's CPU clock tells whether
	 * anything else ran: the quiet ones (pass 1) are read only until the
	 * CPU found moving adds up to the clock's (none if the busy ones
	 * account for it). A pass-0 thread's reading is taken before the
	 * clock's, so a scheduler update landing in between can only make the
	 * clock look ahead (a needless read), except for one that landed
	 * between a thread's look and the clock's reading at the last tick,
	 * and a quiet thread read after the clock may count CPU the clock has
	 * not seen yet; so every thread is looked at every FULL_LOOK_NS all
	 * the same (what a thread used is never lost, only counted later). */
	size_t first = t->n ? t->rr++ % t->n : 0;

	for (int pass = 0; pass < 2 && nsel < max; pass++) {
		int partial = 0;

		if (pass == 1) {
			pcpu = process_cpu_ns(t);
			partial = !full && pcpu && t->pcpu_last;
			if (full)
				t->full_at = now;
		}
		for (size_t k = 0; k < t->n && nsel < max; k++) {
			size_t i = (first + k) % t->n;
			struct thread *th = &t->th[i];

			if (partial && pcpu - t->pcpu_last <= moved)
				break;   /* the threads that ran are all found */
			if ((th->moved_at + QUIET_NS <= now) != pass)
				continue;
			if (look(t, th, cpu_period_ns, now, &moved, cbs->sample != NULL))
				sel[nsel++] = i;
		}
	}
	/* A pass cut short by `max` left CPU unaccounted: the next tick reads all. */
	t->pcpu_last = nsel < max ? pcpu : 0;
	t->late = *cbs;
	ncap = stop_selected(t, sel, nsel, 0, 0, cbs);
	if (cbs->state)
		report_states(t, now, cbs);
	pt__compact(t);
	return ncap;
}

/* The CPU a restart of the interrupted system call may take and still count
 * as "did not run": entering a ptrace stop and going back to sleep. */
#define RESTART_SLACK_NS 200000ull

/* 1 if th's cached stack still holds: it has not run since (run_ns is what
 * it was at the capture), or ran only to go back into the same system call
 * at the same stack and instruction pointers after our stop woke it. */
static int snap_still_valid(struct thread *th, uint64_t run)
{
	char buf[256];
	uint64_t sp, pc;
	long nr;

	if (!th->snap || !th->snap_ok || run < th->snap_run_ns)
		return 0;
	if (run == th->snap_run_ns)
		return 1;
	if (!th->snap_restart || run - th->snap_run_ns > RESTART_SLACK_NS || th->snap_syscall < 0)
		return 0;
	th->snap_restart = 0;
	if (pt__pread_text(th->sys_fd, buf, sizeof(buf)) <= 0)
		return 0;
	if (pt_proc_parse_syscall(buf, &nr, &sp, &pc) || sp != th->snap_sp || pc != th->snap_pc)
		return 0;
	th->snap_run_ns = run;   /* the restart is absorbed once */
	return 1;
}

static void report_cached(const struct pt_tracee *t, const struct thread *th, char state,
			  int syscall, pt_sample_cb cb, void *arg)
{
	struct pt_sample smp = { .pid = t->pid, .tid = th->tid, .comm = th->comm, .state = state,
				 .syscall = syscall, .frames = th->snap,
				 .n = th->snap ? th->snap_n : 0, .cached = 1 };

	cb(arg, &smp);
}

/* A thread of the dump whose stack could not be taken now (a stop of ours
 * still pending, or it did not stop in time): listed all the same, without
 * a stack, so that the dump has every thread. */
static void report_bare(const struct pt_tracee *t, const struct thread *th, pt_sample_cb cb,
			void *arg)
{
	struct pt_sample smp = { .pid = t->pid, .tid = th->tid, .comm = th->comm,
				 .state = th->state ? th->state : '?', .syscall = -1 };

	cb(arg, &smp);
}

int pt_tracee_snapshot(struct pt_tracee *t, uint64_t wait_ns, pt_sample_cb cb, void *arg,
		       int *stopped)
{
	size_t sel[256], count = 0, next = 0;
	pid_t seltid[256];
	pid_t *tids;
	int max = t->o.max_per_tick, reported = 0;

	*stopped = 0;
	if (max > 256)
		max = 256;
	if (!t->attached || t->detaching || t->execed)
		return -ESRCH;
	/* The thread list may grow (clones seen while collecting) and move:
	 * walk a copy of the tids, finding each thread again per batch. */
	if (!(tids = malloc((t->n ? t->n : 1) * sizeof(*tids))))
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++)
		if (!(t->th[i].flags & TH_GONE))
			tids[count++] = t->th[i].tid;
	while (next < count && !t->execed) {
		int nsel = 0;

		for (; next < count && nsel < max; next++) {
			struct thread *th = pt__find_thread(t, tids[next]);
			uint64_t run;

			if (!th)
				continue;
			if (th->flags & TH_INTERRUPTING) {
				report_bare(t, th, cb, arg);
				reported++;
				continue;
			}
			/* Group-stopped, or blocked since its last snapshot: its
			 * last stack, without a stop. */
			if (th->flags & TH_GROUPSTOP) {
				report_cached(t, th, 'T', -1, cb, arg);
				reported++;
				continue;
			}
			if (pt__read_run_ns(th, &run, NULL, NULL))
				continue;
			if (snap_still_valid(th, run)) {
				report_cached(t, th, th->state, th->snap_syscall, cb, arg);
				t->st.snapshot_reused++;
				reported++;
				continue;
			}
			if (pt__read_state(t, th))
				continue;
			th->snap_run_ns = run;
			th->snap_ok = 0;   /* until the stop comes and is captured */
			th->cpu_ns = 0;
			seltid[nsel] = th->tid;
			sel[nsel++] = (size_t)(th - t->th);
		}
		if (nsel) {
			struct pt_tick_cbs cbs = { .sample = cb, .arg = arg };
			int n = stop_selected(t, sel, nsel, wait_ns, 1, &cbs);

			*stopped += nsel;
			reported += n;
			/* The ones not captured (late, or a capture that failed). */
			for (int i = 0; i < nsel; i++) {
				struct thread *th = pt__find_thread(t, seltid[i]);

				if (th && !th->snap_ok) {
					report_bare(t, th, cb, arg);
					reported++;
				}
			}
		}
		pt__compact(t);
	}
	free(tids);
	return reported;
}

/* A thread selected running may not have been on a core: runnable, it waits
 * for one, and it stops only when it gets one, where the scheduler
 * preempted it. Preempted by a scheduler tick or a wake-up, that is a
 * random place in its code, a fair sample. But the kernel also ends a slice
 * (or a CPU-quota period) when a system call updates the thread's runtime
 * (reading its CPU clock, waking another thread), and the thread then waits
 * at that call's exit: threads that share their cores stop there far more
 * often than they run there. busy -K sharing its core with another busy
 * process: 43 % of its samples in read_cpu_clock (clock_gettime of its own
 * CPU clock), for 0.1 % of its CPU, now 1-2 % (test_cpu's
 * threads_sharing_a_core_...); pyhot the same in time.thread_time (49 %,
 * now 2-3 %). Such a stop is resumed without a sample and its thread stays
 * due, its CPU kept for its next sample: like Go's SIGPROF, a sample lands
 * where the thread was executing.
 *   Which stops: in a system call (orig_rax >= 0: a stop from user code has
 * -1) that was not cut short by the stop (a thread that blocked after its
 * look and was woken by the interrupt: rax -EINTR or -ERESTART*), after a
 * wait for a core. schedstat's run_delay grows when a thread gets a core,
 * by the wait that ends then; a thread on a core when interrupted stops at
 * once, without one. Read while the thread is still stopped (resumed, it
 * could wait again, and its CPU is chosen anew). Not if the tick itself
 * preempted it, on the sampler's own core (the thread stopped there) and no
 * earlier than the sampler woke (less PREEMPTED_SLACK_NS, its switch in:
 * 8 us median, 38 us at most measured): then the place is the tick's random
 * choice. Compute threads sharing cores (preempted in their code) cost no
 * more than before: 8 busy threads on 2 cores at 1 kHz slowed 4.5 % before,
 * 4.6 % after (make bench, side by side); dropping every stop that came
 * after a wait took them from 4.9 % to 9.9 %. At most
 * PREEMPTED_MAX in a row are dropped (the next is kept, its place biased),
 * so a thread seldom on a core is still sampled. Returns 1 if this stop is
 * dropped. */
#define PREEMPTED_MAX 16
#define PREEMPTED_SLACK_NS 50000ull

static int last_cpu(const struct pt_tracee *t, const struct thread *th)
{
	struct pt_stat st;

	return pt__read_stat(t, th, &st) ? -1 : st.processor;
}

/* 1 if regs are those of a thread stopped at the exit of a system call
 * that completed (not one our stop interrupted). */
static int completed_syscall(const struct user_regs_struct *regs)
{
	int64_t ret = (int64_t)regs->rax;

	return (int64_t)regs->orig_rax >= 0 && ret != -EINTR && (ret < -516 || ret > -512);
}

int pt__preempted_at_tick(struct pt_tracee *t, struct thread *th, uint64_t stop_ns,
			  const struct user_regs_struct *regs)
{
	uint64_t run, wait, since = stop_ns > th->tick_ns ? stop_ns - th->tick_ns : 0;

	if (!completed_syscall(regs) || th->preempted_in_a_row >= PREEMPTED_MAX ||
	    pt__read_run_ns(th, &run, &wait, NULL) || wait <= th->tick_wait_ns ||
	    (wait - th->tick_wait_ns <= since + PREEMPTED_SLACK_NS && th->tick_cpu >= 0 &&
	     last_cpu(t, th) == th->tick_cpu)) {
		th->preempted_in_a_row = 0;
		return 0;
	}
	th->preempted_in_a_row++;
	th->acc_ns += th->cpu_ns;
	th->credit_ns += th->credit_paid;   /* at most a period over look's cap */
	th->cpu_ns = th->credit_paid = 0;
	t->st.preempted_stops++;
	return 1;
}
