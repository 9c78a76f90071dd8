/* The stop cycle: the threads a caller chose are interrupted together,
 * each captured as it stops and resumed at once (its pause: interrupt to
 * resume), the stops that come after a tick captured when they come; then
 * the batch is unwound and reported (batch.c), unless an exec came in
 * between. Sampler thread only. */
#include "ptrace/mechanism/stop.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/mem.h"
#include "ptrace/mechanism/batch.h"
#include "ptrace/mechanism/capture.h"
#include "ptrace/mechanism/events.h"
#include "ptrace/mechanism/execfp.h"
#include "ptrace/proc/proc.h"
#include "ptrace/core/internal.h"
#include "ptrace/runtimes/runtimes.h"
#include "ptrace/mechanism/mechanism.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/space/space.h"
#include "ptrace/space/unwinder.h"

void pt__stop_drain_wake(int fd)
{
	struct signalfd_siginfo si[16];

	while (read(fd, si, sizeof(si)) > 0) {
	}
}

void pt__stop_wait_wake(int fd, uint64_t timeout_ns)
{
	struct pollfd p = { fd, POLLIN, 0 };
	struct timespec ts = { (time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u) };

	if (fd < 0) {
		nanosleep(&(struct timespec){ 0, 200000 }, NULL);
		return;
	}
	if (ppoll(&p, 1, &ts, NULL) > 0)
		pt__stop_drain_wake(fd);
}

uint64_t pt__stop_own_wait_ns(struct pt_tracer *tr)
{
	char buf[128];
	uint64_t run, wait;

	if (pt__thread_pread_own(&tr->self_sched_fd, "/proc/thread-self/schedstat", buf, sizeof(buf)) <= 0)
		return 0;
	return pt_proc_parse_schedstat(buf, &run, &wait, NULL) ? 0 : wait;
}

/* 1 if polling for stops costs the target nothing: no more threads of the
 * whole system are runnable (this one included) than there are cores, so
 * the core we poll on has nobody else to run. Else polling takes that core
 * from a thread that wants it, and the selected threads are mostly waiting
 * for a core: they stop only once they get one, after the polling gave up.
 * With 8 busy threads on 2 cores at 1000 Hz polling cost 65 us of our CPU
 * per sample against 41 us without, for no shorter pauses. Unknown (no
 * /proc/loadavg): as configured. */
static int spare_core(const struct pt_tracee *t)
{
	char buf[128];
	uint64_t running;

	if (pt__thread_pread_own(&t->tr->loadavg_fd, "/proc/loadavg", buf, sizeof(buf)) <= 0)
		return 1;
	return pt_proc_parse_loadavg(buf, &running) || running <= (uint64_t)t->ncpu;
}

/* Reads a word at each selected thread's stack pointer of its last stop, all
 * in one system call, before they are interrupted. The stack copy during the
 * stop then finds the page tables and pages warm: with ticks 10 ms apart it
 * took 7-8 us of the pause instead of 2.5 (a stop cycle measured alone). A
 * thread that moved its stack costs nothing more than a short read. */
static void warm_stacks(struct pt_tracee *t, struct pt_thread *const *sel, int nsel)
{
	struct iovec rem[64], loc;
	uint64_t words[64];
	int n = 0;

	for (int i = 0; i < nsel && n < 64; i++)
		if (sel[i]->last_sp)
			rem[n++] = (struct iovec){ (void *)(uintptr_t)(sel[i]->last_sp & ~7ull), 8 };
	if (!n)
		return;
	loc = (struct iovec){ words, (size_t)n * 8 };
	(void)!process_vm_readv(t->pid, &loc, 1, rem, (unsigned long)n, 0);
}

/* Resumes th from a stop of ours: our interrupt's, or a signal-delivery
 * stop taken for it, whose signal goes with it (see events.c). */
static void cont(struct pt_thread *th)
{
	ptrace(PTRACE_CONT, th->tid, 0, (void *)(long)th->resume_sig);
	th->resume_sig = 0;
}

/* Captures th, stopped by us, into slot and resumes it. Returns 1 if the
 * slot holds a sample: not for a tick's thread whose stop ops->keep
 * refused, judged while it is still stopped (its run delay and CPU as of
 * the stop). */
static int take(struct pt_tracee *t, struct pt_thread *th, int slot, const struct pt_stop_ops *ops)
{
	struct pt_tracer *tr = t->tr;
	int ok = pt__capture(t, th, &t->caps[slot], slot) == 0;
	int late = th->t_interrupt <= tr->poll_ns, drop;
	uint64_t from = late ? tr->late_from : th->t_interrupt;

	/* Its pause counts from the interrupt, or for a late stop from
	 * when it woke us (see poll_ns). */
	drop = ok && (th->flags & PT_TH_TICK) && ops->keep &&
	       !ops->keep(ops->arg, th, &t->caps[slot].regs);
	cont(th);
	th->flags &= ~PT_TH_TICK;
	t->slot_pause[slot] = pt__now_ns() - from;
	t->slot_th[slot] = th;
	t->st.stops++;
	if (drop)
		t->st.pause_ns_total += t->slot_pause[slot];   /* a pause all the same */
	return ok && !drop;
}

/* A stop of a tick's thread that came after its tick: captured now (it was
 * not on a core meanwhile, so its registers are those it had when the
 * tick came), reported by the next tick (pt_stop_report_late). */
static void take_late(struct pt_tracee *t, struct pt_thread *th)
{
	struct pt_tracer *tr = t->tr;
	int late = (th->flags & PT_TH_LATE) && !t->busy && !t->detaching && !t->execed &&
		   t->nlate < t->o.max_per_tick;
	uint64_t t0 = pt__now_ns();

	th->flags &= ~(PT_TH_WANTED | PT_TH_LATE);
	if (!late) {
		cont(th);
		return;
	}
	if (!tr->late_from) {
		uint64_t waited = pt__stop_own_wait_ns(tr) - tr->rq_base;

		tr->late_from = tr->poll_ns - (waited < tr->poll_ns ? waited : 0);
	}
	/* (a thread the tick did not select, stopped by its owner's own
	 * signal: its Python thread state looked up now, once) */
	pt__capture_prepare(t, &th, 1);
	if (take(t, th, t->nlate, &t->late))
		t->nlate++;
	tr->late_ns += pt__now_ns() - t0;
}

void pt__stop_on_status(struct pt_tracee *t, struct pt_thread *th, int status, int held)
{
	if (pt__events_on_status(t, th, status, held) == PT__EV_OURS)
		take_late(t, th);
}

/* 1 if the captures may be unwound against the address space we know: no
 * exec came before or during them. */
static int same_program(struct pt_tracee *t, int ncap)
{
	struct pt_thread *leader;
	uint64_t mm_now;
	int status, held, same;

	/* An exec replaces the address space the captures point into, and it
	 * may have completed while we unwound: the leader's exec event tells.
	 * If it came, the stacks may be half old, half new: drop them. If it
	 * completes after this check, the unwind read only old memory.
	 *   A stop of ours on its way to the leader (a tick's, late) is left
	 * where it is, looked at and not reaped: taken here, with the slots
	 * this batch holds, it could only be let go without its sample, and
	 * its CPU would pile onto the next one (CPython at 1 kHz under ASan:
	 * 1 stop in 10 lost so, 30-40 samples of a 10 s profile weighing
	 * 8-40 ms, its alpha/beta split off by more than 2 points in 4 runs
	 * of 80; after, 1 such sample). The poll after the batch takes it late,
	 * as any. An exec's event, the one status wait reaps (events.c), is
	 * acted on all the same: the fingerprint below reads auxv through a
	 * file opened before the exec, which goes on showing the old program
	 * until the event is handled. */
	if (!t->execed && (leader = pt_threads_find(t, t->pid)) &&
	    pt__events_wait(t->pid, &status, 0, &held) > 0 && !(held && (leader->flags & PT_TH_WANTED)))
		pt__stop_on_status(t, leader, status, held);
	/* One read per batch: any change since the last check (an exec before
	 * or during these captures) drops them. */
	mm_now = pt__execfp_read(t, ncap ? t->slot_th[0]->tid : 0);
	same = !t->execed && mm_now && mm_now == t->mm_fp;
	t->mm_fp = mm_now;
	return same;
}

/* Unwinds and reports captures 0..ncap, after every thread runs again.
 * Returns the number reported. */
static int finish(struct pt_tracee *t, int ncap, const struct pt_stop_ops *ops)
{
	t->busy = 1;
	pt__batch_unwind(t, ncap);
	if (!same_program(t, ncap))
		ncap = 0;
	pt__batch_report(t, ncap, ops);
	t->busy = 0;
	return ncap;
}

/* Late captures wait in their slots for the next tick (or a snapshot, or
 * pt_stop_report_late): unwound and checked against an exec as one batch
 * rather than one at a time, as they come. A thread has at most one capture
 * pending and a tick selects at most max_per_tick threads, so they fit. */
void pt_stop_report_late(struct pt_tracee *t)
{
	int n = t->nlate;

	if (!n || t->busy)
		return;
	t->nlate = 0;
	finish(t, n, &t->late);
}

int pt_stop_put_copy(struct pt_tracee *t, int slot, struct pt_thread *th,
		     const struct user_regs_struct *regs, const uint8_t *stack, size_t len, int whole)
{
	struct pt_capture *cap = &t->caps[slot];
	const struct pt_map *m;

	if (t->busy || t->nlate)
		return -EBUSY;   /* a batch of stops holds the slots (a thread dump's) */
	if (len > t->o.stack_bytes)
		len = t->o.stack_bytes;
	if (pt__slot_ready(t, slot, len))
		return -ENOMEM;
	cap->regs = *regs;
	memcpy(cap->stack, stack, len);
	cap->stack_len = len;
	/* A copy that stopped short of its size reached the stack's top: a
	 * read past it finds nothing mapped. Else the stack goes on to the end
	 * of its mapping (a read further is not of the stack: libunwind's
	 * of an unwind table, Go's of its g), or, its mapping not yet known
	 * (a new thread's), as far as it may. */
	if (whole)
		cap->stack_limit = len;
	else if (pt_space_maps(t->as) && (m = pt_maps_find(pt_space_maps(t->as), regs->rsp)) && !(m->flags & PT_MAP_X))
		cap->stack_limit = (size_t)(m->end - regs->rsp);
	else
		cap->stack_limit = (size_t)1 << 30;
	cap->read_beyond = 1;
	cap->sig_len = 0;
	pt_runtimes_clear(t->rts, slot);
	th->last_sp = regs->rsp;
	t->slot_th[slot] = th;
	t->slot_pause[slot] = 0;
	return 0;
}

int pt_stop_report_copies(struct pt_tracee *t, int n, const struct pt_stop_ops *ops)
{
	if (t->busy || t->nlate)
		return 0;   /* not while a batch of stops holds the slots */
	return finish(t, n, ops);
}

/* Interrupts them all first: a stop is only delivered when the thread runs,
 * so waiting for each in turn would serialise their delays. Returns how many
 * stops are pending. */
static int interrupt_all(struct pt_thread **sel, int nsel, int snap)
{
	int pending = 0;

	for (int i = 0; i < nsel; i++) {
		struct pt_thread *th = sel[i];

		th->t_interrupt = pt__now_ns();
		if (ptrace(PTRACE_INTERRUPT, th->tid, 0, 0) < 0) {
			sel[i] = NULL;
			continue;
		}
		th->flags &= ~PT_TH_TICK;
		th->flags |= PT_TH_INTERRUPTING | PT_TH_WANTED | (snap ? 0 : PT_TH_LATE | PT_TH_TICK);
		pending++;
	}
	return pending;
}

/* Takes the stops that came among the selected threads: each is captured
 * into the next slot (*ncap) and resumed at once. Returns how many of the
 * pending stops it settled; *taken counts the captures among them. */
static int take_stops(struct pt_tracee *t, struct pt_thread *const *sel, int nsel,
		      const struct pt_stop_ops *ops, int *ncap, int *taken)
{
	int settled = 0;

	for (int i = 0; i < nsel; i++) {
		struct pt_thread *th = sel[i];
		enum pt__ev e;

		if (!th || !(th->flags & PT_TH_WANTED))
			continue;
		e = pt__events_poll(t, th);
		if ((e == PT__EV_NONE || e == PT__EV_HANDLED) && (th->flags & PT_TH_INTERRUPTING))
			continue;
		/* Ours, gone, or group-stopped and otherwise consumed (no sample). */
		settled++;
		th->flags &= ~(PT_TH_WANTED | PT_TH_LATE);
		if (e != PT__EV_OURS)
			continue;
		if (take(t, th, *ncap, ops))
			(*ncap)++;
		(*taken)++;
	}
	return settled;
}

int pt_stop_collect(struct pt_tracee *t, struct pt_thread **sel, int nsel, uint64_t wait_ns,
		      int snap, const struct pt_stop_ops *ops)
{
	uint64_t now, deadline, spin_end, spin_ns;
	int ncap = 0, pending, taken = 0, spun = 0;

	pt_stop_report_late(t);
	if (!snap)
		t->late = *ops;
	spin_ns = t->o.spin_ns && spare_core(t) ? t->o.spin_ns : 0;
	warm_stacks(t, sel, nsel);
	pt__capture_prepare(t, sel, nsel);
	t->busy = 1;
	pending = interrupt_all(sel, nsel, snap);
	/* Collect each stop, capture, resume at once. A thread running on
	 * another core stops within microseconds; waiting for it in ppoll adds
	 * a wake-up of this thread to its pause, so poll for it instead,
	 * briefly, when that costs nobody a core (see spare_core). The other
	 * pending threads are off-core (preempted, maybe by us): they stop
	 * only when scheduled, so once as many stops came as there are other
	 * cores, a tick leaves them to pt_tracer_poll and a snapshot sleeps
	 * until they come. */
	now = pt__now_ns();
	deadline = now + wait_ns;
	spin_end = now + spin_ns;
	while (pending > 0) {
		pending -= take_stops(t, sel, nsel, ops, &ncap, &taken);
		if (pending <= 0)
			break;
		now = pt__now_ns();
		if (now >= deadline)
			break;
		if (taken < t->spin_slots && now < spin_end) {
			spun = 1;
			continue;
		}
		/* A tick does not sleep on the rest: they are captured as they
		 * come (pt_tracer_poll), and a tick's length is the sampler's
		 * work, which sets its rate (see ptrace/sampler/rate.c). */
		if (!snap)
			break;
		pt__stop_wait_wake(t->tr->wake_fd, deadline - now < 1000000 ? deadline - now : 1000000);
	}
	/* The stops we polled for each raised a SIGCHLD: take it now rather
	 * than wake the sampler loop for it (the loop polls after a tick
	 * anyway). */
	if (spun && t->tr->wake_fd >= 0)
		pt__stop_drain_wake(t->tr->wake_fd);
	for (int i = 0; i < nsel; i++)
		if (sel[i] && (sel[i]->flags & PT_TH_WANTED)) {
			if (snap)
				sel[i]->flags &= ~PT_TH_WANTED;
			t->st.late_stops++;
		}
	return finish(t, ncap, ops);
}
