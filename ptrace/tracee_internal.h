/* The tracer's and a tracee's state, shared by the files of the ptrace
 * mechanism (STYLE H1: declarations shared only inside it), from the
 * bottom up:
 *   execfp.c     the address-space fingerprint that tells an exec;
 *   symbolize.c  the maps, and naming addresses;
 *   capture.c    registers, stack copies and Python frame chains of a
 *                stopped thread;
 *   batch.c      unwinding a batch of captures and reporting each;
 *   threads.c    the thread table;
 *   events.c     acting on one waitpid status (signals, group-stops,
 *                clones, exec, exit);
 *   stop.c       the stop cycle: interrupt, take each stop, resume;
 *   tracer.c     the tracer: reaping every tracee's events;
 *   tracee.c     a tracee's life: new, attach, detach, exec, free.
 * A file calls only those above it in this list, never one below (the
 * sampling rule, above them all, is not among them). Sampler thread only. */
#ifndef PT_TRACEE_INTERNAL_H
#define PT_TRACEE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/map.h"
#include "ptrace/tracee.h"

struct pt_capture;
struct pt_mem;
struct pt_modules;
struct pt_perfmap;
struct pt_py;
struct pt_py_cap;
struct pt_unwinder;

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
	struct pt_thread **th;   /* each allocated with the owner's part after it */
	size_t n, cap;
	struct base_map by_tid;  /* tid -> its live thread (a struct pt_thread *) */
	struct pt_thread_ops tops;
	int ncpu;                /* cores online */
	int spin_slots;          /* stops that may come from other cores: spin for these */
	uint64_t mm_fp;          /* address-space fingerprint at the last check */
	int auxv_fd;             /* the leader's /proc auxv, for mm_fp */
	struct pt_maps *maps;
	struct pt_mem *mem;
	struct pt_modules *mods;
	struct pt_unwinder *unw;
	/* capture slots, max_per_tick of them */
	struct pt_capture *caps;
	uint64_t *frames;        /* max_frames per slot */
	int *nframes;
	uint64_t *unwind_ns;
	struct pt_thread **slot_th;   /* the captured thread */
	uint64_t *slot_pause;    /* interrupt sent .. resumed */
	int nlate;               /* slots holding late captures, not yet reported */
	int clone_stacks;        /* clone events carry the parent's stack */
	struct pt_capture *clone_cap;   /* the parent's capture at a clone, allocated at first use */
	uint64_t *clone_frames;  /* max_frames */
	int busy;                /* collecting: slots in use, no late captures */
	struct pt_stop_ops late; /* where late captures go: the last tick's */
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
	 * capture into py_caps (a slot each, and one for clone events) when
	 * py is active */
	struct pt_py *py;
	struct pt_py_cap *py_caps;
	char py_note[384];       /* what detection found, for the log once */
	int py_noted;            /* the note was handed out */
};

/* ---- execfp.c ---- */

/* A fingerprint of the address space, 0 if unreadable (see execfp.c); a
 * leader that ended has none: then thread alt's (> 0). */
uint64_t pt__mm_fingerprint(struct pt_tracee *t, pid_t alt);
/* (Re)opens the leader's /proc auxv, which the fingerprint reads. */
void pt__open_leader_auxv(struct pt_tracee *t);

/* ---- symbolize.c ---- */

/* The target's PID as the target sees it (NSpid in /proc/<pid>/status), read
 * once; the pid itself when that cannot be read. */
pid_t pt__nspid(struct pt_tracee *t);

/* ---- capture.c ---- */

/* Captures registers and stack of th, stopped by us, into cap (and, with
 * pyc, its Python frame chain, read in the same stop). Returns 0 or
 * -errno of PTRACE_GETREGS. */
int pt__capture(struct pt_tracee *t, struct pt_thread *th, struct pt_capture *cap,
		struct pt_py_cap *pyc);
/* Before a batch of stops: the Python thread states of the threads in sel
 * (NULL entries skipped) that have none yet, in one walk of the
 * interpreter's list. */
void pt__py_prepare(struct pt_tracee *t, struct pt_thread *const *sel, int nsel);
/* Looks for the interpreter, if the target runs one of a release we know. */
void pt__py_detect(struct pt_tracee *t);

/* ---- batch.c ---- */

/* Unwinds captures 0..ncap into their slots' frames, reading the maps
 * again (and unwinding again) when an address lay outside them all. */
void pt__batch_unwind(struct pt_tracee *t, int ncap);
/* Reports captures 0..ncap (unwound) through ops, each after learning its
 * thread's next stack size. */
void pt__batch_report(struct pt_tracee *t, int ncap, const struct pt_stop_ops *ops);

/* ---- threads.c ---- */

/* Adds the thread tid (its files opened); 0 if it is there already.
 * Returns 0, -E2BIG (max_threads) or -ENOMEM. */
int pt__add_thread(struct pt_tracee *t, pid_t tid);
/* th, which exec'd: its files opened again, the owner's part dropped and
 * zeroed. */
void pt__reset_thread(struct pt_tracee *t, struct pt_thread *th);
/* Forgets every thread and frees the table (the tracee's end). */
void pt__free_threads(struct pt_tracee *t);

/* ---- events.c ---- */

enum pt__ev { PT__EV_NONE, PT__EV_OURS, PT__EV_HANDLED, PT__EV_GONE };
/* Acts on one waitpid status of th. Returns PT__EV_OURS when th is stopped
 * for a capture we asked for (the caller captures and resumes it). */
enum pt__ev pt__on_status(struct pt_tracee *t, struct pt_thread *th, int status);
/* Reaps one pending status of th without blocking, and acts on it. */
enum pt__ev pt__poll_thread(struct pt_tracee *t, struct pt_thread *th);
/* Lets th go (PTRACE_DETACH), with sig. */
void pt__detach_thread(struct pt_thread *th, int sig);

/* ---- stop.c ---- */

/* Acts on a status wherever it was reaped: a stop of ours that came after
 * its tick is captured now, any other stop of ours resumed. */
void pt__on_status_any(struct pt_tracee *t, struct pt_thread *th, int status);
/* The tracer thread's own time runnable but waiting for a core, so far. */
uint64_t pt__own_rq_wait_ns(struct pt_tracer *tr);
/* Waits on the tracer's wake fd (SIGCHLD) at most timeout_ns; empties it. */
void pt__wait_wake(int fd, uint64_t timeout_ns);
void pt__drain_wake(int fd);

#endif
