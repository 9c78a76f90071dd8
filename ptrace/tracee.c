/* The ptrace mechanism of a tracee: attach and detach, waiting for and
 * acting on every event (signals re-injected, group-stops honoured, clones
 * followed, exec and exit noticed), interrupting the threads a rule chose,
 * capturing each (registers and a stack copy) and resuming it at once, then
 * unwinding offline and reporting. Which threads to stop is rule.c's. The
 * tracer's state is explicit (struct pt_tracer). Sampler thread only. */
#include "ptrace/tracee.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ptrace/mem.h"
#include "ptrace/module.h"
#include "ptrace/perfmap.h"
#include "ptrace/proc.h"
#include "ptrace/ptrace_internal.h"
#include "ptrace/python.h"
#include "ptrace/tracee_internal.h"
#include "ptrace/unwind.h"

static uint64_t mm_fingerprint(struct pt_tracee *t, pid_t alt);
static void open_leader_auxv(struct pt_tracee *t);
static void py_detect(struct pt_tracee *t);

ssize_t pt__pread_text(int fd, char *buf, size_t len)
{
	ssize_t n = fd >= 0 ? pread(fd, buf, len - 1, 0) : -1;

	if (n >= 0)
		buf[n] = '\0';
	return n;
}

ssize_t pt__pread_own(int *fd, const char *path, char *buf, size_t len)
{
	if (*fd < 0)
		*fd = open(path, O_RDONLY | O_CLOEXEC);
	return pt__pread_text(*fd, buf, len);
}

/* The tracer thread's own time runnable but waiting for a core, so far. */
static uint64_t own_rq_wait_ns(struct pt_tracer *tr)
{
	char buf[128];
	uint64_t run, wait;

	if (pt__pread_own(&tr->self_sched_fd, "/proc/thread-self/schedstat", buf, sizeof(buf)) <= 0)
		return 0;
	return pt_proc_parse_schedstat(buf, &run, &wait, NULL) ? 0 : wait;
}

#define MAPS_BACKOFF_MIN_NS 10000000ull     /* 10 ms */
#define MAPS_BACKOFF_MAX_NS 1000000000ull   /* 1 s */

int pt_tracer_new(struct pt_tracer **out, int wake_fd)
{
	struct pt_tracer *tr = calloc(1, sizeof(*tr));

	*out = NULL;
	if (!tr)
		return -ENOMEM;
	tr->wake_fd = wake_fd;
	tr->self_sched_fd = tr->loadavg_fd = -1;
	*out = tr;
	return 0;
}

void pt_tracer_free(struct pt_tracer *tr)
{
	if (!tr)
		return;
	if (tr->self_sched_fd >= 0)
		close(tr->self_sched_fd);
	if (tr->loadavg_fd >= 0)
		close(tr->loadavg_fd);
	free(tr);
}

void pt_tracer_set_events(struct pt_tracer *tr, pt_event_cb cb, void *arg)
{
	tr->event = cb;
	tr->event_arg = arg;
}

static void emit(struct pt_tracee *t, enum pt_event_kind kind, pid_t tid, pid_t child,
		 const uint64_t *stack, int n)
{
	struct pt_event ev = { .kind = kind, .pid = t->pid, .tid = tid, .child = child,
			       .stack = stack, .n = n };

	if (t->tr->event)
		t->tr->event(t->tr->event_arg, &ev);
}

int pt_tracee_new(struct pt_tracee **out, struct pt_tracer *tr, pid_t pid,
		  const struct pt_tracee_opts *opts)
{
	struct pt_tracee *t;
	int err = -ENOMEM;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->pid = pid;
	t->o = *opts;
	t->auxv_fd = -1;
	t->caps = calloc((size_t)opts->max_per_tick, sizeof(*t->caps));
	t->frames = calloc((size_t)opts->max_frames * (size_t)opts->max_per_tick, sizeof(*t->frames));
	t->nframes = calloc((size_t)opts->max_per_tick, sizeof(*t->nframes));
	t->unwind_ns = calloc((size_t)opts->max_per_tick, sizeof(*t->unwind_ns));
	t->slot_th = calloc((size_t)opts->max_per_tick, sizeof(*t->slot_th));
	t->slot_pause = calloc((size_t)opts->max_per_tick, sizeof(*t->slot_pause));
	t->maps_backoff_ns = MAPS_BACKOFF_MIN_NS;
	t->ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	t->spin_slots = t->ncpu > 2 ? t->ncpu - 1 : 1;
	if (!t->caps || !t->frames || !t->nframes || !t->unwind_ns || !t->slot_th || !t->slot_pause)
		goto out;
	for (int i = 0; i < opts->max_per_tick; i++)
		if (!(t->caps[i].stack = malloc(opts->stack_bytes)))
			goto out;
	if ((err = pt_mem_new(&t->mem, pid, 256)) || (err = pt_modules_new(&t->mods, pid, t->mem)) ||
	    (err = pt_unwinder_new(&t->unw, t->mem, t->mods)))
		goto out;
	if (opts->debug_dir)
		pt_modules_set_debug_dir(t->mods, opts->debug_dir);
	if (opts->python && (err = pt_py_new(&t->py, pid, t->mem)))
		goto out;
	t->tr = tr;
	t->next = tr->tracees;
	tr->tracees = t;
	*out = t;
	t = NULL;
	err = 0;
out:
	pt_tracee_free(t);
	return err;
}

static void close_thread(struct thread *th)
{
	free(th->snap);
	th->snap = NULL;
	if (th->sys_fd >= 0)
		close(th->sys_fd);
	if (th->sched_fd >= 0)
		close(th->sched_fd);
	if (th->stat_fd >= 0)
		close(th->stat_fd);
	th->sys_fd = th->sched_fd = th->stat_fd = -1;
	th->flags |= TH_GONE;
}

void pt_tracee_free(struct pt_tracee *t)
{
	if (!t)
		return;
	if (t->attached)
		pt_tracee_detach(t, 2000000000ull);
	for (struct pt_tracee **pp = t->tr ? &t->tr->tracees : NULL; pp && *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	for (size_t i = 0; i < t->n; i++)
		close_thread(&t->th[i]);
	if (t->auxv_fd >= 0)
		close(t->auxv_fd);
	free(t->th);
	if (t->caps)
		for (int i = 0; i < t->o.max_per_tick; i++)
			free(t->caps[i].stack), free(t->caps[i].sig_stack);
	free(t->caps);
	free(t->frames);
	free(t->nframes);
	free(t->unwind_ns);
	free(t->slot_th);
	free(t->slot_pause);
	if (t->clone_cap)
		free(t->clone_cap->stack), free(t->clone_cap->sig_stack);
	free(t->clone_cap);
	free(t->clone_frames);
	pt_py_free(t->py);
	free(t->py_caps);
	pt_unwinder_free(t->unw);
	pt_modules_free(t->mods);
	pt_mem_free(t->mem);
	pt_maps_free(t->maps);
	pt_perfmap_free(t->pm);
	free(t);
}

pid_t pt_tracee_pid(const struct pt_tracee *t) { return t->pid; }
int pt_tracee_attached(const struct pt_tracee *t) { return t->attached; }
int pt_tracee_detaching(const struct pt_tracee *t) { return t->attached && t->detaching; }
int pt_tracee_gone(const struct pt_tracee *t) { return t->gone; }
size_t pt_tracee_nthreads(const struct pt_tracee *t) { return t->n; }
const struct pt_maps *pt_tracee_maps(const struct pt_tracee *t) { return t->maps; }

void pt_tracee_stats(const struct pt_tracee *t, struct pt_tracee_stats *out)
{
	*out = t->st;
	pt_modules_load_stats(t->mods, &out->symtab_load_ns, &out->symtab_loads);
}

int pt_tracee_exec_pending(const struct pt_tracee *t)
{
	return t->execed;
}

struct thread *pt__find_thread(struct pt_tracee *t, pid_t tid)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->th[i].tid == tid && !(t->th[i].flags & TH_GONE))
			return &t->th[i];
	return NULL;
}

int pt__read_run_ns(const struct thread *th, uint64_t *run_ns, uint64_t *wait_ns,
		    uint64_t *slices)
{
	char buf[128];

	if (pt__pread_text(th->sched_fd, buf, sizeof(buf)) <= 0)
		return -ESRCH;
	return pt_proc_parse_schedstat(buf, run_ns, wait_ns, slices) ? -EBADMSG : 0;
}

/* Opens th's /proc files. /proc/<tid>/syscall is mode 0400, its owner's:
 * a podprof of another uid without CAP_DAC_OVERRIDE (it keeps only
 * CAP_SYS_PTRACE) cannot open it. Then /proc/<tid>/stat (0444) tells
 * whether the thread runs, and blocked threads go without their system
 * call's name. */
static void reopen_thread(struct pt_tracee *t, struct thread *th)
{
	char path[96];

	if (th->sys_fd >= 0)
		close(th->sys_fd);
	if (th->sched_fd >= 0)
		close(th->sched_fd);
	if (th->stat_fd >= 0)
		close(th->stat_fd);
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)t->pid, (int)th->tid);
	th->sys_fd = open(path, O_RDONLY | O_CLOEXEC);
	th->stat_fd = -1;
	if (th->sys_fd < 0) {
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)t->pid, (int)th->tid);
		th->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)t->pid, (int)th->tid);
	th->sched_fd = open(path, O_RDONLY | O_CLOEXEC);
	th->last_run_ns = th->acc_ns = th->comm_ns = 0;
	th->credit_ns = NEW_CREDIT;
	th->moved_at = pt__now_ns();
	free(th->snap);          /* a new program (exec): old stacks mean nothing */
	th->snap = NULL;
	th->snap_ok = 0;
	th->syscall = -1;
	if (th->sched_fd >= 0)
		pt__read_run_ns(th, &th->last_run_ns, &th->wait_ns, NULL);
}

static int add_thread(struct pt_tracee *t, pid_t tid)
{
	struct thread *th;

	if (pt__find_thread(t, tid))
		return 0;
	if (t->n >= (size_t)t->o.max_threads)
		return -E2BIG;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct thread *v = realloc(t->th, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		t->th = v;
		t->cap = cap;
	}
	th = &t->th[t->n];
	memset(th, 0, sizeof(*th));
	th->tid = tid;
	th->sys_fd = th->sched_fd = th->stat_fd = -1;
	reopen_thread(t, th);
	t->n++;
	return 0;
}

void pt__compact(struct pt_tracee *t)
{
	size_t w = 0;

	if (t->nlate)
		return;   /* late captures name their threads by index: later */

	for (size_t r = 0; r < t->n; r++) {
		if (t->th[r].flags & TH_GONE) {
			close_thread(&t->th[r]);
			continue;
		}
		t->th[w++] = t->th[r];
	}
	t->n = w;
	if (t->n == 0 && t->attached) {
		t->attached = 0;
		t->detaching = 0;
	}
}

int pt_tracee_refresh_maps(struct pt_tracee *t)
{
	struct pt_maps *m;
	int err;

	if (t->execed)
		return 0;   /* keep the old program's maps until the exec is acknowledged */
	err = pt_proc_read_maps(t->pid, &m);

	if (err)
		return err;
	pt_maps_free(t->maps);
	t->maps = m;
	t->maps_at_ns = pt__now_ns();
	t->pm_checked = 0;
	pt_mem_set_maps(t->mem, m);
	pt_unwinder_set_maps(t->unw, m);
	return 0;
}

void pt_tracee_ack_exec(struct pt_tracee *t)
{
	if (!t->execed)
		return;
	t->execed = 0;
	pt_mem_flush(t->mem);
	pt_modules_reset(t->mods);
	pt_modules_freeze(t->mods, 0);
	pt_perfmap_free(t->pm);
	t->pm = NULL;
	memset(&t->pm_st, 0, sizeof(t->pm_st));
	pt_unwinder_flush(t->unw);
	pt_tracee_refresh_maps(t);
	t->mm_fp = mm_fingerprint(t, 0);   /* the new program's */
	if (t->py) {
		/* The new program's interpreter, if any (no token of the old
		 * one is left: the sessions that saw it have ended), and its
		 * thread states, looked up anew. */
		pt_py_reset(t->py);
		for (size_t i = 0; i < t->n; i++)
			t->th[i].py_tstate = t->th[i].py_retry_ns = t->th[i].py_bulk[0] = t->th[i].py_bulk[1] = 0;
		py_detect(t);
	}
}

int pt_tracee_attach(struct pt_tracee *t)
{
	const long opts = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC;
	int err, round;

	if (t->attached)
		return 0;
	if ((err = pt_tracee_refresh_maps(t)))
		return err;
	pt_mem_flush(t->mem);
	/* The thread that first attaches is the tracer (ptrace is per thread). */
	if (!t->tr->tid)
		t->tr->tid = gettid();
	t->attached = 1;
	/* Threads created while we list and seize are caught either by the
	 * clone event of an already seized parent or by the next listing. */
	/* The leader first: permission is per process, so once it is seized
	 * an EPERM for a sibling only means that thread is exiting (the kernel
	 * refuses to attach to an exiting task with EPERM, not ESRCH). */
	if (ptrace(PTRACE_SEIZE, t->pid, 0, opts) < 0) {
		err = -errno;
		goto fail;
	}
	if ((err = add_thread(t, t->pid)))
		goto fail;
	for (round = 0; round < 64; round++) {
		size_t n, added = 0;
		pid_t *tids;

		err = pt_proc_list_tasks(t->pid, (size_t)t->o.max_threads, &tids, &n);
		if (err && err != -E2BIG)
			goto fail;
		for (size_t i = 0; i < n; i++) {
			if (pt__find_thread(t, tids[i]))
				continue;
			if (ptrace(PTRACE_SEIZE, tids[i], 0, opts) < 0) {
				err = -errno;
				if (err == -ESRCH || err == -EPERM)
					continue;   /* exited or exiting meanwhile */
				free(tids);
				goto fail;
			}
			if ((err = add_thread(t, tids[i]))) {
				ptrace(PTRACE_DETACH, tids[i], 0, 0);
				free(tids);
				goto fail;
			}
			added++;
		}
		free(tids);
		if (!added)
			break;
	}
	if (t->n == 0) {
		err = -ESRCH;
		goto fail;
	}
	open_leader_auxv(t);
	t->mm_fp = mm_fingerprint(t, 0);
	py_detect(t);
	return 0;
fail:
	pt_tracee_detach(t, 1000000000ull);
	t->attached = 0;
	return err;
}

static int is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

static void detach_thread(struct pt_tracee *t, struct thread *th, int sig)
{
	(void)t;
	ptrace(PTRACE_DETACH, th->tid, 0, (void *)(long)sig);
	th->flags |= TH_GONE;
}

enum ev { EV_NONE, EV_OURS, EV_HANDLED, EV_GONE };

/* Resumes th after an event of its own, or lets it go if we are detaching
 * (with `sig`, the signal it stopped for, delivered then). */
static enum ev resume(struct pt_tracee *t, struct thread *th, int sig)
{
	if (t->detaching) {
		detach_thread(t, th, sig);
		return EV_GONE;
	}
	ptrace(PTRACE_CONT, th->tid, 0, (void *)(long)sig);
	return EV_HANDLED;
}

/* PTRACE_EVENT_STOP: our interrupt, a new thread's first stop, or a
 * group-stop. */
static enum ev on_event_stop(struct pt_tracee *t, struct thread *th, int sig)
{
	if (is_stop_signal(sig)) {
		/* Group-stop (SIGSTOP from outside): the thread must stay
		 * stopped for job control. PTRACE_LISTEN keeps it stopped
		 * while letting us see the SIGCONT. */
		th->flags &= ~TH_INTERRUPTING;
		if (t->detaching) {
			detach_thread(t, th, 0);
			return EV_GONE;
		}
		th->flags |= TH_GROUPSTOP;
		t->st.group_stops++;
		ptrace(PTRACE_LISTEN, th->tid, 0, 0);
		return EV_HANDLED;
	}
	th->flags &= ~TH_GROUPSTOP;
	if (!t->detaching && (th->flags & TH_INTERRUPTING)) {
		th->flags &= ~TH_INTERRUPTING;
		if (th->flags & TH_WANTED)
			return EV_OURS;
	}
	/* A new thread's first stop, a late interrupt, or the end of a
	 * group-stop seen through PTRACE_LISTEN. */
	return resume(t, th, 0);
}

static int capture(struct pt_tracee *t, struct thread *th, struct pt_capture *cap,
		   struct pt_py_cap *pyc);
static void py_prepare(struct pt_tracee *t, const size_t *sel, int nsel);

/* The capture buffers of clone stacks, allocated at first use. */
static struct pt_capture *clone_capture(struct pt_tracee *t)
{
	if (!t->clone_cap && (t->clone_cap = calloc(1, sizeof(*t->clone_cap))) &&
	    (!(t->clone_cap->stack = malloc(t->o.stack_bytes)) ||
	     !(t->clone_frames = malloc((size_t)t->o.max_frames * sizeof(*t->clone_frames))))) {
		free(t->clone_cap->stack);
		free(t->clone_cap);
		t->clone_cap = NULL;
	}
	return t->clone_cap;
}

/* Unwinds the parent's capture at a clone into t->clone_frames. glibc's
 * clone3 marks its return address undefined after the system call (so
 * that the child's unwind ends there, on the same code), which ends the
 * parent's unwind at its first frame too. The parent is in a leaf with no
 * frame of its own there: its return address is the word at its stack
 * pointer. If that points into executable memory, unwind on from the caller.
 * Returns the number of frames. */
static int unwind_clone_parent(struct pt_tracee *t, struct pt_capture *cap)
{
	uint64_t *f = t->clone_frames, ret;
	const struct pt_map *m;
	int n, complete, max = t->o.max_frames;

	n = pt_unwind(t->unw, cap, f, max, &complete);
	if (n > 1 || max < 2 || cap->stack_len < 16)
		return n;
	memcpy(&ret, cap->stack, sizeof(ret));
	if (!(m = pt_maps_find(t->maps, ret)) || !(m->flags & PT_MAP_X))
		return n;
	cap->regs.rip = ret;
	cap->regs.rsp += 8;
	cap->stack += 8;
	cap->stack_len -= 8;
	if (cap->stack_limit > 8)
		cap->stack_limit -= 8;
	n = 1 + pt_unwind(t->unw, cap, f + 1, max - 1, &complete);
	f[1] = ret - 1;   /* a return address: the call is the instruction before */
	cap->stack -= 8;
	return n;
}

static enum ev on_clone(struct pt_tracee *t, struct thread *th)
{
	unsigned long newtid = 0;
	size_t idx = (size_t)(th - t->th);
	struct pt_capture *cap = t->clone_stacks ? clone_capture(t) : NULL;
	/* py_caps' last slot is the clone events' (see py_detect) */
	struct pt_py_cap *pyc = cap && t->py_caps ? &t->py_caps[t->o.max_per_tick] : NULL;
	int took = 0, n = 0;
	enum ev e;

	if (ptrace(PTRACE_GETEVENTMSG, th->tid, 0, &newtid) || !newtid)
		return resume(t, th, 0);
	t->st.clones++;
	if (add_thread(t, (pid_t)newtid) < 0) {
		/* Over the cap: let it go untraced rather than stopped. */
		ptrace(PTRACE_DETACH, (pid_t)newtid, 0, 0);
	}
	th = &t->th[idx];   /* add_thread may have moved the array */
	/* The parent is stopped at the event: copy its stack now, unwind it
	 * once it runs again. */
	if (pyc)
		py_prepare(t, &idx, 1);   /* once per thread: its Python thread state */
	took = cap && !t->detaching && capture(t, th, cap, pyc) == 0;
	e = resume(t, th, 0);
	if (took)
		n = unwind_clone_parent(t, cap);
	if (took && pyc && pyc->n)
		n = pt_py_merge(t->py, pyc, t->clone_frames, n);
	emit(t, PT_EV_CLONE, t->th[idx].tid, (pid_t)newtid, took ? t->clone_frames : NULL, n);
	return e;
}

void pt_tracee_clone_stacks(struct pt_tracee *t, int on)
{
	t->clone_stacks = on;
}

static enum ev on_exec(struct pt_tracee *t, struct thread *th)
{
	unsigned long former = 0;
	struct thread *ghost;

	/* A thread other than the leader exec'd: it took the leader's tid and
	 * its own tid is gone, with no exit event of its own. */
	if (!ptrace(PTRACE_GETEVENTMSG, th->tid, 0, &former) && (pid_t)former != th->tid &&
	    (ghost = pt__find_thread(t, (pid_t)former))) {
		ghost->flags |= TH_GONE;
		emit(t, PT_EV_EXIT, ghost->tid, 0, NULL, 0);
	}
	/* The old program's modules stay as they are (frozen: no new ones from
	 * the new program's memory) until the sessions that sampled it have
	 * ended; see pt_tracee_ack_exec(). */
	t->execed = 1;
	t->st.execs++;
	pt_modules_freeze(t->mods, 1);
	/* This tid is now the thread that called exec (it took the leader's
	 * tid): whatever we sent the old leader is moot, and our /proc fds
	 * point at the dead task. A stop still pending for the new one arrives
	 * later as a stray EVENT_STOP and is resumed. */
	th->flags &= ~(TH_INTERRUPTING | TH_WANTED | TH_GROUPSTOP);
	reopen_thread(t, th);
	open_leader_auxv(t);
	return resume(t, th, 0);
}

/* Acts on one waitpid status of th. Returns EV_OURS when th is stopped by our
 * PTRACE_INTERRUPT and the caller must resume it. */
static enum ev on_status(struct pt_tracee *t, struct thread *th, int status)
{
	uint64_t run;

	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		if (th->tid == t->pid)
			t->gone = 1;
		th->flags |= TH_GONE;
		emit(t, PT_EV_EXIT, th->tid, 0, NULL, 0);
		return EV_GONE;
	}
	if (!WIFSTOPPED(status))
		return EV_NONE;
	switch (status >> 16) {
	case PTRACE_EVENT_STOP:
		return on_event_stop(t, th, WSTOPSIG(status));
	case PTRACE_EVENT_CLONE:
		return on_clone(t, th);
	case PTRACE_EVENT_EXEC:
		return on_exec(t, th);
	default:
		/* Signal-delivery-stop: the signal was meant for the target.
		 * Deliver it exactly once, now (or on detach). Until it next
		 * gets a core, the thread is runnable but has yet to enter its
		 * handler: a tick must not stop it there (see look). */
		t->st.signals_reinjected++;
		if (t->detaching)
			return resume(t, th, WSTOPSIG(status));
		if (!pt__read_run_ns(th, &run, NULL, &th->sig_slices))
			th->flags |= TH_SIGNALLED;
		if ((th->flags & (TH_INTERRUPTING | TH_WANTED)) == (TH_INTERRUPTING | TH_WANTED)) {
			/* A thread we interrupted took a signal first (it
			 * came between the look and our interrupt): it stands
			 * where the signal found it, which is where it ran.
			 * Resumed with the signal, it would stop for our
			 * interrupt at its handler's first instruction, as
			 * often as it is signalled, not as often as it runs
			 * there. So the sample is taken here, the thread
			 * resumed with its signal (see take), and the stop our
			 * interrupt still owes comes later as a late one
			 * (TH_INTERRUPTING stays set: see on_event_stop). */
			th->resume_sig = WSTOPSIG(status);
			return EV_OURS;
		}
		return resume(t, th, WSTOPSIG(status));
	}
}

static void take_late(struct pt_tracee *t, struct thread *th);

/* Reaps one pending status of th without blocking. */
static enum ev poll_thread(struct pt_tracee *t, struct thread *th)
{
	int status;
	pid_t r = waitpid(th->tid, &status, WNOHANG | __WALL);

	if (r == 0)
		return EV_NONE;
	if (r < 0) {
		/* ECHILD: no longer our tracee (killed with the group). */
		if (errno == ECHILD) {
			th->flags |= TH_GONE;
			return EV_GONE;
		}
		return EV_NONE;
	}
	return on_status(t, th, status);
}

static struct pt_tracee *known(struct pt_tracer *tr, pid_t tid, struct thread **thp)
{
	for (struct pt_tracee *x = tr->tracees; x; x = x->next)
		if ((*thp = pt__find_thread(x, tid)))
			return x;
	return NULL;
}

/* The tracee and thread of an event that no tracee knew while its batch was
 * reaped: usually a new thread whose first stop came before its parent's
 * clone event, registered since; else it joins its process's tracee here.
 * NULL if no tracee holds it. */
static struct pt_tracee *owner(struct pt_tracer *tr, pid_t tid, struct thread **thp)
{
	char path[64], buf[2048];
	long long tgid;
	struct pt_tracee *x = known(tr, tid, thp);

	if (x)
		return x;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_status_value(buf, "Tgid", &tgid))
		return NULL;
	for (x = tr->tracees; x; x = x->next)
		if (x->pid == (pid_t)tgid && x->attached && add_thread(x, tid) == 0 &&
		    (*thp = pt__find_thread(x, tid)))
			return x;
	return NULL;
}

/* Acts on a status wherever it was reaped: our stop of a thread that a tick
 * selected but that stopped after the tick is captured now (it was not on a
 * core meanwhile, so its registers are those it had when the tick came) and
 * reported by the next tick (pt__report_late); any other stop of ours is resumed. */
static void on_status_any(struct pt_tracee *t, struct thread *th, int status)
{
	size_t idx = (size_t)(th - t->th);

	if (on_status(t, th, status) != EV_OURS)
		return;
	th = &t->th[idx];   /* add_thread may have moved the array */
	take_late(t, th);
}

#define REAP_MAX 4096   /* events per pt_tracer_poll: the sampler has more to do */

int pt_tracer_poll(struct pt_tracer *tr)
{
	struct { pid_t tid; int status; } later[64];
	int more = 1, nlater = 0, pending = 0;

	/* Not the tracer (no tracee of this thread): reap nothing, not even
	 * the thread's own children's exits, which are not ours to take. */
	if (!tr->tracees)
		return 0;
	tr->poll_ns = tr->woke_ns ? tr->woke_ns : pt__now_ns();
	tr->woke_ns = tr->late_from = 0;

	/* Stop reaping while later[] is full: a status taken must be acted on
	 * (a stop nobody resumes leaves its thread stopped). */
	for (int k = 0; k < REAP_MAX && nlater < 64; k++) {
		struct pt_tracee *x;
		struct thread *th;
		int status;
		pid_t r = waitpid(-1, &status, WNOHANG | __WALL | __WNOTHREAD);

		if (r <= 0) {
			more = 0;
			break;
		}
		if ((x = known(tr, r, &th))) {
			on_status_any(x, th, status);
		} else {
			later[nlater].tid = r;
			later[nlater++].status = status;
		}
	}
	for (int k = 0; k < nlater; k++) {
		struct pt_tracee *x;
		struct thread *th;

		if ((x = owner(tr, later[k].tid, &th))) {
			on_status_any(x, th, later[k].status);
		} else if (WIFSTOPPED(later[k].status)) {
			/* Traced by us, known to no tracee (its process was
			 * forgotten): let it go, with its signal if it had one. */
			int sig = (later[k].status >> 16) == 0 ? WSTOPSIG(later[k].status) : 0;

			ptrace(PTRACE_DETACH, later[k].tid, 0, (void *)(long)sig);
		}
	}
	for (struct pt_tracee *x = tr->tracees; x; x = x->next) {
		pt__compact(x);
		for (size_t i = 0; i < x->n && !pending; i++)
			pending = (x->th[i].flags & TH_LATE) != 0;
	}
	if (pending)
		tr->rq_base = own_rq_wait_ns(tr);   /* see poll_ns */
	return more;
}

/* Empties the (non-blocking) SIGCHLD signalfd. */
static void drain_wake(int fd)
{
	struct signalfd_siginfo si[16];

	while (read(fd, si, sizeof(si)) > 0) {
	}
}

static void wait_wake(int fd, uint64_t timeout_ns)
{
	struct pollfd p = { fd, POLLIN, 0 };
	struct timespec ts = { (time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u) };

	if (fd < 0) {
		nanosleep(&(struct timespec){ 0, 200000 }, NULL);
		return;
	}
	if (ppoll(&p, 1, &ts, NULL) > 0)
		drain_wake(fd);
}

int pt_tracee_detach(struct pt_tracee *t, uint64_t timeout_ns)
{
	uint64_t deadline = pt__now_ns() + timeout_ns;

	if (!t->attached)
		return 0;
	if (t->tr->tid != gettid()) {
		/* Called after the tracer thread ended (the sampler's shutdown):
		 * the kernel detached every thread when it exited. */
		for (size_t i = 0; i < t->n; i++)
			t->th[i].flags |= TH_GONE;
		pt__compact(t);
		t->attached = 0;
		return 0;
	}
	t->detaching = 1;
	t->nlate = 0;   /* late captures nobody is left to take */
	for (size_t i = 0; i < t->n; i++) {
		struct thread *th = &t->th[i];

		if (th->flags & (TH_GONE | TH_INTERRUPTING))
			continue;
		if (ptrace(PTRACE_INTERRUPT, th->tid, 0, 0) < 0 && errno == ESRCH) {
			/* Already dead: reap it if it is, else forget it. */
			if (poll_thread(t, th) == EV_NONE)
				th->flags |= TH_GONE;
			continue;
		}
		th->flags |= TH_INTERRUPTING;
	}
	for (;;) {
		size_t live = 0;

		pt_tracer_poll(t->tr);
		for (size_t i = 0; i < t->n; i++)
			live += !(t->th[i].flags & TH_GONE);
		if (!live || !t->attached)
			break;
		uint64_t now = pt__now_ns();

		if (now >= deadline)
			return -EINPROGRESS;
		wait_wake(t->tr->wake_fd, deadline - now < 5000000 ? deadline - now : 5000000);
	}
	t->attached = 0;
	t->detaching = 0;
	pt__compact(t);
	return 0;
}

/* A Go thread stopped in its signal handler (its SP on the signal stack
 * where an earlier unwind found Go's handler): the interrupted goroutine's
 * stack, from the SP in the kernel's signal frame, is copied in the same
 * stop, since the thread overwrites it as soon as the handler returns. A
 * frame that is not where it was last time (a nested signal) gives an SP
 * the unwind does not meet: the copy then goes unused. */
static void capture_interrupted(struct pt_tracee *t, struct thread *th, struct pt_capture *cap)
{
	uint64_t sp, pc;
	ssize_t n;

	if (!pt_capture_signal(cap, th->sig_uc, &sp, &pc) || (sp >= th->sig_lo && sp < th->sig_hi))
		return;
	if (!cap->sig_stack && !(cap->sig_stack = malloc(t->o.stack_bytes)))
		return;
	n = pt_mem_read_partial(t->pid, sp, cap->sig_stack, t->o.stack_bytes);
	if (n < 16)
		return;
	cap->sig_sp = sp;
	cap->sig_len = (size_t)n;
	cap->sig_limit = cap->sig_len == t->o.stack_bytes ? ((size_t)1 << 30) : 0;
	t->st.signal_copies++;
}

/* Captures registers and stack of a stopped thread into slot: as much stack
 * as its last unwind needed, with room to spare (see learn_stack), since
 * copying costs the stopped thread about a microsecond per page. With pyc,
 * a Python thread's frame chain too: it changes as soon as the thread runs,
 * so it is read now, in the same stop (python.h). */
static int capture(struct pt_tracee *t, struct thread *th, struct pt_capture *cap,
		   struct pt_py_cap *pyc)
{
	size_t want = th->stack_want ? th->stack_want : t->o.stack_bytes;
	ssize_t n;

	if (pyc)
		pyc->n = 0;
	if (ptrace(PTRACE_GETREGS, th->tid, 0, &cap->regs) < 0)
		return -errno;
	th->last_sp = cap->regs.rsp;
	n = pt_mem_read_partial(t->pid, cap->regs.rsp, cap->stack, want);
	cap->stack_len = n > 0 ? (size_t)n : 0;
	cap->stack_limit = cap->stack_len == want ? t->o.stack_bytes : 0;
	cap->sig_len = 0;
	if (th->sig_uc && cap->regs.rsp >= th->sig_lo && cap->regs.rsp < th->sig_uc)
		capture_interrupted(t, th, cap);
	if (pyc && th->py_tstate) {
		uint64_t t0 = pt__now_ns();

		if (pt_py_capture(t->py, th->py_tstate, th->py_nstid, th->py_bulk, cap, pyc) == -ESTALE)
			th->py_tstate = th->py_retry_ns = 0;   /* not its thread state any more */
		t->st.py_capture_ns += pt__now_ns() - t0;
		t->st.py_captures++;
	}
	return 0;
}

/* How long a thread whose thread state was not found waits before the
 * next look (a thread Python has not bound yet, or one that is not
 * Python's). */
#define PY_RETRY_NS 100000000ull

/* The tid the target knows th by (PyThreadState.native_thread_id). */
static pid_t thread_nstid(struct pt_tracee *t, struct thread *th)
{
	char path[96], buf[4096];
	pid_t ns;

	if (pt__nspid(t) == t->pid)
		return th->tid;   /* our PID namespace is the target's */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)t->pid, (int)th->tid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) < 0 || pt_proc_parse_nspid(buf, &ns))
		return th->tid;
	return ns;
}

/* Finds the interpreter, if the target runs one of a release we know. */
static void py_detect(struct pt_tracee *t)
{
	char note[sizeof(t->py_note)];
	enum pt_py_state st;

	if (!t->py || pt_py_state(t->py) == PT_PY_ACTIVE)
		return;
	st = pt_py_detect(t->py, t->maps, t->mods, note, sizeof(note));
	/* a slot per capture of a tick, and one for clone events */
	if (st == PT_PY_ACTIVE && !t->py_caps &&
	    !(t->py_caps = calloc((size_t)t->o.max_per_tick + 1, sizeof(*t->py_caps)))) {
		pt_py_reset(t->py);
		return;
	}
	if (note[0] && strcmp(note, t->py_note)) {
		memcpy(t->py_note, note, sizeof(t->py_note));
		t->py_noted = 0;
	}
}

/* Before a batch of stops: the thread states of the selected threads that
 * have none yet, in one walk of the interpreter's list (the target runs). */
static void py_prepare(struct pt_tracee *t, const size_t *sel, int nsel)
{
	pid_t ns[64];
	uint64_t ts[64], now;
	size_t idx[64];
	int k = 0;

	if (!t->py || pt_py_state(t->py) != PT_PY_ACTIVE)
		return;
	now = pt__now_ns();
	for (int i = 0; i < nsel && k < 64; i++) {
		struct thread *th;

		if (sel[i] == SIZE_MAX)
			continue;
		th = &t->th[sel[i]];
		if (th->py_tstate || now < th->py_retry_ns)
			continue;
		if (!th->py_nstid)
			th->py_nstid = thread_nstid(t, th);
		ns[k] = th->py_nstid;
		ts[k] = 0;
		idx[k++] = sel[i];
	}
	if (!k)
		return;
	pt_py_find_threads(t->py, ns, ts, (size_t)k);
	for (int j = 0; j < k; j++) {
		struct thread *th = &t->th[idx[j]];

		th->py_tstate = ts[j];
		th->py_retry_ns = ts[j] ? 0 : now + PY_RETRY_NS;
	}
}

/* Sizes a thread's next stack copy from what its last unwind read: twice
 * that plus a page, in pages. Grows at once, shrinks by an eighth at most
 * per sample (a thread that goes deeper now and then keeps its room); an
 * unwind that ran out of copy makes the next one whole (that sample's
 * stack ends where the copy did: counted, and incomplete). */
static void learn_stack(struct pt_tracee *t, struct thread *th, const struct pt_capture *cap)
{
	size_t cur = th->stack_want ? th->stack_want : t->o.stack_bytes;
	size_t need = (2 * cap->stack_used + 2 * 4096 - 1) & ~(size_t)4095;

	if (cap->stack_short) {
		t->st.short_copies++;
		th->stack_want = 0;
		return;
	}
	if (need < ((cur - cur / 8) & ~(size_t)4095))
		need = (cur - cur / 8) & ~(size_t)4095;
	th->stack_want = need >= t->o.stack_bytes ? 0 : need;
}

static uint64_t hash_fingerprint(const unsigned char *buf, ssize_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a */

	if (n <= 0)
		return 0;
	for (ssize_t i = 0; i < n; i++)
		h = (h ^ buf[i]) * 0x100000001b3ull;
	return h ? h : 1;
}

/* A fingerprint of the address space, 0 if unreadable: a hash of its ELF
 * auxiliary vector, which every exec writes anew (the addresses of the
 * stack's random bytes, of the vDSO and of the interpreter: randomized; the
 * entry point, the program headers). One read of /proc/<pid>/auxv costs a
 * third of a microsecond, /proc/<pid>/stat's code and stack addresses 2.8.
 * A leader that ended (pthread_exit) has no address space: then thread
 * `alt`'s (> 0). */
/* The fingerprint from /proc/<pid>/stat where auxv cannot be read (mode
 * 0400: a target of another uid, podprof without CAP_DAC_OVERRIDE): its
 * code and stack addresses (startcode, endcode, startstack: fields 26-28,
 * shown to a process that may ptrace it), which every exec randomizes. */
static uint64_t stat_fingerprint(pid_t pid, pid_t alt)
{
	char path[96], buf[1024];
	const char *s, *from = NULL;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)(alt > 0 ? alt : pid));
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || !(s = strrchr(buf, ')')))
		return 0;
	/* The k-th space after the ')' that ends field 2 comes before field k + 2. */
	for (int k = 1; k <= 27 && (s = strchr(s + 1, ' ')); k++)
		if (k == 24)
			from = s;
	return from && s ? hash_fingerprint((const unsigned char *)from, s - from) : 0;
}

static uint64_t mm_fingerprint(struct pt_tracee *t, pid_t alt)
{
	unsigned char buf[1024];
	char path[96];
	uint64_t fp = 0;

	if (t->auxv_fd >= 0)
		fp = hash_fingerprint(buf, pread(t->auxv_fd, buf, sizeof(buf), 0));
	if (!fp && alt > 0) {
		snprintf(path, sizeof(path), "/proc/%d/task/%d/auxv", (int)t->pid, (int)alt);
		fp = hash_fingerprint(buf, pt_proc_slurp(path, (char *)buf, sizeof(buf)));
	}
	if (!fp)
		fp = stat_fingerprint(t->pid, alt);
	return fp;
}

static void open_leader_auxv(struct pt_tracee *t)
{
	char path[64];

	if (t->auxv_fd >= 0)
		close(t->auxv_fd);
	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)t->pid);
	t->auxv_fd = open(path, O_RDONLY | O_CLOEXEC);
}

/* Unwinds captures 0..ncap. An address outside every mapping means the maps
 * may be stale (a library loaded since they were read, e.g. by the dynamic
 * loader right after an exec): read them again and redo the batch. If that
 * did not place the address (junk at the end of a frame-pointer chain), the
 * least time between such reads doubles, up to a second. */
static void unwind_batch(struct pt_tracee *t, int ncap)
{
	for (int pass = 0; pass < 2; pass++) {
		uint64_t miss, incomplete = 0;

		for (int k = 0; k < ncap; k++) {
			uint64_t t0 = pt__now_ns();
			int complete;

			t->nframes[k] = pt_unwind(t->unw, &t->caps[k],
						  t->frames + (size_t)k * t->o.max_frames,
						  t->o.max_frames, &complete);
			t->unwind_ns[k] = pt__now_ns() - t0;
			incomplete += !complete;
		}
		miss = pt_unwinder_take_miss(t->unw);
		if (pass == 0 && miss && pt__now_ns() >= t->maps_at_ns + t->maps_backoff_ns &&
		    pt_tracee_refresh_maps(t) == 0) {
			t->st.maps_rereads++;
			if (pt_maps_find(t->maps, miss)) {
				t->maps_backoff_ns = MAPS_BACKOFF_MIN_NS;
				continue;   /* the maps were stale: again, with the new ones */
			}
			t->maps_backoff_ns = t->maps_backoff_ns * 2 < MAPS_BACKOFF_MAX_NS ?
					     t->maps_backoff_ns * 2 : MAPS_BACKOFF_MAX_NS;
		}
		t->st.incomplete_stacks += incomplete;
		return;
	}
}

/* Keeps the stack of capture k in th's snapshot cache (pt_tracee_snapshot). */
static void keep_snapshot(struct pt_tracee *t, struct thread *th, int k, const struct pt_sample *smp)
{
	const struct pt_capture *cap = &t->caps[k];

	if (!th->snap && !(th->snap = malloc((size_t)t->o.max_frames * sizeof(*th->snap))))
		return;
	memcpy(th->snap, smp->frames, (size_t)smp->n * sizeof(*smp->frames));
	th->snap_n = smp->n;
	th->snap_ok = 1;
	th->snap_sp = cap->regs.rsp;
	th->snap_pc = cap->regs.rip;
	th->snap_syscall = smp->syscall;
	th->snap_restart = 1;
	t->st.snapshot_stops++;
}

/* 1 if the captures may be unwound against the address space we know: no
 * exec came before or during them. */
static int same_program(struct pt_tracee *t, int ncap)
{
	struct thread *leader;
	uint64_t mm_now;
	int status, same;

	/* An exec replaces the address space the captures point into, and it
	 * may have completed while we unwound: the leader's exec event tells.
	 * If it came, the stacks may be half old, half new: drop them. If it
	 * completes after this check, the unwind read only old memory. */
	if (!t->execed && (leader = pt__find_thread(t, t->pid)) &&
	    waitpid(t->pid, &status, WNOHANG | __WALL) > 0)
		on_status_any(t, leader, status);
	/* One read per batch: any change since the last check (an exec before
	 * or during these captures) drops them. */
	mm_now = mm_fingerprint(t, ncap ? t->th[t->slot_th[0]].tid : 0);
	same = !t->execed && mm_now && mm_now == t->mm_fp;
	t->mm_fp = mm_now;
	return same;
}

/* Unwinds captures 0..ncap (slots: t->slot_th, t->slot_pause), after every
 * thread runs again, and reports each. With `snap`, stacks are also kept in
 * each thread's snapshot cache. Returns the number reported. */
static int finish(struct pt_tracee *t, int ncap, int snap, const struct pt_tick_cbs *cbs)
{
	t->busy = 1;
	unwind_batch(t, ncap);
	if (!same_program(t, ncap))
		ncap = 0;
	for (int k = 0; k < ncap; k++) {
		struct thread *th = &t->th[t->slot_th[k]];
		const struct pt_capture *cap = &t->caps[k];
		uint64_t dt = t->unwind_ns[k];
		struct pt_sample smp;

		if (t->py_caps && t->py_caps[k].n) {
			uint64_t t0 = pt__now_ns();

			t->nframes[k] = pt_py_merge(t->py, &t->py_caps[k],
						    t->frames + (size_t)k * t->o.max_frames, t->nframes[k]);
			dt += pt__now_ns() - t0;
		}
		smp = (struct pt_sample){
			.pid = t->pid, .tid = th->tid, .comm = th->comm, .state = th->state,
			.syscall = (long)cap->regs.orig_rax >= 0 ? (int)cap->regs.orig_rax : -1,
			.frames = t->frames + (size_t)k * t->o.max_frames, .n = t->nframes[k],
			.cpu_ns = th->cpu_ns,
		};
		learn_stack(t, th, cap);
		if (cap->sig_uc) {
			th->sig_uc = cap->sig_uc;
			th->sig_lo = cap->sig_lo;
			th->sig_hi = cap->sig_hi;
		}
		t->st.thread_samples++;
		t->st.unwind_ns_total += dt;
		t->st.pause_ns_total += t->slot_pause[k];
		t->st.frames_total += (uint64_t)smp.n;
		if (snap)
			keep_snapshot(t, th, k, &smp);
		if (cbs->timing)
			cbs->timing(cbs->arg, t->slot_pause[k], dt);
		if (cbs->sample)
			cbs->sample(cbs->arg, &smp);
	}
	t->busy = 0;
	return ncap;
}

/* Resumes th from a stop of ours: our interrupt's, or a signal-delivery
 * stop taken for it, whose signal goes with it (see on_status). */
static void cont(struct thread *th)
{
	ptrace(PTRACE_CONT, th->tid, 0, (void *)(long)th->resume_sig);
	th->resume_sig = 0;
}

/* Captures th, stopped by us, into the next slot and resumes it. Returns 1
 * if the slot holds a sample: not for a tick's thread that stopped where it
 * waited for a core (see pt__preempted_at_tick, judged while it is still
 * stopped: its run delay and CPU as of the stop). */
static int take(struct pt_tracee *t, struct thread *th, int slot)
{
	struct pt_tracer *tr = t->tr;
	int ok = capture(t, th, &t->caps[slot], t->py_caps ? &t->py_caps[slot] : NULL) == 0;
	int late = th->t_interrupt <= tr->poll_ns, drop;
	uint64_t from = late ? tr->late_from : th->t_interrupt;

	/* A stop seen as it came (this tick's) came about now; a late one
	 * when it woke us (see poll_ns). */
	drop = ok && (th->flags & TH_TICK) &&
	       pt__preempted_at_tick(t, th, late ? tr->late_from : pt__now_ns(), &t->caps[slot].regs);
	cont(th);
	th->flags &= ~TH_TICK;
	t->slot_pause[slot] = pt__now_ns() - from;
	t->slot_th[slot] = (size_t)(th - t->th);
	t->st.stops++;
	if (drop)
		t->st.pause_ns_total += t->slot_pause[slot];   /* a pause all the same */
	return ok && !drop;
}

static void take_late(struct pt_tracee *t, struct thread *th)
{
	struct pt_tracer *tr = t->tr;
	int late = (th->flags & TH_LATE) && !t->busy && !t->detaching && !t->execed &&
		   t->nlate < t->o.max_per_tick;
	uint64_t t0 = pt__now_ns();

	th->flags &= ~(TH_WANTED | TH_LATE);
	if (!late) {
		cont(th);
		return;
	}
	if (!tr->late_from) {
		uint64_t waited = own_rq_wait_ns(tr) - tr->rq_base;

		tr->late_from = tr->poll_ns - (waited < tr->poll_ns ? waited : 0);
	}
	if (take(t, th, t->nlate))
		t->nlate++;
	tr->late_ns += pt__now_ns() - t0;
}

/* Late captures wait in their slots for the next tick (or a snapshot, or
 * pt_tracee_report_late): unwound and checked against an exec as one batch
 * rather than one at a time, as they come. A thread has at most one capture
 * pending and a tick selects at most max_per_tick threads, so they fit. */
void pt__report_late(struct pt_tracee *t)
{
	int n = t->nlate;

	if (!n || t->busy)
		return;
	t->nlate = 0;
	finish(t, n, 0, &t->late);
}

void pt_tracee_report_late(struct pt_tracee *t)
{
	pt__report_late(t);
}

uint64_t pt_tracer_take_late_ns(struct pt_tracer *tr)
{
	uint64_t ns = tr->late_ns;

	tr->late_ns = 0;
	return ns;
}

void pt_tracer_woke(struct pt_tracer *tr)
{
	tr->woke_ns = pt__now_ns();
}

/* Interrupts them all first: a stop is only delivered when the thread runs,
 * so waiting for each in turn would serialise their delays. Returns how many
 * stops are pending. */
static int interrupt_all(struct pt_tracee *t, size_t *sel, int nsel, int snap)
{
	int pending = 0;

	for (int i = 0; i < nsel; i++) {
		struct thread *th = &t->th[sel[i]];

		th->t_interrupt = pt__now_ns();
		if (ptrace(PTRACE_INTERRUPT, th->tid, 0, 0) < 0) {
			sel[i] = SIZE_MAX;
			continue;
		}
		th->flags &= ~TH_TICK;
		th->flags |= TH_INTERRUPTING | TH_WANTED | (snap ? 0 : TH_LATE | TH_TICK);
		pending++;
	}
	return pending;
}

/* Takes the stops that came among the selected threads: each is captured
 * into the next slot (*ncap) and resumed at once. Returns how many of the
 * pending stops it settled; *taken counts the captures among them. */
static int take_stops(struct pt_tracee *t, const size_t *sel, int nsel, int *ncap, int *taken)
{
	int settled = 0;

	for (int i = 0; i < nsel; i++) {
		struct thread *th;
		enum ev e;

		if (sel[i] == SIZE_MAX || !(t->th[sel[i]].flags & TH_WANTED))
			continue;
		e = poll_thread(t, &t->th[sel[i]]);
		th = &t->th[sel[i]];   /* a clone event may have moved the array */
		if ((e == EV_NONE || e == EV_HANDLED) && (th->flags & TH_INTERRUPTING))
			continue;
		/* Ours, gone, or group-stopped and otherwise consumed (no sample). */
		settled++;
		th->flags &= ~(TH_WANTED | TH_LATE);
		if (e != EV_OURS)
			continue;
		if (take(t, th, *ncap))
			(*ncap)++;
		(*taken)++;
	}
	return settled;
}

int pt__collect(struct pt_tracee *t, size_t *sel, int nsel, uint64_t wait_ns, uint64_t spin_ns,
		int snap, const struct pt_tick_cbs *cbs)
{
	uint64_t now, deadline, spin_end;
	int ncap = 0, pending, taken = 0, spun = 0;

	pt__report_late(t);
	py_prepare(t, sel, nsel);
	t->busy = 1;
	pending = interrupt_all(t, sel, nsel, snap);
	/* Collect each stop, capture, resume at once. A thread running on
	 * another core stops within microseconds; waiting for it in ppoll adds
	 * a wake-up of this thread to its pause, so poll for it instead,
	 * briefly, when that costs nobody a core (see pt__spare_core). The
	 * other pending threads are off-core (preempted, maybe by us): they
	 * stop only when scheduled, so once as many stops came as there are
	 * other cores, a tick leaves them to pt_tracer_poll and a snapshot
	 * sleeps until they come. */
	now = pt__now_ns();
	deadline = now + wait_ns;
	spin_end = now + spin_ns;
	while (pending > 0) {
		pending -= take_stops(t, sel, nsel, &ncap, &taken);
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
		 * work, which sets its rate (see ptrace/rate.c). */
		if (!snap)
			break;
		wait_wake(t->tr->wake_fd, deadline - now < 1000000 ? deadline - now : 1000000);
	}
	/* The stops we polled for each raised a SIGCHLD: take it now rather
	 * than wake the sampler loop for it (the loop polls after a tick
	 * anyway). */
	if (spun && t->tr->wake_fd >= 0)
		drain_wake(t->tr->wake_fd);
	for (int i = 0; i < nsel; i++)
		if (sel[i] != SIZE_MAX && (t->th[sel[i]].flags & TH_WANTED)) {
			if (snap)
				t->th[sel[i]].flags &= ~TH_WANTED;
			t->st.late_stops++;
		}
	return finish(t, ncap, snap, cbs);
}

int pt__read_state_fd(struct thread *th)
{
	struct pt_stat st;
	char buf[512];

	if (pt__pread_text(th->stat_fd, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, &st))
		return -ESRCH;
	th->state = st.state;
	snprintf(th->comm, sizeof(th->comm), "%.15s", st.comm);  /* TASK_COMM_LEN */
	th->comm_ns = pt__now_ns();
	return 0;
}

int pt__read_stat(const struct pt_tracee *t, const struct thread *th, struct pt_stat *st)
{
	char path[96], buf[512];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)t->pid, (int)th->tid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, st))
		return -ESRCH;
	return 0;
}

int pt__read_state(struct pt_tracee *t, struct thread *th)
{
	struct pt_stat st;

	if (pt__read_stat(t, th, &st))
		return -ESRCH;
	th->state = st.state;
	snprintf(th->comm, sizeof(th->comm), "%.15s", st.comm);  /* TASK_COMM_LEN */
	th->comm_ns = pt__now_ns();
	return 0;
}
