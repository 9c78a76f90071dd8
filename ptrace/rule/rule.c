/* The sampling rule's CPU tick: which threads a tick stops, weighted by
 * how much CPU each used, and which of those stops to keep; and the rule's
 * life. The stops themselves (interrupt, capture, resume, unwind) are the
 * mechanism's (ptrace/mechanism/tracee.h), asked for with pt_stop_collect and
 * reported back through the ops below. Sampler thread only. */

#include "ptrace/rule/rule.h"

#include <errno.h>
#include <stdint.h>
#include <sys/user.h>

#include "base/mem.h"
#include "ptrace/mechanism/batch.h"
#include "ptrace/rule/cpudraw.h"
#include "ptrace/rule/perftick.h"
#include "ptrace/proc/proc.h"
#include "ptrace/core/internal.h"
#include "ptrace/rule/rulestate.h"
#include "ptrace/rule/perfborn.h"
#include "ptrace/rule/snapcache.h"
#include "ptrace/rule/states.h"
#include "ptrace/mechanism/stop.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/mechanism/tracee.h"

static void drop_thread(void *arg, struct pt_thread *th)
{
	(void)arg;
	pt__snapcache_drop(th);
	pt__perf_drop(th);
	pt__perfborn_drop(th);
	pt__draw_drop(th);
}

int pt_rule_new(struct pt_rule **out, struct pt_tracee *t)
{
	/* A thread's birth: its perf event opens in its birth stop
	 * (perf_event backend), its first draw is armed once it runs (ptrace) */
	struct pt_thread_ops ops = { .size = sizeof(struct pt_rule_thread), .drop = drop_thread,
				     .early = pt__perf_early, .born = pt__perf_born,
				     .started = pt__draw_born, .own_signal = pt__draw_own_signal };
	struct pt_rule *r;
	int err;

	*out = NULL;
	if (!(r = base_calloc(1, sizeof(*r))))
		return -ENOMEM;
	r->t = t;
	r->io = (struct pt__rule_io){ .collect = pt_stop_collect, .cpu_ns = pt_tracee_cpu_ns };
	ops.arg = r;
	if ((err = pt_threads_set_ops(t, &ops))) {
		base_free(r);
		return err;
	}
	*out = r;
	return 0;
}

void pt_rule_free(struct pt_rule *r)
{
	base_free(r->pf_w);
	base_free(r);
}

void pt_rule_stats(const struct pt_rule *r, struct pt_rule_stats *out)
{
	*out = r->st;
	out->perf_open_err = -r->pf_err;
}

uint64_t pt_rule_pending_ns(struct pt_rule *r, pt_rule_pending_fn fn, void *arg)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < pt_threads_count(r->t); i++) {
		struct pt_thread *th = pt_threads_at(r->t, i);
		struct pt_rule_thread *rt;
		uint64_t run, ns;

		if (th->flags & PT_TH_GONE)
			continue;
		if (r->backend == PT_BACKEND_PERF) {
			ns = pt__perf_pending(r, th);
		} else if (pt__drawn(th)) {
			ns = pt__rt(th)->cpu_ns;   /* a draw not reported yet */
		} else {
			if (pt_thread_read_sched(th, &run, NULL, NULL))
				continue;
			rt = pt__rt(th);
			ns = rt->acc_ns + rt->cpu_ns +
			     (run > rt->last_run_ns ? run - rt->last_run_ns : 0);
		}
		if (fn && ns)
			fn(arg, th->tid, ns);
		sum += ns;
	}
	return sum;
}

/* Looks at one thread for a tick: adds the CPU it used since its last look
 * to *moved and to its weight and credit. Returns 1 if it is due and running
 * (selected), with its weight in cpu_ns. A thread being interrupted is only
 * accounted. */
static int look(struct pt_rule *r, struct pt_thread *th, uint64_t cpu_period_ns, uint64_t now,
		uint64_t *moved, int sampling)
{
	struct pt_rule_thread *rt = pt__rt(th);
	uint64_t run, slices = 0, need = cpu_period_ns;

	if (th->flags & (PT_TH_GONE | PT_TH_GROUPSTOP) ||
	    pt_thread_read_sched(th, &run, &rt->wait_ns, &slices) || run <= rt->last_run_ns)
		return 0;
	rt->moved_at = now;
	*moved += run - rt->last_run_ns;
	if (rt->credit_ns == PT_NEW_CREDIT)
		rt->credit_ns = need = 0;
	rt->acc_ns += run - rt->last_run_ns;
	rt->credit_ns += run - rt->last_run_ns;
	rt->last_run_ns = run;
	if (pt__drawn(th)) {
		/* Drawn (cpudraw.c): its CPU is its draws', its pending
		 * weight (cpu_ns) a draw's not reported yet. */
		rt->acc_ns = rt->credit_ns = 0;
		return 0;
	}
	if (!sampling) {
		/* A tick for thread states only: CPU used now is nobody's sample,
		 * nor what an earlier stop left unreported (one in flight
		 * reports its own). */
		rt->acc_ns = rt->credit_ns = 0;
		if (!(th->flags & PT_TH_INTERRUPTING))
			rt->cpu_ns = 0;
		return 0;
	}
	/* Resumed with a signal and not on a core since (events.c): the
	 * kernel sets up its handler's frame as it next runs, so our stop
	 * would come at the handler's first instruction, once per signal,
	 * whatever the thread runs. It is sampled once it has run; its CPU
	 * waits in its credit. */
	if (pt_thread_signal_pending(th, slices))
		return 0;
	if (th->flags & PT_TH_INTERRUPTING || rt->credit_ns < need || !pt_thread_running(th))
		return 0;
	/* schedstat moves only at scheduler ticks and switches (every 4 ms at
	 * HZ=250) for a thread that keeps its core, so credit comes in lumps:
	 * keep up to four periods of it, no more (a thread found running after
	 * a long wait is not sampled at every tick after). */
	rt->credit_paid = rt->credit_ns < cpu_period_ns ? rt->credit_ns : cpu_period_ns;
	rt->credit_ns -= rt->credit_paid;
	rt->tick_wait_ns = rt->wait_ns;
	if (rt->credit_ns > 4 * cpu_period_ns)
		rt->credit_ns = 4 * cpu_period_ns;
	/* Added to what an earlier selection's stop left: a capture that
	 * failed, a batch dropped at an exec or a late stop with no slot gives
	 * no sample and says nothing (1 s of 8 lost in a 2 Hz profile of four
	 * busy threads on two cores, before). */
	rt->cpu_ns += rt->acc_ns;
	rt->acc_ns = 0;
	rt->sel_tick = r->cbs.tick;
	return 1;
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
 * could wait again, and its CPU is chosen anew). This holds when the tick
 * itself preempted it, too: on a kernel that lets the running thread keep
 * its core for a while after a wake-up (EEVDF, Linux 6.6 and later), the
 * sampler's wake-up on the thread's own core takes it at its next update of
 * its runtime, its system call again, not at a random place. An exception
 * for such stops (the thread last ran on the sampler's core, its wait began
 * as the sampler woke) let 11.6 % of busy -K's profile into read_cpu_clock
 * on a machine whose cores other processes took. Compute threads sharing
 * cores (preempted in their code) lose nothing: their stops come in user
 * code. At most PREEMPTED_MAX in a row are dropped, so a thread seldom on a
 * core is still sampled: the next is kept, its place biased, and it carries
 * only the period its selection paid for; the CPU of the stops dropped
 * before it waits for a fair sample (or the window's end, under "[CPU since
 * the thread's last sample]"). */
#define PREEMPTED_MAX 16

/* 1 if regs are those of a thread stopped at the exit of a system call
 * that completed (not one our stop interrupted). */
static int completed_syscall(const struct user_regs_struct *regs)
{
	int64_t ret = (int64_t)regs->rax;

	return (int64_t)regs->orig_rax >= 0 && ret != -EINTR && (ret < -516 || ret > -512);
}

/* A tick's stop resumed without a sample: the thread stays due, its CPU
 * kept for its next sample (the credit at most a period over look's cap). */
static void give_back(struct pt_rule_thread *rt)
{
	rt->acc_ns += rt->cpu_ns;
	rt->credit_ns += rt->credit_paid;
	rt->cpu_ns = rt->credit_paid = 0;
}

/* 1 if regs are those of a new thread that has not run yet: at the return
 * of clone or clone3 on the child's side (0), its first instruction. A
 * thread born while traced is let go from its first stop at once, and a
 * tick that finds it runnable before it got a core would stop it there, as
 * often as threads are born, however little they run there. */
static int unborn(const struct user_regs_struct *regs)
{
	return pt__batch_in_clone(regs) && regs->rax == 0;
}

/* The size of the kernel's struct ucontext on x86-64 (uapi
 * asm-generic/ucontext.h: flags, link, stack_t, sigcontext, a 64-bit
 * sigset): 8 + 8 + 24 + 256 + 8. */
#define KERNEL_UCONTEXT_SIZE 304

/* 1 if regs are those of a signal handler's first instruction, which the
 * thread has not run yet. The kernel builds a handler's frame as the thread
 * returns to user mode with the signal (struct rt_sigframe: the restorer's
 * address, the ucontext, the siginfo) and enters the handler with rsp at
 * the frame, rdx = &uc = rsp + 8, rsi = &info right after it, rdi the
 * signal and rax 0 (x64_setup_rt_frame). A thread resumed with a signal
 * and interrupted before it ran an instruction of the handler stops there:
 * preempted on its way out of the signal's stop, or reached after our
 * interrupt, which some machines take tens of microseconds to deliver to a
 * running thread (a VM's vCPU: 50-120 us measured, in which a Go thread's
 * SIGPROF came first). Its place is the signal's doing, not where it runs:
 * 0.4-11 % of the samples of a Go program profiling itself at 400 Hz lay
 * there (test_go's go_stacks_match_gos_own_profile). */
static int handler_entry(const struct user_regs_struct *regs)
{
	return regs->rdx == regs->rsp + 8 && regs->rsi == regs->rdx + KERNEL_UCONTEXT_SIZE &&
	       regs->rdi >= 1 && regs->rdi <= 64 && regs->rax == 0;
}

/* 1 if th waited for a core between its tick and this stop (see
 * PREEMPTED_MAX). */
static int waited_for_a_core(struct pt_thread *th, const struct pt_rule_thread *rt)
{
	uint64_t run, wait;

	return !pt_thread_read_sched(th, &run, &wait, NULL) && wait > rt->tick_wait_ns;
}

/* Whether th's kernel time pays for a sample at a system call's exit: 1 if
 * the CPU its samples at such exits carried, this one's included, stays
 * within the kernel-mode CPU it used since its first tick stop (within
 * half a sample: the kernel counts it in clock ticks).
 *   A running thread answers our interrupt when it next leaves the kernel:
 * at once where the interrupt reaches its core promptly, else at whatever
 * takes it into the kernel first. On a VM the interrupt took 50-120 us to
 * stop a thread spinning on another vCPU (a tracer polling for it), and a
 * thread making a system call in that time stopped at that call's exit:
 * busy -K, reading its CPU clock every 0.5 ms (0.1 % of its CPU), had 7 %
 * of its samples there without ever waiting for a core, 17.5 % on CI's
 * machine. Where the call was already running when interrupted, the stop
 * is fair, in proportion to the call's time; where the thread reached it
 * later, it is not. Which one this is cannot be told (a running thread's
 * /proc/<tid>/syscall says "running"), but the total can be bounded: the
 * samples at system call exits carry no more CPU than the thread spent in
 * the kernel, as the scheduler's ticks found it (a local timer, prompt on
 * any machine). A thread that lives in its system calls keeps them all; a
 * compute thread's few calls take what their time is worth. Unreadable:
 * kept, as before. */
static int kernel_time_pays(struct pt_thread *th, struct pt_rule_thread *rt)
{
	uint64_t kernel;

	if (pt_thread_read_kernel_ns(th, &kernel))
		return 1;
	if (!rt->sys_seen) {
		rt->sys_seen = 1;
		rt->sys_base_ns = kernel;
	}
	return 2 * (kernel - rt->sys_base_ns) >= 2 * rt->sys_claimed_ns + rt->cpu_ns;
}

/* A tick's stop at a biased place (*count): dropped, th staying due, at
 * most PREEMPTED_MAX times in a row; then kept, carrying no more than the
 * period its selection paid for, the rest left for the next sample. */
static int biased_stop(struct pt_rule_thread *rt, uint64_t *count)
{
	if (rt->preempted_in_a_row >= PREEMPTED_MAX) {
		rt->preempted_in_a_row = 0;
		if (rt->credit_paid && rt->cpu_ns > rt->credit_paid) {
			rt->acc_ns += rt->cpu_ns - rt->credit_paid;
			rt->cpu_ns = rt->credit_paid;
		}
		return 1;
	}
	rt->preempted_in_a_row++;
	give_back(rt);
	(*count)++;
	return 0;
}

/* The mechanism's question for a tick's stop (struct pt_stop_ops keep):
 * 1 to take the sample, 0 to drop the stop (th stays due). */
static int keep_stop(void *arg, struct pt_thread *th, const struct user_regs_struct *regs)
{
	struct pt_rule *r = arg;
	struct pt_rule_thread *rt = pt__rt(th);
	int sys = completed_syscall(regs), keep = 1;

	if (unborn(regs)) {
		give_back(rt);
		r->st.unborn_stops++;
		return 0;
	}
	if (!rt->sys_seen && !pt_thread_read_kernel_ns(th, &rt->sys_base_ns))
		rt->sys_seen = 1;   /* its kernel time from its first stop on */
	if (handler_entry(regs))
		keep = biased_stop(rt, &r->st.handler_stops);
	else if (sys && waited_for_a_core(th, rt))
		keep = biased_stop(rt, &r->st.preempted_stops);
	else if (sys && !kernel_time_pays(th, rt))
		keep = biased_stop(rt, &r->st.unpaid_stops);
	else
		rt->preempted_in_a_row = 0;
	if (keep && sys)
		rt->sys_claimed_ns += rt->cpu_ns;
	return keep;
}

/* A tick's capture, weighed by the CPU its thread used since its last
 * sample, to the tick's sessions: that CPU is carried, pending no more. */
static void tick_sample(void *arg, struct pt_thread *th, struct pt_sample *smp)
{
	struct pt_rule *r = arg;
	struct pt_rule_thread *rt = pt__rt(th);

	smp->cpu_ns = rt->cpu_ns;
	smp->tick = rt->sel_tick;
	rt->cpu_ns = 0;
	if (r->out)
		r->out(r->out_arg, smp);
}

static void tick_timing(void *arg, uint64_t pause_ns, uint64_t unwind_ns)
{
	struct pt_rule *r = arg;

	if (r->cbs.timing)
		r->cbs.timing(r->cbs.arg, pause_ns, unwind_ns);
}

/* Every thread is looked at this often at least, and a thread whose CPU
 * moved within QUIET_NS at every tick (see pt_rule_tick). */
#define FULL_LOOK_NS 100000000ull
#define QUIET_NS 20000000ull

/* Selects the due threads that run now (at most max) into sel. */
static int select_due(struct pt_rule *r, uint64_t cpu_period_ns, uint64_t now, int sampling,
		      struct pt_thread **sel, int max)
{
	size_t n = pt_threads_count(r->t);
	uint64_t moved = 0, pcpu = 0;
	int full = !r->pcpu_last || now - r->full_at >= FULL_LOOK_NS, nsel = 0;
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
	 * the same (what a thread used is never lost, only counted later).
	 * Pass 1 runs only if pass 0 left room: with more running threads
	 * than `max` it never does, and a thread once quiet (kept off its
	 * core for QUIET_NS by a loaded machine) was never read again, never
	 * sampled however long it ran after (one of four busy threads at
	 * --max-stopped 1: no sample in 3 s). So the rotation's first thread
	 * is read in pass 0, quiet or not: every thread is read at least every
	 * n ticks, and a running one gets its turn. */
	size_t first = n ? r->rr++ % n : 0;

	for (int pass = 0; pass < 2 && nsel < max; pass++) {
		int partial = 0;

		if (pass == 1) {
			pcpu = r->io.cpu_ns(r->t);
			partial = !full && pcpu && r->pcpu_last;
			if (full)
				r->full_at = now;
		}
		for (size_t k = 0; k < n && nsel < max; k++) {
			struct pt_thread *th = pt_threads_at(r->t, (first + k) % n);

			int quiet = pt__rt(th)->moved_at + QUIET_NS <= now;

			if (partial && pcpu - r->pcpu_last <= moved)
				break;   /* the threads that ran are all found */
			/* The rotation's first is read in pass 0 whatever it is. */
			if (k == 0 ? pass == 1 : quiet != pass)
				continue;
			if (look(r, th, cpu_period_ns, now, &moved, sampling))
				sel[nsel++] = th;
		}
	}
	/* A pass cut short by `max` left CPU unaccounted: the next tick reads all. */
	r->pcpu_last = nsel < max ? pcpu : 0;
	return nsel;
}

int pt_rule_tick(struct pt_rule *r, uint64_t cpu_period_ns, const struct pt_tick_cbs *cbs)
{
	static const struct pt_stop_ops tick_ops = { .keep = keep_stop, .sample = tick_sample,
						     .timing = tick_timing };
	struct pt_thread *sel[256];
	struct pt_stop_ops ops = tick_ops;
	int nsel, ncap, max = pt_tracee_opts(r->t)->max_per_tick;
	uint64_t now = pt__now_ns();

	if (max > 256)
		max = 256;
	if (!pt_tracee_attached(r->t) || pt_tracee_detaching(r->t) || pt_tracee_exec_pending(r->t))
		return 0;
	/* Late captures first: each sample says its own tick's sessions. */
	pt_stop_report_late(r->t);
	r->cbs = *cbs;
	if (cbs->sample) {
		r->out = cbs->sample;
		r->out_arg = cbs->arg;
	}
	if (r->backend == PT_BACKEND_PERF) {
		/* The kernel sampled: nothing to stop. The threads are still
		 * looked at for a state report (its CPU clocks). */
		ncap = pt__perf_tick(r, cpu_period_ns, cbs);
		if (cbs->state)
			(void)select_due(r, cpu_period_ns, now, 0, sel, max);
	} else {
		if (cbs->sample)
			pt__draw_tick(r, cpu_period_ns);
		nsel = select_due(r, cpu_period_ns, now, cbs->sample != NULL, sel, max);
		ops.arg = r;
		ncap = r->io.collect(r->t, sel, nsel, 0, 0, &ops);
	}
	if (cbs->state)
		pt__states_report(r, now, cbs->state, cbs->timing, cbs->arg);
	pt_threads_compact(r->t);
	return ncap;
}
