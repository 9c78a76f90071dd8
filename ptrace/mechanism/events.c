/* Waiting for a traced thread (pt__events_wait), and acting on one status
 * of it: every stop is either
 * ours (a capture the caller asked for, returned as PT__EV_OURS) or the
 * target's, which is passed on exactly as the kernel meant it: a signal
 * re-injected once, a group-stop kept with PTRACE_LISTEN, a new thread
 * registered and let go, an exec or an exit noticed and reported up as an
 * event. Sampler thread only. */
#include "ptrace/mechanism/events.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>

#include "base/mem.h"
#include "ptrace/mechanism/batch.h"
#include "ptrace/mechanism/capture.h"
#include "ptrace/core/internal.h"
#include "ptrace/mechanism/execfp.h"
#include "ptrace/mechanism/follow.h"
#include "ptrace/space/space.h"
#include "ptrace/proc/proc.h"
#include "ptrace/mechanism/mechanism.h"
#include "ptrace/runtimes/runtimes.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/space/unwinder.h"

void pt__events_emit(struct pt_tracee *t, enum pt_event_kind kind, pid_t tid, pid_t child,
		     const uint64_t *stack, int n)
{
	struct pt_event ev = { .kind = kind, .pid = t->pid, .tid = tid, .child = child,
			       .stack = stack, .n = n };

	if (t->tr->event)
		t->tr->event(t->tr->event_arg, &ev);
}

void pt__events_emit_clone(struct pt_tracee *t, pid_t parent, pid_t child, const uint64_t *stack, int n,
			   uint64_t born_ns)
{
	struct pt_event ev = { .kind = PT_EV_CLONE, .pid = t->pid, .tid = parent, .child = child,
			       .stack = stack, .n = n, .born_ns = born_ns };
	struct pt_thread *th;

	if (!t->tr->event)
		return;
	/* its schedstat alone, not its other files (pt_thread_open_later) */
	if (!born_ns && (th = pt_threads_find(t, child)) &&
	    pt_thread_read_sched_end(th, &ev.run_ns, &ev.wait_ns))
		ev.run_ns = ev.wait_ns = 0;
	t->tr->event(t->tr->event_arg, &ev);
}

static int is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

void pt__events_detach_thread(struct pt_thread *th, int sig)
{
	ptrace(PTRACE_DETACH, th->tid, 0, (void *)(long)sig);
	th->flags |= PT_TH_GONE;
}

/* Resumes th after an event of its own, or lets it go if we are detaching
 * (with `sig`, the signal it stopped for, delivered then). */
static enum pt__ev resume(struct pt_tracee *t, struct pt_thread *th, int sig)
{
	if (t->detaching) {
		pt__events_detach_thread(th, sig);
		return PT__EV_GONE;
	}
	ptrace(PTRACE_CONT, th->tid, 0, (void *)(long)sig);
	return PT__EV_HANDLED;
}

/* A stop other than our interrupt's came to th: the interrupt we may have
 * sent it is spent. PTRACE_INTERRUPT promises one trap after it, of any
 * kind: every trap (a signal's stop, a clone or exec event) clears the
 * interrupt pending when it begins, so one sent before this stop began
 * brings no stop of its own. Kept waiting for it, th was never sampled
 * again: a thread of a Go program running its own profiler (a SIGPROF
 * every 2.5 ms) went unsampled for seconds, 20-35 % of the process's CPU
 * in no sample. One sent while th was in this stop does bring a stop when
 * it ends: that one is resumed as a late interrupt (on_event_stop). */
static void interrupt_spent(struct pt_thread *th)
{
	/* and no sample comes of it: the CPU it was to carry waits for the
	 * next (rule.c look) */
	th->flags &= ~(PT_TH_INTERRUPTING | PT_TH_WANTED | PT_TH_LATE | PT_TH_TICK);
}

/* PTRACE_EVENT_STOP: our interrupt, a new thread's first stop, or a
 * group-stop. */
static enum pt__ev on_event_stop(struct pt_tracee *t, struct pt_thread *th, int sig)
{
	if (is_stop_signal(sig)) {
		/* Group-stop (SIGSTOP from outside): the thread must stay
		 * stopped for job control. PTRACE_LISTEN keeps it stopped
		 * while letting us see the SIGCONT. An interrupt of ours
		 * brings no stop of its own now (this is its trap, or one
		 * more of the group-stop's): spent, not waited for. */
		interrupt_spent(th);
		if (t->detaching) {
			pt__events_detach_thread(th, 0);
			return PT__EV_GONE;
		}
		if (!(th->flags & PT_TH_GROUPSTOP))
			t->st.group_stops++;   /* (an interrupt while in it traps again) */
		th->flags |= PT_TH_GROUPSTOP;
		ptrace(PTRACE_LISTEN, th->tid, 0, 0);
		return PT__EV_HANDLED;
	}
	th->flags &= ~PT_TH_GROUPSTOP;
	if (!t->detaching && (th->flags & PT_TH_INTERRUPTING)) {
		th->flags &= ~PT_TH_INTERRUPTING;
		if (th->flags & PT_TH_WANTED)
			return PT__EV_OURS;
	}
	/* A new thread's first stop, a late interrupt, or the end of a
	 * group-stop seen through PTRACE_LISTEN. */
	return resume(t, th, 0);
}

/* The capture buffers of clone stacks, allocated at first use. */
static struct pt_capture *clone_capture(struct pt_tracee *t)
{
	if (!t->clone_cap && (t->clone_cap = base_calloc(1, sizeof(*t->clone_cap))) &&
	    (pt__capture_room(t->clone_cap, t->o.stack_bytes) ||
	     !(t->clone_frames = base_malloc((size_t)t->o.max_frames * sizeof(*t->clone_frames))))) {
		base_free(t->clone_cap->stack);
		base_free(t->clone_cap);
		t->clone_cap = NULL;
	}
	return t->clone_cap;
}

/* Unwinds the parent's capture at a clone into t->clone_frames (see
 * pt__batch_unwind_clone_leaf: at its clone event too, its unwind ends at
 * its first frame). Returns the number of frames. */
static int unwind_clone_parent(struct pt_tracee *t, struct pt_capture *cap)
{
	int complete, n = pt_unwind(pt_space_unwinder(t->as), cap, t->clone_frames, t->o.max_frames, &complete);

	return pt__batch_unwind_clone_leaf(t, cap, t->clone_frames, t->o.max_frames, n);
}

/* 1 if status is a new thread's first stop: its birth trap. A thread born
 * while its process was stopping for a signal stops first in that
 * group-stop instead (it joins it), which must be kept (on_event_stop). */
static int is_birth_stop(int status)
{
	return WIFSTOPPED(status) && (status >> 16) == PTRACE_EVENT_STOP && WSTOPSIG(status) == SIGTRAP;
}

/* Lets a new thread go from its first stop if it has reached it; 1 if it
 * runs now. Its stop is either reaped already, by the poll under way (the
 * newest tracee is waited for first), and taken from there, or looked at
 * now and ended by our PTRACE_CONT (a stop resumed before it is reaped is
 * never reported). Anything but a birth stop is left to the poll, once the
 * thread is known. Over the cap it is let go untraced at its stop
 * (on_clone), never run traced and unknown: an unknown thread's stop is
 * reaped (tracer.c), and a signal's stop reaped loses its signal if
 * podprof dies before resuming it (letting births go as the poll saw
 * them, before their parent's event, did that: a SIGUSR1 lost in
 * it/sigkill_at_random_moments_never_harms_the_target). -1 if the thread
 * has ended and is gone. */
static int let_child_go(struct pt_tracee *t, pid_t tid, int added, long parent_opts)
{
	struct pt_tracer *tr = t->tr;
	int status, held, k;

	/* (added: registered by its clone event just now, before it runs) */
	if (t->detaching || (!added && (t->n >= (size_t)t->o.max_threads || pt_threads_find(t, tid))))
		return 0;
	for (k = 0; k < tr->nreaped && tr->reaped[k].tid != tid; k++) {
	}
	if (k < tr->nreaped) {
		if (!is_birth_stop(tr->reaped[k].status))
			return 0;
		tr->reaped[k].tid = 0;   /* answered here */
	} else if ((k = pt__events_wait(tid, &status, 0, &held)) != tid || !held || !is_birth_stop(status)) {
		/* No longer ours to wait for: it ended, its end reaped as no
		 * tracee's (its process killed meanwhile, say). */
		return k < 0 && errno == ECHILD ? -1 : 0;
	}
	/* its parent's options (the kernel's copy) until given t's */
	pt__follow_fix_tid(t, tid, parent_opts);
	return !ptrace(PTRACE_CONT, tid, 0, 0);
}

/* A clone event: the new thread waits in its first stop until we let it
 * go, its parent in this event stop until we resume it. The child first:
 * if it is not known yet and has reached its birth stop, it is resumed at
 * once, before anything else is done for it (let_child_go); else its stop
 * comes through the poll as any other, after it is known.
 * The parent next, as soon as its stack is copied (when clone stacks are
 * asked for); then the child is registered (its /proc files opened when
 * first read, its CPU counted from its birth) and the event reported. */
static enum pt__ev on_clone(struct pt_tracee *t, struct pt_thread *th, long parent_opts)
{
	unsigned long newtid = 0;
	struct pt_capture *cap = t->clone_stacks ? clone_capture(t) : NULL;
	/* the runtimes' last capture slot is the clone events' (tracee.c) */
	int slot = cap ? t->o.max_per_tick : -1;
	int took = 0, n = 0, resumed = 0, added = 0;
	struct pt_thread *child = NULL;
	enum pt__ev e;

	interrupt_spent(th);
	if (ptrace(PTRACE_GETEVENTMSG, th->tid, 0, &newtid) || !newtid)
		return resume(t, th, 0);
	t->st.clones++;
	/* An owner that acts on a thread's birth before it runs (the
	 * perf_event backend opens its event, so that a thread that lives
	 * for less than a tick is sampled from its first instruction) has it
	 * registered first. */
	if (t->tops.born && t->tops.early && t->tops.early(t->tops.arg) && !t->detaching &&
	    !pt_threads_find(t, (pid_t)newtid) && pt__threads_add(t, (pid_t)newtid, 1) == 0 &&
	    (child = pt_threads_find(t, (pid_t)newtid))) {
		added = 1;
		t->tops.born(t->tops.arg, child);
	}
	resumed = let_child_go(t, (pid_t)newtid, added, parent_opts);
	/* The parent is stopped at the event: copy its stack now, unwind it
	 * once it runs again. */
	if (cap)
		pt__capture_prepare(t, &th, 1);   /* once per thread: its Python thread state */
	took = cap && !t->detaching && pt__capture(t, th, cap, slot) == 0;
	e = resume(t, th, 0);
	/* A child that had not reached its stop has had the parent's capture
	 * to get there: a second try, before the unwind and the sessions'
	 * work, which it would otherwise wait through. */
	if (!resumed)
		resumed = let_child_go(t, (pid_t)newtid, added, parent_opts);
	if (resumed > 0)
		t->st.clones_resumed_at_once++;
	if (resumed < 0) {
		/* Born and ended before this event: never known, never to be
		 * (its /proc files are gone); its end is told after its birth. */
		if (added)
			child->flags |= PT_TH_GONE;
	} else if (!added && pt__threads_add(t, (pid_t)newtid, 1) < 0) {
		/* Over the cap: let it go untraced rather than stopped. */
		ptrace(PTRACE_DETACH, (pid_t)newtid, 0, 0);
	}
	/* Its options: t's if it was let go here, else its parent's as they
	 * were when it was created, until its birth stop comes through the
	 * poll (pt__follow_fix). */
	if (resumed >= 0 && (child || (child = pt_threads_find(t, (pid_t)newtid))))
		child->opts = resumed > 0 ? pt__follow_opts(t) : parent_opts;
	/* An owner that acts on a new thread without holding it or its
	 * parent up (a parent stopped at its clone event may hold a lock
	 * every thread waits for: CPython's GIL). */
	if (resumed >= 0 && t->tops.started && !t->detaching &&
	    (child || (child = pt_threads_find(t, (pid_t)newtid))))
		t->tops.started(t->tops.arg, child);
	if (took)
		n = unwind_clone_parent(t, cap);
	if (took)
		n = pt_runtimes_merge(t->rts, slot, cap, t->clone_frames, n, t->o.max_frames);
	pt__events_emit_clone(t, th->tid, (pid_t)newtid, took ? t->clone_frames : NULL, n, 0);
	if (resumed < 0)
		pt__events_emit(t, PT_EV_EXIT, (pid_t)newtid, 0, NULL, 0);
	return e;
}

/* A fork or vfork event: the new process is traced already (the tracee's
 * PTRACE_O_TRACEFORK and _TRACEVFORK), its first stop to come or come.
 * Whoever follows the parent adopts it during the event (pt_tracee_attach
 * on a tracee of the child's pid): its first stop, known then, is resumed
 * as a new thread's; else its stop, no tracee's, lets it go untraced
 * (tracer.c). The parent goes on at once. */
static enum pt__ev on_fork(struct pt_tracee *t, struct pt_thread *th)
{
	unsigned long child = 0;

	interrupt_spent(th);
	if (!ptrace(PTRACE_GETEVENTMSG, th->tid, 0, &child) && child && !t->detaching) {
		t->st.forks++;
		pt__events_emit(t, PT_EV_FORK, th->tid, (pid_t)child, NULL, 0);
	}
	return resume(t, th, 0);
}

static enum pt__ev on_exec(struct pt_tracee *t, struct pt_thread *th)
{
	unsigned long former = 0;
	struct pt_thread *ghost;

	/* A thread other than the leader exec'd: it took the leader's tid and
	 * its own tid is gone, with no exit event of its own. */
	if (!ptrace(PTRACE_GETEVENTMSG, th->tid, 0, &former) && (pid_t)former != th->tid &&
	    (ghost = pt_threads_find(t, (pid_t)former))) {
		ghost->flags |= PT_TH_GONE;
		pt__events_emit(t, PT_EV_EXIT, ghost->tid, 0, NULL, 0);
	}
	/* The old program's modules stay as they are (frozen: no new ones from
	 * the new program's memory) until the sessions that sampled it have
	 * ended; see pt_tracee_ack_exec(). */
	t->execed = 1;
	t->st.execs++;
	pt_space_hold(t->as, 1);
	/* This tid is now the thread that called exec (it took the leader's
	 * tid): whatever we sent the old leader is moot, and our /proc fds
	 * point at the dead task. A stop still pending for the new one arrives
	 * later as a stray EVENT_STOP and is resumed. A new program: what its
	 * owner kept of the old one's thread means nothing now. */
	th->flags &= ~(PT_TH_INTERRUPTING | PT_TH_WANTED | PT_TH_GROUPSTOP);
	pt__threads_reset(t, th);
	pt__execfp_open(t);
	return resume(t, th, 0);
}

/* th ended: its clocks read while it is a zombie (held: not reaped yet),
 * then reaped, and its end reported with them. */
static enum pt__ev on_exit(struct pt_tracee *t, struct pt_thread *th, int held)
{
	struct pt_event ev = { .kind = PT_EV_EXIT, .pid = t->pid, .tid = th->tid };

	if (held) {
		int status;

		if (pt_thread_read_sched_end(th, &ev.run_ns, &ev.wait_ns))
			ev.run_ns = ev.wait_ns = 0;
		/* The leader's end comes after every other thread's: the
		 * process's clock, read while it is a zombie, is its whole CPU
		 * (a profile cut by the exit settles against it). */
		if (th->tid == t->pid)
			t->gone_cpu_ns = pt__process_cpu_ns(t->pid);
		pt__events_reap(th->tid, &status);
	}
	if (th->tid == t->pid)
		t->gone = 1;
	th->flags |= PT_TH_GONE;
	if (t->tr->event)
		t->tr->event(t->tr->event_arg, &ev);
	return PT__EV_GONE;
}

/* 1 if the signal th stopped for is its owner's own (struct pt_thread_ops
 * own_signal), by its siginfo: never one of the target's, which are all
 * passed on. */
static int own_signal(struct pt_tracee *t, struct pt_thread *th, int sig)
{
	siginfo_t si;

	if (!t->own_sig || sig != t->own_sig || !t->tops.own_signal ||
	    ptrace(PTRACE_GETSIGINFO, th->tid, 0, &si))
		return 0;
	return t->tops.own_signal(t->tops.arg, th, &si);
}

enum pt__ev pt__events_on_status(struct pt_tracee *t, struct pt_thread *th, int status, int held)
{
	long opts;

	if (WIFEXITED(status) || WIFSIGNALED(status))
		return on_exit(t, th, held);
	if (!WIFSTOPPED(status))
		return PT__EV_NONE;
	/* Any stop is where its options can change (follow.h); a thread it
	 * created before this stop has the options it had then. An exec's
	 * stop comes under the leader's tid from whichever thread exec'd,
	 * whose options may not be the leader's: set them. */
	if ((status >> 16) == PTRACE_EVENT_EXEC)
		th->opts = -1;
	opts = th->opts;
	pt__follow_fix(t, th);
	switch (status >> 16) {
	case PTRACE_EVENT_STOP:
		return on_event_stop(t, th, WSTOPSIG(status));
	case PTRACE_EVENT_CLONE:
		return on_clone(t, th, opts);
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
		return on_fork(t, th);
	case PTRACE_EVENT_EXEC:
		return on_exec(t, th);
	default:
		if (own_signal(t, th, WSTOPSIG(status))) {
			/* The owner's own (a stop by the CPU the thread
			 * used): the thread never takes it. Captured here,
			 * where it runs: as the capture of a stop of ours that
			 * wants it now, else as a late capture of the last
			 * tick's (stop.c take_late); resumed without it. */
			t->st.own_signals++;
			if (t->detaching)
				return resume(t, th, 0);
			th->resume_sig = 0;
			if (th->flags & PT_TH_INTERRUPTING) {
				if (!(th->flags & PT_TH_WANTED))
					return resume(t, th, 0);   /* its interrupt's stop comes next */
				th->flags &= ~PT_TH_INTERRUPTING;
				return PT__EV_OURS;
			}
			th->flags |= PT_TH_WANTED | PT_TH_LATE;
			return PT__EV_OURS;
		}
		/* Signal-delivery-stop: the signal was meant for the target.
		 * Deliver it exactly once, now (or on detach). Until it next
		 * gets a core, the thread is runnable but has yet to enter its
		 * handler: a tick must not stop it there (pt_thread_note_signal). */
		t->st.signals_reinjected++;
		if (t->detaching)
			return resume(t, th, WSTOPSIG(status));
		pt_thread_note_signal(th);
		if ((th->flags & (PT_TH_INTERRUPTING | PT_TH_WANTED)) ==
		    (PT_TH_INTERRUPTING | PT_TH_WANTED)) {
			/* A thread we interrupted took a signal first (it
			 * came between the look and our interrupt): it stands
			 * where the signal found it, which is where it ran.
			 * Resumed with the signal, it would stop for our
			 * interrupt at its handler's first instruction, as
			 * often as it is signalled, not as often as it runs
			 * there. So the sample is taken here, the thread
			 * resumed with its signal (stop.c take). */
			th->flags &= ~PT_TH_INTERRUPTING;   /* spent (interrupt_spent), its sample taken here */
			th->resume_sig = WSTOPSIG(status);
			return PT__EV_OURS;
		}
		interrupt_spent(th);
		return resume(t, th, WSTOPSIG(status));
	}
}

/* Why stops are not reaped: reaping a signal-delivery stop sets the signal
 * the thread takes when it runs again to none, until PTRACE_CONT sets it
 * back, so podprof SIGKILLed in between (the kernel detaches its tracees at
 * its exit) lost that signal: about 1 kill in 100 did in
 * it/sigkill_at_random_moments_never_harms_the_target under load. A stop
 * only looked at keeps its signal until the PTRACE_CONT or PTRACE_DETACH
 * that passes it on, or the kernel's detach. Every stop is looked at the
 * same way (never reaped: its resumption, PTRACE_LISTEN included, ends it
 * for wait too), which costs one system call per stop as reaping did; but
 * an exec's stop, which the kernel refuses every ptrace request until it
 * is reaped when the tid changed (a thread other than the leader exec'd:
 * "looks_like_a_spurious_pid"). An exit is looked at too, so that the
 * thread's clocks can be read while it is a zombie, then reaped by
 * pt__events_on_status. */
int pt__events_wait(int pid, int *status, int flags, int *held)
{
	siginfo_t si;

	*held = 0;
	si.si_pid = 0;
	/* WEXITED alone: ptrace stops are reported without WSTOPPED, and
	 * with it a stopped child of ours that is no tracee would be too. */
	if (waitid(pid < 0 ? P_ALL : P_PID, pid < 0 ? 0 : (id_t)pid, &si,
		   WEXITED | WNOHANG | WNOWAIT | __WALL | flags) < 0)
		return -1;
	if (!si.si_pid)
		return 0;
	/* waitpid's status from waitid's: a ptrace stop's si_status is its
	 * whole stop code (an event's number above its SIGTRAP). */
	switch (si.si_code) {
	case CLD_TRAPPED:
		if (si.si_status >> 8 == PTRACE_EVENT_EXEC)
			return waitpid(si.si_pid, status, WNOHANG | __WALL | flags);
		*status = si.si_status << 8 | 0x7f;
		break;
	case CLD_EXITED:
		*status = (si.si_status & 0xff) << 8;
		break;
	case CLD_KILLED:
		*status = si.si_status & 0x7f;
		break;
	case CLD_DUMPED:
		*status = (si.si_status & 0x7f) | 0x80;
		break;
	default:
		return 0;
	}
	*held = 1;
	return si.si_pid;
}

int pt__events_reap(int pid, int *status)
{
	return waitpid(pid, status, WNOHANG | __WALL);
}

enum pt__ev pt__events_poll(struct pt_tracee *t, struct pt_thread *th)
{
	int status, held;
	pid_t r = pt__events_wait(th->tid, &status, 0, &held);

	if (r == 0)
		return PT__EV_NONE;
	if (r < 0) {
		/* ECHILD: no longer our tracee (killed with the group). */
		if (errno == ECHILD) {
			th->flags |= PT_TH_GONE;
			return PT__EV_GONE;
		}
		return PT__EV_NONE;
	}
	return pt__events_on_status(t, th, status, held);
}
