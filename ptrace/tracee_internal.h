/* The tracer's and a tracee's state, shared by the three files that make up
 * a tracee (STYLE H1: declarations shared only inside ptrace/):
 *   tracee.c     the ptrace mechanism: attach, detach, waitpid and events,
 *                interrupt, capture, resume, unwind and report;
 *   rule.c       the sampling rule: which threads a tick or a snapshot stops,
 *                and what each thread is doing at a tick;
 *   symbolize.c  naming addresses (modules, perf maps).
 * Sampler thread only, like everything a tracee does. */
#ifndef PT_TRACEE_INTERNAL_H
#define PT_TRACEE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "ptrace/tracee.h"

struct pt_capture;
struct pt_mem;
struct pt_modules;
struct pt_perfmap;
struct pt_py;
struct pt_py_cap;
struct pt_unwinder;

#define TH_INTERRUPTING 0x01u   /* PTRACE_INTERRUPT sent, stop not yet seen */
#define TH_GROUPSTOP    0x02u   /* in group-stop, restarted with PTRACE_LISTEN */
#define TH_GONE         0x04u   /* exited or detached; dropped at the next compaction */
#define TH_WANTED       0x08u   /* selected in this tick: capture at its stop */
#define TH_LATE         0x10u   /* a tick's: if it stops after the tick, capture it then */
#define TH_TICK         0x20u   /* interrupted for a CPU sample (not a snapshot) */
#define TH_SIGNALLED    0x40u   /* resumed with a signal, maybe not on a core since */

/* A thread not yet looked at by a tick: sampled at its first look if it is
 * running then, whatever its CPU (so a thread living for less than a period,
 * a churned worker, is sampled when caught running); else it starts from
 * no credit. */
#define NEW_CREDIT UINT64_MAX

struct thread {
	pid_t tid;
	unsigned int flags;
	int sys_fd, sched_fd;    /* /proc/<pid>/task/<tid>/syscall, schedstat */
	int stat_fd;             /* .../stat, only where syscall cannot be read (see reopen_thread) */
	uint64_t last_run_ns;
	uint64_t moved_at;       /* when a tick last saw its CPU move (see pt_tracee_tick) */
	uint64_t t_interrupt;
	uint64_t cpu_ns;         /* the weight of its pending sample: CPU since its last one */
	uint64_t acc_ns;         /* CPU used since its last tick-sample */
	uint64_t credit_ns;      /* CPU not yet paid for by a sample (see pt_tracee_tick) */
	uint64_t wait_ns;        /* time runnable but waiting for a core, at its last look */
	/* its last selection for a CPU sample: when that tick began, its wait
	 * then, the credit the selection took, and how many selections in a
	 * row were dropped (see pt__preempted_at_tick) */
	uint64_t tick_ns, tick_wait_ns, credit_paid;
	int tick_cpu, preempted_in_a_row;
	int resume_sig;          /* the signal to deliver when resumed from our stop */
	uint64_t sig_slices;     /* TH_SIGNALLED: its count of times on a core then */
	char comm[16];           /* thread name, read at most once a second */
	uint64_t comm_ns;        /* when comm was read */
	char state;              /* R S D ... as of its last selection or look */
	int syscall;             /* the system call it was blocked in at its last look, or -1 */
	int ran;                 /* it ran since the state report before (rule.c) */
	uint64_t sys_sp, sys_pc; /* where it was blocked at its last state read, 0 if not */
	size_t stack_want;       /* stack to copy at its next stop; 0: stack_bytes */
	uint64_t last_sp;        /* its stack pointer at its last stop */
	/* Go: its signal stack and the signal frame on it, as its last unwind
	 * through Go's signal handler found them (pt_capture sig_*), or 0 */
	uint64_t sig_uc, sig_lo, sig_hi;
	/* snapshot cache: the stack at the last snapshot stop */
	uint64_t *snap;          /* max_frames, allocated at the first snapshot */
	int snap_n, snap_syscall, snap_restart;
	int snap_ok;             /* snap is the stack of the stop at snap_run_ns */
	uint64_t snap_run_ns, snap_sp, snap_pc;
	/* Python: its PyThreadState (0: not found yet), looked up again no
	 * sooner than py_retry_ns; its tid as the target sees it (0: unread) */
	uint64_t py_tstate, py_retry_ns;
	pid_t py_nstid;
	uint64_t py_bulk[2];     /* the frame-stack region its last sample read */
};

/* The calling thread as a tracer: ptrace is per thread, so the thread that
 * seized a tracee is the only one that may wait for it or command it. This
 * structure is that thread's whole tracing context (STYLE H7: no hidden
 * thread-local state). */
struct pt_tracer {
	struct pt_tracee *tracees;   /* waitpid(-1, __WNOTHREAD) reaps for all of them */
	pid_t tid;                   /* the tracer thread, 0 until its first attach */
	int wake_fd;                 /* signalfd for SIGCHLD, or -1 */
	pt_event_cb event;
	void *event_arg;
	/* A stop that came after its tick happened when its thread got a core
	 * and woke us; its pause counts from then: from our wake-up (woke_ns,
	 * or when this pt_tracer_poll began: poll_ns), less the time we spent
	 * runnable before we ran. That is the growth of our own run_delay
	 * (/proc/thread-self/schedstat) since we last went to sleep with late
	 * stops to come (rq_base), read once per wake-up that takes a late
	 * stop (late_from, 0 until then). */
	uint64_t poll_ns, late_from, rq_base, woke_ns;
	uint64_t late_ns;            /* time spent taking late stops (pt_tracer_take_late_ns) */
	int self_sched_fd;           /* /proc/thread-self/schedstat, opened at first use */
	int loadavg_fd;              /* /proc/loadavg, opened at first use */
};

struct pt_tracee {
	struct pt_tracee *next;  /* the tracer's tracees */
	struct pt_tracer *tr;
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
	int clone_stacks;        /* clone events carry the parent's stack */
	struct pt_capture *clone_cap;   /* the parent's capture at a clone, allocated at first use */
	uint64_t *clone_frames;  /* max_frames */
	int busy;                /* collecting: slots in use, no late captures */
	struct pt_tick_cbs late; /* where late captures go: the last tick's */
	uint64_t maps_at_ns;     /* last /proc/<pid>/maps read */
	uint64_t maps_backoff_ns;  /* least time between reads forced by a miss */
	struct pt_tracee_stats st;
	/* JIT symbols (perf map): reloaded at most once per maps refresh, and
	 * only when the file changed (symbolize.c) */
	struct pt_perfmap *pm;
	pid_t nspid;
	int pm_checked;
	struct stat pm_st;
	/* CPython frames (python.c): detected at attach and exec, read per
	 * capture into py_caps (a slot each) when py is active */
	struct pt_py *py;
	struct pt_py_cap *py_caps;
	char py_note[384];       /* what detection found, for the log once */
	int py_noted;            /* the note was handed out */
};

/* ---- tracee.c: the mechanism ---- */

/* The target's PID as the target sees it (NSpid in /proc/<pid>/status), read
 * once; the pid itself when that cannot be read. */
pid_t pt__nspid(struct pt_tracee *t);

/* The live thread with this tid, or NULL. */
struct thread *pt__find_thread(struct pt_tracee *t, pid_t tid);
/* Reads an open /proc text file from its start, NUL-terminated (one pread:
 * /proc answers a small file whole). Returns its length, or <= 0. */
ssize_t pt__pread_text(int fd, char *buf, size_t len);
/* pt__pread_text of a file the tracer opens at its first read (*fd is -1
 * until then; closed by pt_tracer_free). */
ssize_t pt__pread_own(int *fd, const char *path, char *buf, size_t len);
/* th's CPU time so far and, each if not NULL, its time runnable but waiting
 * for a core and how many times it got one (/proc/<tid>/schedstat).
 * Returns 0, -ESRCH or -EBADMSG. */
int pt__read_run_ns(const struct thread *th, uint64_t *run_ns, uint64_t *wait_ns,
		    uint64_t *slices);
/* Reads and parses th's /proc/<tid>/stat. Returns 0 or -ESRCH. */
struct pt_stat;
int pt__read_stat(const struct pt_tracee *t, const struct thread *th, struct pt_stat *st);
/* Reads th's state and name from /proc/<tid>/stat. Returns 0 or -ESRCH. */
int pt__read_state(struct pt_tracee *t, struct thread *th);
/* The same through th's open stat_fd (see reopen_thread). Returns 0 or
 * -ESRCH. */
int pt__read_state_fd(struct thread *th);
/* Interrupts the selected threads (indices into t->th; an entry that could
 * not be interrupted is set to SIZE_MAX), captures each as it stops and
 * resumes it at once, polling for stops while spin_ns lasts; a snapshot
 * (snap) then waits up to wait_ns for the rest, a tick leaves them to
 * pt_tracer_poll. Unwinds offline and reports each capture through cbs.
 * Returns the number of captures reported now. */
int pt__collect(struct pt_tracee *t, size_t *sel, int nsel, uint64_t wait_ns, uint64_t spin_ns,
		int snap, const struct pt_tick_cbs *cbs);
/* Reports the captures that came after the last tick, through its callbacks. */
void pt__report_late(struct pt_tracee *t);
/* Drops threads marked gone (never during an iteration over t->th). */
void pt__compact(struct pt_tracee *t);

/* ---- rule.c: the sampling rule ---- */

/* 1 if polling for stops costs the target nothing now (a spare core). */
int pt__spare_core(const struct pt_tracee *t);
/* 1 if th, stopped for a CPU sample at about stop_ns with registers regs
 * (still stopped), stopped where it waited for a core, at the exit of a
 * system call: the stop is to be dropped, th stays due. */
struct user_regs_struct;
int pt__preempted_at_tick(struct pt_tracee *t, struct thread *th, uint64_t stop_ns,
			  const struct user_regs_struct *regs);

#endif
