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
#include "ptrace/unwind.h"

#define TH_INTERRUPTING 0x01u   /* PTRACE_INTERRUPT sent, stop not yet seen */
#define TH_GROUPSTOP    0x02u   /* in group-stop, restarted with PTRACE_LISTEN */
#define TH_GONE         0x04u   /* exited or detached; dropped at the next compaction */
#define TH_WANTED       0x08u   /* selected in this tick: capture at its stop */
#define TH_LATE         0x10u   /* a tick's: if it stops after the tick, capture it then */

struct thread {
	pid_t tid;
	unsigned int flags;
	int sys_fd, sched_fd;    /* /proc/<pid>/task/<tid>/syscall, schedstat */
	uint64_t last_run_ns;
	uint64_t moved_at;       /* when a tick last saw its CPU move (see pt_tracee_tick) */
	uint64_t t_interrupt;
	uint64_t cpu_ns;         /* the weight of its pending sample: CPU since its last one */
	uint64_t acc_ns;         /* CPU used since its last tick-sample */
	uint64_t credit_ns;      /* CPU not yet paid for by a sample (see pt_tracee_tick) */
	char comm[16];           /* thread name, read at most once a second */
	uint64_t comm_ns;        /* when comm was read */
	char state;              /* R S D ... as of its last selection */
	size_t stack_want;       /* stack to copy at its next stop; 0: stack_bytes */
	uint64_t last_sp;        /* its stack pointer at its last stop */
	/* snapshot cache: the stack at the last snapshot stop */
	uint64_t *snap;          /* max_frames, allocated at the first snapshot */
	int snap_n, snap_syscall, snap_restart;
	uint64_t snap_run_ns, snap_sp, snap_pc;
};

struct pt_tracee {
	struct pt_tracee *next;  /* this thread's tracees (see `tracees`) */
	pid_t tracer;            /* the thread that attached: the only one that can wait */
	pid_t pid;
	struct pt_tracee_opts o;
	int attached, detaching, gone, execed;
	struct thread *th;
	size_t n, cap;
	size_t rr;               /* round-robin start of the next tick's selection */
	uint64_t pcpu_last;      /* the process's CPU clock at the last tick, 0: unknown */
	uint64_t full_at;        /* when a tick last looked at every thread */
	int ncpu;                /* cores online */
	int spin_slots;          /* stops that may come from other cores: spin for these */
	uint64_t mm_fp;          /* address-space fingerprint at the last check */
	int auxv_fd;             /* the leader's /proc auxv, for mm_fp */
	struct pt_maps *maps;
	struct pt_mem *mem;
	struct pt_modules *mods;
	struct pt_unwinder *unw;
	struct pt_capture *caps; /* max_per_tick slots */
	uint64_t *frames;        /* max_frames per slot */
	int *nframes;
	uint64_t *unwind_ns;     /* per slot */
	size_t *slot_th;         /* per slot: the captured thread's index */
	uint64_t *slot_pause;    /* per slot: interrupt sent .. resumed */
	int nlate;               /* slots holding late captures, not yet reported */
	int busy;                /* collecting: slots in use, no late captures */
	pt_sample_cb late_cb;    /* where late captures go: the last tick's */
	pt_timing_cb late_tcb;
	void *late_arg;
	uint64_t maps_at_ns;     /* last /proc/<pid>/maps read */
	uint64_t maps_backoff_ns;  /* least time between reads forced by a miss */
	struct pt_tracee_stats st;
	/* JIT symbols (perf map): reloaded at most once per maps refresh, and
	 * only when the file changed */
	struct pt_perfmap *pm;
	pid_t nspid;
	int pm_checked;
	struct stat pm_st;
};

static uint64_t mm_fingerprint(struct pt_tracee *t, pid_t alt);
static void open_leader_auxv(struct pt_tracee *t);

/* The tracees of the calling thread (the sampler thread: the tracer of their
 * threads). waitpid(-1, __WNOTHREAD) reaps the events of all of them at
 * once, one system call per event rather than one per thread; each event
 * goes to the tracee that holds its thread. */
static __thread struct pt_tracee *tracees;
/* A stop that came after its tick happened when its thread got a core and
 * woke us; its pause counts from then: from our wake-up (pt_tracee_woke, or
 * when this pt_tracee_poll began: poll_ns), less the time we spent runnable
 * before we ran. That is the growth of our own run_delay
 * (/proc/thread-self/schedstat) since we last went to sleep with late stops
 * to come (rq_base), read once per wake-up that takes a late stop
 * (late_from, 0 until then). */
static __thread uint64_t poll_ns, late_from, rq_base, woke_ns;
/* Time this thread spent taking stops after their tick: see
 * pt_tracee_take_late_ns. */
static __thread uint64_t late_ns;
static __thread int self_sched_fd = -1;
static __thread int loadavg_fd = -1;

/* Reads an open /proc text file from its start, NUL-terminated (one pread:
 * /proc answers a small file whole). Returns its length, or <= 0. */
static ssize_t pread_text(int fd, char *buf, size_t len)
{
	ssize_t n = fd >= 0 ? pread(fd, buf, len - 1, 0) : -1;

	if (n >= 0)
		buf[n] = '\0';
	return n;
}

/* pread_text of a file the calling thread opens at its first read (*fd is
 * -1 until then; see pt_tracee_thread_end). */
static ssize_t pread_own(int *fd, const char *path, char *buf, size_t len)
{
	if (*fd < 0)
		*fd = open(path, O_RDONLY | O_CLOEXEC);
	return pread_text(*fd, buf, len);
}

static uint64_t own_rq_wait_ns(void)
{
	char buf[128];
	uint64_t run, wait;

	if (pread_own(&self_sched_fd, "/proc/thread-self/schedstat", buf, sizeof(buf)) <= 0)
		return 0;
	return pt_proc_parse_schedstat(buf, &run, &wait) ? 0 : wait;
}

#define MAPS_BACKOFF_MIN_NS 10000000ull     /* 10 ms */
#define MAPS_BACKOFF_MAX_NS 1000000000ull   /* 1 s */

int pt_tracee_new(struct pt_tracee **out, pid_t pid, const struct pt_tracee_opts *opts)
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
	t->next = tracees;
	tracees = t;
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
	th->sys_fd = th->sched_fd = -1;
	th->flags |= TH_GONE;
}

void pt_tracee_free(struct pt_tracee *t)
{
	if (!t)
		return;
	if (t->attached)
		pt_tracee_detach(t, 2000000000ull);
	for (struct pt_tracee **pp = &tracees; *pp; pp = &(*pp)->next)
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
			free(t->caps[i].stack);
	free(t->caps);
	free(t->frames);
	free(t->nframes);
	free(t->unwind_ns);
	free(t->slot_th);
	free(t->slot_pause);
	pt_unwinder_free(t->unw);
	pt_modules_free(t->mods);
	pt_mem_free(t->mem);
	pt_maps_free(t->maps);
	pt_perfmap_free(t->pm);
	free(t);
}

pid_t pt_tracee_pid(const struct pt_tracee *t) { return t->pid; }
int pt_tracee_attached(const struct pt_tracee *t) { return t->attached; }
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

static struct thread *find_thread(struct pt_tracee *t, pid_t tid)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->th[i].tid == tid && !(t->th[i].flags & TH_GONE))
			return &t->th[i];
	return NULL;
}

/* A thread not yet looked at by a tick: sampled at its first look if it is
 * running then, whatever its CPU (so a thread living for less than a period,
 * a churned worker, is sampled when caught running); else it starts from
 * no credit. */
#define NEW_CREDIT UINT64_MAX

static int read_run_ns(struct thread *th, uint64_t *run_ns)
{
	char buf[128];

	if (pread_text(th->sched_fd, buf, sizeof(buf)) <= 0)
		return -ESRCH;
	return pt_proc_parse_schedstat(buf, run_ns, NULL) ? -EBADMSG : 0;
}

static void reopen_thread(struct pt_tracee *t, struct thread *th)
{
	char path[96];

	if (th->sys_fd >= 0)
		close(th->sys_fd);
	if (th->sched_fd >= 0)
		close(th->sched_fd);
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)t->pid, (int)th->tid);
	th->sys_fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)t->pid, (int)th->tid);
	th->sched_fd = open(path, O_RDONLY | O_CLOEXEC);
	th->last_run_ns = th->acc_ns = th->comm_ns = 0;
	th->credit_ns = NEW_CREDIT;
	th->moved_at = pt__now_ns();
	free(th->snap);          /* a new program (exec): old stacks mean nothing */
	th->snap = NULL;
	if (th->sched_fd >= 0)
		read_run_ns(th, &th->last_run_ns);
}

static int add_thread(struct pt_tracee *t, pid_t tid)
{
	struct thread *th;

	if (find_thread(t, tid))
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
	th->sys_fd = th->sched_fd = -1;
	reopen_thread(t, th);
	t->n++;
	return 0;
}

/* Drops threads marked gone (never during an iteration over t->th). */
static void compact(struct pt_tracee *t)
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
	t->attached = 1;
	t->tracer = gettid();
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
			if (find_thread(t, tids[i]))
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

/* Acts on one waitpid status of th. Returns EV_OURS when th is stopped by our
 * PTRACE_INTERRUPT and the caller must resume it. */
static enum ev on_status(struct pt_tracee *t, struct thread *th, int status)
{
	int sig, event;

	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		if (th->tid == t->pid)
			t->gone = 1;
		th->flags |= TH_GONE;
		return EV_GONE;
	}
	if (!WIFSTOPPED(status))
		return EV_NONE;
	sig = WSTOPSIG(status);
	event = status >> 16;
	switch (event) {
	case PTRACE_EVENT_STOP:
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
		if (t->detaching) {
			detach_thread(t, th, 0);
			return EV_GONE;
		}
		if (th->flags & TH_INTERRUPTING) {
			th->flags &= ~TH_INTERRUPTING;
			if (th->flags & TH_WANTED)
				return EV_OURS;
		}
		/* A new thread's first stop, a late interrupt, or the end of a
		 * group-stop seen through PTRACE_LISTEN. */
		ptrace(PTRACE_CONT, th->tid, 0, 0);
		return EV_HANDLED;
	case PTRACE_EVENT_CLONE: {
		unsigned long newtid = 0;
		size_t idx = (size_t)(th - t->th);

		if (ptrace(PTRACE_GETEVENTMSG, th->tid, 0, &newtid) == 0 && newtid > 0) {
			t->st.clones++;
			if (add_thread(t, (pid_t)newtid) < 0) {
				/* Over the cap: let it go untraced rather than stopped. */
				ptrace(PTRACE_DETACH, (pid_t)newtid, 0, 0);
			}
			th = &t->th[idx];   /* add_thread may have moved the array */
		}
		if (t->detaching) {
			detach_thread(t, th, 0);
			return EV_GONE;
		}
		ptrace(PTRACE_CONT, th->tid, 0, 0);
		return EV_HANDLED;
	}
	case PTRACE_EVENT_EXEC:
		/* The old program's modules stay as they are (frozen: no new
		 * ones from the new program's memory) until the sessions that
		 * sampled it have ended; see pt_tracee_ack_exec(). */
		t->execed = 1;
		t->st.execs++;
		pt_modules_freeze(t->mods, 1);
		/* This tid is now the thread that called exec (it took the
		 * leader's tid): whatever we sent the old leader is moot, and our
		 * /proc fds point at the dead task. A stop still pending for the
		 * new one arrives later as a stray EVENT_STOP and is resumed. */
		th->flags &= ~(TH_INTERRUPTING | TH_WANTED | TH_GROUPSTOP);
		reopen_thread(t, th);
		open_leader_auxv(t);
		if (t->detaching) {
			detach_thread(t, th, 0);
			return EV_GONE;
		}
		ptrace(PTRACE_CONT, th->tid, 0, 0);
		return EV_HANDLED;
	default:
		/* Signal-delivery-stop: the signal was meant for the target.
		 * Deliver it exactly once, now (or on detach). */
		t->st.signals_reinjected++;
		if (t->detaching) {
			detach_thread(t, th, sig);
			return EV_GONE;
		}
		ptrace(PTRACE_CONT, th->tid, 0, (void *)(long)sig);
		return EV_HANDLED;
	}
}

static void take_late(struct pt_tracee *t, struct thread *th);
static void report_late(struct pt_tracee *t);

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

static struct pt_tracee *known(pid_t tid, struct thread **thp)
{
	for (struct pt_tracee *x = tracees; x; x = x->next)
		if ((*thp = find_thread(x, tid)))
			return x;
	return NULL;
}

/* The tracee and thread of an event that no tracee knew while its batch was
 * reaped: usually a new thread whose first stop came before its parent's
 * clone event, registered since; else it joins its process's tracee here.
 * NULL if no tracee holds it. */
static struct pt_tracee *owner(pid_t tid, struct thread **thp)
{
	char path[64], buf[2048];
	long long tgid;
	struct pt_tracee *x = known(tid, thp);

	if (x)
		return x;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_status_value(buf, "Tgid", &tgid))
		return NULL;
	for (x = tracees; x; x = x->next)
		if (x->pid == (pid_t)tgid && x->attached && add_thread(x, tid) == 0 &&
		    (*thp = find_thread(x, tid)))
			return x;
	return NULL;
}

/* Acts on a status wherever it was reaped: our stop of a thread that a tick
 * selected but that stopped after the tick is captured now (it was not on a
 * core meanwhile, so its registers are those it had when the tick came) and
 * reported by the next tick (report_late); any other stop of ours is resumed. */
static void on_status_any(struct pt_tracee *t, struct thread *th, int status)
{
	size_t idx = (size_t)(th - t->th);

	if (on_status(t, th, status) != EV_OURS)
		return;
	th = &t->th[idx];   /* add_thread may have moved the array */
	take_late(t, th);
}

#define REAP_MAX 4096   /* events per pt_tracee_poll: the sampler has more to do */

int pt_tracee_poll(void)
{
	struct { pid_t tid; int status; } later[64];
	int more = 1, nlater = 0, pending = 0;

	/* Not the tracer (no tracee of this thread): reap nothing, not even
	 * the thread's own children's exits, which are not ours to take. */
	if (!tracees)
		return 0;
	poll_ns = woke_ns ? woke_ns : pt__now_ns();
	woke_ns = late_from = 0;

	for (int k = 0; k < REAP_MAX; k++) {
		struct pt_tracee *x;
		struct thread *th;
		int status;
		pid_t r = waitpid(-1, &status, WNOHANG | __WALL | __WNOTHREAD);

		if (r <= 0) {
			more = 0;
			break;
		}
		if ((x = known(r, &th)))
			on_status_any(x, th, status);
		else if (nlater < 64) {
			later[nlater].tid = r;
			later[nlater++].status = status;
		} else {
			break;   /* `more` stays set */
		}
	}
	for (int k = 0; k < nlater; k++) {
		struct pt_tracee *x;
		struct thread *th;

		if ((x = owner(later[k].tid, &th))) {
			on_status_any(x, th, later[k].status);
		} else if (WIFSTOPPED(later[k].status)) {
			/* Traced by us, known to no tracee (its process was
			 * forgotten): let it go, with its signal if it had one. */
			int sig = (later[k].status >> 16) == 0 ? WSTOPSIG(later[k].status) : 0;

			ptrace(PTRACE_DETACH, later[k].tid, 0, (void *)(long)sig);
		}
	}
	for (struct pt_tracee *x = tracees; x; x = x->next) {
		compact(x);
		for (size_t i = 0; i < x->n && !pending; i++)
			pending = (x->th[i].flags & TH_LATE) != 0;
	}
	if (pending)
		rq_base = own_rq_wait_ns();   /* see poll_ns */
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
	if (t->tracer != gettid()) {
		/* Called after the tracer thread ended (the sampler's shutdown):
		 * the kernel detached every thread when it exited. */
		for (size_t i = 0; i < t->n; i++)
			t->th[i].flags |= TH_GONE;
		compact(t);
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

		pt_tracee_poll();
		for (size_t i = 0; i < t->n; i++)
			live += !(t->th[i].flags & TH_GONE);
		if (!live || !t->attached)
			break;
		uint64_t now = pt__now_ns();

		if (now >= deadline)
			return -EINPROGRESS;
		wait_wake(t->o.wake_fd, deadline - now < 5000000 ? deadline - now : 5000000);
	}
	t->attached = 0;
	t->detaching = 0;
	compact(t);
	return 0;
}

/* Captures registers and stack of a stopped thread into slot: as much stack
 * as its last unwind needed, with room to spare (see learn_stack), since
 * copying costs the stopped thread about a microsecond per page. */
static int capture(struct pt_tracee *t, struct thread *th, struct pt_capture *cap)
{
	size_t want = th->stack_want ? th->stack_want : t->o.stack_bytes;
	ssize_t n;

	if (ptrace(PTRACE_GETREGS, th->tid, 0, &cap->regs) < 0)
		return -errno;
	th->last_sp = cap->regs.rsp;
	n = pt_mem_read_partial(t->pid, cap->regs.rsp, cap->stack, want);
	cap->stack_len = n > 0 ? (size_t)n : 0;
	cap->stack_limit = cap->stack_len == want ? t->o.stack_bytes : 0;
	return 0;
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

/* Unwinds captures 0..ncap (slots: t->slot_th, t->slot_pause), after every
 * thread runs again, and reports each. With `snap`, stacks are also kept in
 * each thread's snapshot cache. Returns the number reported. */
static int finish(struct pt_tracee *t, int ncap, int snap, pt_sample_cb cb, pt_timing_cb tcb,
		  void *arg)
{
	struct thread *leader;
	uint64_t mm_now;
	int status;

	t->busy = 1;
	unwind_batch(t, ncap);
	/* An exec replaces the address space the captures point into, and it
	 * may have completed while we unwound: the leader's exec event tells.
	 * If it came, the stacks may be half old, half new: drop them. If it
	 * completes after this check, the unwind read only old memory. */
	if (!t->execed && (leader = find_thread(t, t->pid)) &&
	    waitpid(t->pid, &status, WNOHANG | __WALL) > 0)
		on_status_any(t, leader, status);
	/* One read per batch: any change since the last check (an exec before
	 * or during these captures) drops them. */
	mm_now = mm_fingerprint(t, ncap ? t->th[t->slot_th[0]].tid : 0);
	if (t->execed || !mm_now || mm_now != t->mm_fp)
		ncap = 0;
	t->mm_fp = mm_now;
	for (int k = 0; k < ncap; k++) {
		struct thread *th = &t->th[t->slot_th[k]];
		const struct pt_capture *cap = &t->caps[k];
		uint64_t dt = t->unwind_ns[k];
		const uint64_t *f = t->frames + (size_t)k * t->o.max_frames;
		struct pt_sample smp = {
			.pid = t->pid, .tid = th->tid, .comm = th->comm, .state = th->state,
			.syscall = (long)cap->regs.orig_rax >= 0 ? (int)cap->regs.orig_rax : -1,
			.frames = f, .n = t->nframes[k], .cpu_ns = th->cpu_ns,
		};

		learn_stack(t, th, &t->caps[k]);
		t->st.thread_samples++;
		t->st.unwind_ns_total += dt;
		t->st.pause_ns_total += t->slot_pause[k];
		t->st.frames_total += (uint64_t)smp.n;
		if (snap) {
			if (!th->snap && !(th->snap = malloc((size_t)t->o.max_frames * sizeof(*th->snap))))
				continue;
			memcpy(th->snap, f, (size_t)smp.n * sizeof(*f));
			th->snap_n = smp.n;
			th->snap_sp = cap->regs.rsp;
			th->snap_pc = cap->regs.rip;
			th->snap_syscall = smp.syscall;
			th->snap_restart = 1;
			t->st.snapshot_stops++;
		}
		if (tcb)
			tcb(arg, t->slot_pause[k], dt);
		if (cb)
			cb(arg, &smp);
	}
	t->busy = 0;
	return ncap;
}

/* Captures th, stopped by us, into the next slot and resumes it. */
static int take(struct pt_tracee *t, struct thread *th, int slot)
{
	int ok = capture(t, th, &t->caps[slot]) == 0;

	ptrace(PTRACE_CONT, th->tid, 0, 0);
	t->slot_pause[slot] = pt__now_ns() - (th->t_interrupt > poll_ns ? th->t_interrupt : late_from);
	t->slot_th[slot] = (size_t)(th - t->th);
	t->st.stops++;
	return ok;
}

static void take_late(struct pt_tracee *t, struct thread *th)
{
	int late = (th->flags & TH_LATE) && !t->busy && !t->detaching && !t->execed &&
		   t->nlate < t->o.max_per_tick;
	uint64_t t0 = pt__now_ns();

	th->flags &= ~(TH_WANTED | TH_LATE);
	if (!late) {
		ptrace(PTRACE_CONT, th->tid, 0, 0);
		return;
	}
	if (!late_from) {
		uint64_t waited = own_rq_wait_ns() - rq_base;

		late_from = poll_ns - (waited < poll_ns ? waited : 0);
	}
	if (take(t, th, t->nlate))
		t->nlate++;
	late_ns += pt__now_ns() - t0;
}

/* Late captures wait in their slots for the next tick (or a snapshot, or
 * pt_tracee_report_late): unwound and checked against an exec as one batch
 * rather than one at a time, as they come. A thread has at most one capture
 * pending and a tick selects at most max_per_tick threads, so they fit. */
static void report_late(struct pt_tracee *t)
{
	int n = t->nlate;

	t->nlate = 0;
	finish(t, n, 0, t->late_cb, t->late_tcb, t->late_arg);
}

void pt_tracee_report_late(struct pt_tracee *t)
{
	if (t->nlate && !t->busy)
		report_late(t);
}

uint64_t pt_tracee_take_late_ns(void)
{
	uint64_t ns = late_ns;

	late_ns = 0;
	return ns;
}

void pt_tracee_woke(void)
{
	woke_ns = pt__now_ns();
}

void pt_tracee_thread_end(void)
{
	if (self_sched_fd >= 0)
		close(self_sched_fd);
	if (loadavg_fd >= 0)
		close(loadavg_fd);
	self_sched_fd = loadavg_fd = -1;
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

	if (pread_own(&loadavg_fd, "/proc/loadavg", buf, sizeof(buf)) <= 0)
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

/* Interrupts the selected threads (indices into t->th), captures each as it
 * stops, resumes it at once, then unwinds offline and reports each (see
 * finish). A tick waits for stops only while it spins (see below); a
 * snapshot waits up to wait_ns. A tick's thread that stops later is captured
 * then (take_late); a snapshot's is resumed without a sample. Never queued:
 * an interrupted thread is not selected again before its stop. Returns the
 * number of captures reported now. */
static int collect(struct pt_tracee *t, size_t *sel, int nsel, uint64_t wait_ns, int snap,
		   pt_sample_cb cb, pt_timing_cb tcb, void *arg)
{
	uint64_t now, deadline, spin_end, spin_ns;
	int ncap = 0, pending = 0, spin_left, spun = 0;

	if (t->nlate)
		report_late(t);
	t->busy = 1;
	spin_ns = t->o.spin_ns && spare_core(t) ? t->o.spin_ns : 0;
	warm_stacks(t, sel, nsel);
	/* 1. Interrupt them all first: a stop is only delivered when the thread
	 *    runs, so waiting for each in turn would serialise their delays. */
	for (int i = 0; i < nsel; i++) {
		struct thread *th = &t->th[sel[i]];

		th->t_interrupt = pt__now_ns();
		if (ptrace(PTRACE_INTERRUPT, th->tid, 0, 0) < 0) {
			sel[i] = SIZE_MAX;
			continue;
		}
		th->flags |= TH_INTERRUPTING | TH_WANTED | (snap ? 0 : TH_LATE);
		pending++;
	}
	/* 2. Collect each stop, capture, resume at once. A thread running on
	 *    another core stops within microseconds; waiting for it in ppoll
	 *    adds a wake-up of this thread to its pause, so poll for it instead,
	 *    briefly, when that costs nobody a core (spare_core). The other
	 *    pending threads are off-core (preempted, maybe by us): they stop
	 *    only when scheduled, so once as many stops came as there are other
	 *    cores, a tick leaves them to pt_tracee_poll and a snapshot sleeps
	 *    until they come. */
	now = pt__now_ns();
	deadline = now + wait_ns;
	spin_end = now + spin_ns;
	spin_left = t->spin_slots;
	while (pending > 0) {
		for (int i = 0; i < nsel; i++) {
			struct thread *th;
			enum ev e;

			if (sel[i] == SIZE_MAX || !(t->th[sel[i]].flags & TH_WANTED))
				continue;
			e = poll_thread(t, &t->th[sel[i]]);
			th = &t->th[sel[i]];
			if (e == EV_NONE || e == EV_HANDLED) {
				if (th->flags & TH_INTERRUPTING)
					continue;
				/* Group-stopped or otherwise consumed: no sample. */
				th->flags &= ~(TH_WANTED | TH_LATE);
				pending--;
				continue;
			}
			pending--;
			th->flags &= ~(TH_WANTED | TH_LATE);
			if (e == EV_GONE)
				continue;
			/* e == EV_OURS */
			if (take(t, th, ncap))
				ncap++;
			spin_left--;
		}
		if (pending <= 0)
			break;
		now = pt__now_ns();
		if (now >= deadline)
			break;
		if (spin_left > 0 && now < spin_end) {
			spun = 1;
			continue;
		}
		/* A tick does not sleep on the rest: they are captured as they
		 * come (pt_tracee_poll), and a tick's length is the sampler's
		 * work, which sets its rate (see adapt_rate). */
		if (!snap)
			break;
		wait_wake(t->o.wake_fd, deadline - now < 1000000 ? deadline - now : 1000000);
	}
	/* The stops we polled for each raised a SIGCHLD: take it now rather
	 * than wake the sampler loop for it (the loop polls after a tick
	 * anyway). */
	if (spun && t->o.wake_fd >= 0)
		drain_wake(t->o.wake_fd);
	for (int i = 0; i < nsel; i++)
		if (sel[i] != SIZE_MAX && (t->th[sel[i]].flags & TH_WANTED)) {
			if (snap)
				t->th[sel[i]].flags &= ~TH_WANTED;
			t->st.late_stops++;
		}
	return finish(t, ncap, snap, cb, tcb, arg);
}

/* Reads state and name from /proc/<tid>/stat. Returns 0 or -1. */
static int read_state(struct pt_tracee *t, struct thread *th)
{
	struct pt_stat st;
	char path[96], buf[512];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)t->pid, (int)th->tid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, &st))
		return -1;
	th->state = st.state;
	snprintf(th->comm, sizeof(th->comm), "%.15s", st.comm);  /* TASK_COMM_LEN */
	th->comm_ns = pt__now_ns();
	return 0;
}

/* 1 if th is runnable (state R) now. /proc/<tid>/syscall says "running"
 * for exactly that, for a third of the cost of /proc/<tid>/stat. The name
 * comes from stat, at most once a second (threads rename themselves rarely,
 * and mostly right after they start). */
static int is_running(struct pt_tracee *t, struct thread *th)
{
	char buf[16];
	ssize_t n = pread(th->sys_fd, buf, sizeof(buf), 0);

	if (n < 7 || memcmp(buf, "running", 7))
		return 0;
	if (!th->comm[0] || pt__now_ns() - th->comm_ns > 1000000000ull)
		read_state(t, th);   /* the caller sets the state it saw: R */
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
		uint64_t *moved)
{
	uint64_t run, need = cpu_period_ns;

	if (th->flags & (TH_GONE | TH_GROUPSTOP) || read_run_ns(th, &run) || run <= th->last_run_ns)
		return 0;
	th->moved_at = now;
	*moved += run - th->last_run_ns;
	if (th->credit_ns == NEW_CREDIT)
		th->credit_ns = need = 0;
	th->acc_ns += run - th->last_run_ns;
	th->credit_ns += run - th->last_run_ns;
	th->last_run_ns = run;
	if (th->flags & TH_INTERRUPTING || th->credit_ns < need || !is_running(t, th))
		return 0;
	/* schedstat moves only at scheduler ticks and switches (every 4 ms at
	 * HZ=250) for a thread that keeps its core, so credit comes in lumps:
	 * keep up to four periods of it, no more (a thread found running after
	 * a long wait is not sampled at every tick after). */
	th->credit_ns -= th->credit_ns < cpu_period_ns ? th->credit_ns : cpu_period_ns;
	if (th->credit_ns > 4 * cpu_period_ns)
		th->credit_ns = 4 * cpu_period_ns;
	th->cpu_ns = th->acc_ns;
	th->acc_ns = 0;
	th->state = 'R';
	return 1;
}

/* Every thread is looked at this often at least, and a thread whose CPU
 * moved within QUIET_NS at every tick (see pt_tracee_tick). */
#define FULL_LOOK_NS 100000000ull
#define QUIET_NS 20000000ull

int pt_tracee_tick(struct pt_tracee *t, uint64_t cpu_period_ns, pt_sample_cb cb, pt_timing_cb tcb,
		   void *arg)
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
	if (t->nlate)
		report_late(t);
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
			if (look(t, th, cpu_period_ns, now, &moved))
				sel[nsel++] = i;
		}
	}
	/* A pass cut short by `max` left CPU unaccounted: the next tick reads all. */
	t->pcpu_last = nsel < max ? pcpu : 0;
	t->late_cb = cb;
	t->late_tcb = tcb;
	t->late_arg = arg;
	ncap = collect(t, sel, nsel, t->o.spin_ns, 0, cb, tcb, arg);
	compact(t);
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

	if (!th->snap || run < th->snap_run_ns)
		return 0;
	if (run == th->snap_run_ns)
		return 1;
	if (!th->snap_restart || run - th->snap_run_ns > RESTART_SLACK_NS || th->snap_syscall < 0)
		return 0;
	th->snap_restart = 0;
	if (pread_text(th->sys_fd, buf, sizeof(buf)) <= 0)
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

int pt_tracee_snapshot(struct pt_tracee *t, uint64_t wait_ns, pt_sample_cb cb, void *arg,
		       int *stopped)
{
	size_t sel[256], count = 0, next = 0;
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
			struct thread *th = find_thread(t, tids[next]);
			uint64_t run;

			if (!th || (th->flags & TH_INTERRUPTING))
				continue;
			/* Group-stopped, or blocked since its last snapshot: its
			 * last stack, without a stop. */
			if (th->flags & TH_GROUPSTOP) {
				report_cached(t, th, 'T', -1, cb, arg);
				reported++;
				continue;
			}
			if (read_run_ns(th, &run))
				continue;
			if (snap_still_valid(th, run)) {
				report_cached(t, th, th->state, th->snap_syscall, cb, arg);
				t->st.snapshot_reused++;
				reported++;
				continue;
			}
			if (read_state(t, th))
				continue;
			th->snap_run_ns = run;
			th->cpu_ns = 0;
			sel[nsel++] = (size_t)(th - t->th);
		}
		if (nsel) {
			int n = collect(t, sel, nsel, wait_ns, 1, cb, NULL, arg);

			*stopped += nsel;
			reported += n;
		}
		compact(t);
	}
	free(tids);
	return reported;
}

/* Loads the target's perf map if it changed since the last load. A file
 * still being appended to is read up to its last complete line. */
static void perfmap_refresh(struct pt_tracee *t)
{
	struct pt_perfmap *pm;
	struct stat st;
	char *text = NULL;
	size_t len = 0, want;
	int fd;

	t->pm_checked = 1;
	if (!t->nspid) {
		char path[64], buf[4096];

		snprintf(path, sizeof(path), "/proc/%d/status", (int)t->pid);
		if (pt_proc_slurp(path, buf, sizeof(buf)) < 0 || pt_proc_parse_nspid(buf, &t->nspid))
			t->nspid = t->pid;
	}
	fd = pt_perfmap_open(t->pid, t->nspid);
	if (fd < 0)
		return;   /* none (the usual case), or not a regular file: keep what we had */
	if (fstat(fd, &st) < 0 || (st.st_ino == t->pm_st.st_ino && st.st_dev == t->pm_st.st_dev &&
				   st.st_size == t->pm_st.st_size &&
				   st.st_mtim.tv_sec == t->pm_st.st_mtim.tv_sec &&
				   st.st_mtim.tv_nsec == t->pm_st.st_mtim.tv_nsec))
		goto out;
	want = st.st_size > (off_t)PT_PERFMAP_MAX_BYTES ? PT_PERFMAP_MAX_BYTES : (size_t)st.st_size;
	if (!(text = malloc(want + 1)))
		goto out;
	while (len < want) {
		ssize_t n = read(fd, text + len, want - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	while (len && text[len - 1] != '\n')
		len--;
	if (pt_perfmap_parse(text, len, &pm, NULL) == 0) {
		pt_perfmap_free(t->pm);
		t->pm = pm;
		t->pm_st = st;
		t->st.perfmap_entries = pt_perfmap_count(pm);
	}
out:
	free(text);
	close(fd);
}

void pt_tracee_symbolize(struct pt_tracee *t, uint64_t addr, const char **name,
			 const struct pt_module **modp)
{
	struct pt_module *mod = pt_modules_find(t->mods, t->maps, addr);

	*name = mod ? pt_module_symbol(t->mods, mod, addr) : NULL;
	*modp = mod;
	if (!mod) {
		/* Anonymous memory: code a JIT wrote, named in its perf map. */
		if (!t->pm_checked)
			perfmap_refresh(t);
		*name = pt_perfmap_lookup(t->pm, addr);
	}
}

const char *pt_tracee_build_id(struct pt_tracee *t, uint64_t addr)
{
	struct pt_module *mod = pt_modules_find(t->mods, t->maps, addr);

	return mod ? mod->build_id : "";
}
