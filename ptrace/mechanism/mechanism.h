/* The ptrace mechanism's shared state: the tracer's and each tracee's
 * structures, read and written by the files of the mechanism (listed in
 * ptrace/mechanism/tracee.h) and by nothing else (CONVENTIONS H1: definitions shared only
 * inside it). Types only: no file implements this header. Tracer thread
 * only. */
#ifndef PT_MECHANISM_H
#define PT_MECHANISM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/map.h"
#include "ptrace/mechanism/thread.h"
#include "ptrace/core/types.h"

struct pt_tracee;

struct pt_capture;
struct pt_mem_pool;
struct pt_objects;
struct pt_runtimes;
struct pt_space;
struct pt_watch;

/* The calling thread as a tracer: ptrace is per thread, so the thread that
 * seized a tracee is the only one that may wait for it or command it. This
 * structure is that thread's whole tracing context (CONVENTIONS H7: no hidden
 * thread-local state). */
struct pt_tracer {
	struct pt_tracee *tracees;   /* one wait for any (__WNOTHREAD) takes all of theirs */
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
	int mid_wake;                /* polled before a tick: the poll after it comes next */
	uint64_t breathed_ns;        /* the last pt_tracer_breathe that polled */
	uint64_t late_ns;            /* time spent taking late stops (pt_tracer_take_late_ns) */
	int self_sched_fd;           /* /proc/thread-self/schedstat, opened at first use */
	int loadavg_fd;              /* /proc/loadavg, opened at first use */
	/* Statuses a poll reaped from threads it did not know yet (a new
	 * thread's first stop comes before its parent's clone event: the
	 * newest tracee is waited for first), acted on at the poll's end once
	 * their thread is known; a clone event in between takes its child's
	 * (tid set to 0: events.c let_child_go). */
	struct pt__reaped { pid_t tid; int status; } reaped[64];
	int nreaped;
	int polling;                 /* inside pt_tracer_poll (see poll_once) */
	int watch_fd;                /* epoll of the watched fds (pt_tracer_watch), -1: none yet */
	struct pt_watch *watches;    /* every watch, called when any fd may be ready */
	/* What every tracee reads alike, kept once: pages of the files
	 * they map (mem.h), their files' symbols and Go tables (objects.h). */
	struct pt_mem_pool *pages;
	struct pt_objects *objects;
};

struct pt_tracee {
	struct pt_tracee *next;  /* the tracer's tracees */
	struct pt_tracer *tr;
	pid_t pid;
	struct pt_tracee_opts o;
	int attached, detaching, gone, execed;
	uint64_t gone_cpu_ns;    /* the process's CPU as its last thread ended (0: unread) */
	/* the process's CPU clock (pt_tracee_cpu_ns), NULL: its own; a unit
	 * test's that moves it between two reads */
	uint64_t (*cpu_clock)(pid_t pid);
	int own_sig;             /* the owner's own signal (tops.own_signal), 0: none */
	struct pt_thread **th;   /* each allocated with the owner's part after it */
	size_t n, cap;
	struct base_map by_tid;  /* tid -> its live thread (a struct pt_thread *) */
	struct pt_thread_ops tops;
	int ncpu;                /* cores online */
	int spin_slots;          /* stops that may come from other cores: spin for these */
	uint64_t mm_fp;          /* address-space fingerprint at the last check */
	int auxv_fd;             /* the leader's /proc auxv, for mm_fp */
	struct pt_space *as;     /* its maps, memory, modules, unwinder, perf map */
	/* capture slots, max_per_tick of them */
	struct pt_capture *caps;
	/* max_frames per slot, each allocated at the slot's first capture (a
	 * process of few threads uses few slots: 256 one-thread processes
	 * would otherwise hold 32 MB of them) */
	uint64_t **frames;
	int *nframes;
	uint64_t *unwind_ns;
	struct pt_thread **slot_th;   /* the captured thread */
	uint64_t *slot_pause;    /* interrupt sent .. resumed */
	int nlate;               /* slots holding late captures, not yet reported */
	int clone_stacks;        /* clone events carry the parent's stack */
	int no_clone_stops;      /* new threads adopted by the owner, not stopped (follow.h) */
	int unfollowed;          /* clone stops were off once: threads may be untraced */
	int reopt;               /* clone stops back: threads to interrupt, one at a time (follow.h) */
	struct pt_capture *clone_cap;   /* the parent's capture at a clone, allocated at first use */
	uint64_t *clone_frames;  /* max_frames */
	int busy;                /* collecting: slots in use, no late captures */
	struct pt_stop_ops late; /* where late captures go: the last tick's */
	struct pt_tracee_stats st;
	/* The language runtimes it runs (ptrace/runtimes/runtimes.h):
	 * detected at attach and exec, read per capture into their slots (one
	 * per capture slot, and one for clone events: slot max_per_tick). */
	struct pt_runtimes *rts;
};

#endif
