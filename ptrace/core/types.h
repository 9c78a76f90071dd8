/* The vocabulary the ptrace layers share, at the bottom of them all: the
 * options a tracee is made with, what the layers report up (a thread's
 * stack, a thread's state, life events, counters) and the callbacks and
 * ops that carry it. Types only: no file implements this header, and it
 * includes nothing of ptrace/, so that any layer may use it. */
#ifndef PT_TYPES_H
#define PT_TYPES_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pt_thread;
struct user_regs_struct;

/* How CPU samples are taken: stopping the thread (ptrace), or by the
 * kernel into a ring buffer without a stop (perf_event, where the pod
 * allows it); auto takes perf_event where it opens. */
enum pt_backend { PT_BACKEND_AUTO = 0, PT_BACKEND_PTRACE, PT_BACKEND_PERF };

struct pt_tracee_opts {
	size_t stack_bytes;     /* most stack copied per thread-sample */
	int max_frames;
	int max_threads;        /* threads tracked */
	int max_per_tick;       /* threads stopped in one batch */
	uint64_t spin_ns;       /* poll for a stop this long before sleeping (0: sleep) */
	const char *debug_dir;  /* NULL: /usr/lib/debug/.build-id */
	int python;             /* CPython frames replace the interpreter's eval frames */
	int draw_threads;       /* under ptrace, new threads stopped by the CPU they used (cpudraw.h) */
};

/* A tracee's counters, cumulative since its creation. */
struct pt_tracee_stats {
	uint64_t thread_samples, stops, pause_ns_total, unwind_ns_total, frames_total;
	uint64_t late_stops;        /* stopped after their tick (a tick's: captured then) */
	uint64_t incomplete_stacks;
	uint64_t signals_reinjected, group_stops, clones, execs;
	uint64_t own_signals;       /* the owner's own signals (own_signal), never passed on */
	uint64_t clones_resumed_at_once;   /* new threads let go at their parent's event */
	uint64_t forks;                    /* processes it forked while traced */
	uint64_t adopted;                  /* new threads seized without a stop (pt_tracee_adopt) */
	uint64_t rescanned;                /* threads a rescan found (pt_tracee_rescan) */
	uint64_t options_set;              /* threads given new options in a stop (follow.h) */
	uint64_t perfmap_entries;   /* JIT symbols loaded from the target's perf map */
	uint64_t maps_rereads;      /* maps read again because an unwind left them */
	uint64_t short_copies;      /* unwinds that needed more stack than was copied */
	uint64_t signal_copies;     /* Go stacks interrupted by a signal, copied too */
	uint64_t symtab_load_ns, symtab_loads;   /* symbol tables read (cold symbolization) */
	/* Python frame chains read during stops, and the time that took
	 * (inside the pause) */
	uint64_t py_captures, py_capture_ns;
};

/* Values per sample at most (a profile's sample types: samples and CPU,
 * contentions and delay, heap's four). */
#define PT_MAX_VALUES 4

/* One thread's stack, handed to a callback after the thread was resumed. */
struct pt_sample {
	pid_t pid;              /* the process */
	pid_t tid;
	const char *comm;       /* the thread's name */
	char state;             /* from /proc/<tid>/stat: R S D T t Z ... */
	int syscall;            /* the system call it was in when stopped, or -1 */
	const uint64_t *frames; /* leaf first (see pt_unwind) */
	int n;
	uint64_t cpu_ns;        /* tick: CPU the thread used since its previous sample */
	int cached;             /* snapshot: not stopped, its last stack still holds */
	unsigned int flags;     /* PT_SAMPLE_F_* (sampler.h), set by sessions for their results */
	uint64_t sp, pc;        /* where it stopped (0: not stopped now) */
	uint64_t tick;          /* a CPU sample: the tick (pt_tick_cbs) whose sessions it is
				 * for, which may be some ticks ago (0: the current one;
				 * PT_TICK_DRAW: a draw, every CPU session's, unscaled) */
};
typedef void (*pt_sample_cb)(void *arg, const struct pt_sample *s);
/* pt_sample's tick of a draw (ptrace/rule/cpudraw.h): stopped by the CPU
 * its thread used, not by a tick, its weight a whole period of it. */
#define PT_TICK_DRAW UINT64_MAX
/* Receives each pause (interrupt sent .. thread resumed) and unwind time. */
typedef void (*pt_timing_cb)(void *arg, uint64_t pause_ns, uint64_t unwind_ns);

/* Thread life events seen while attached (pt_tracer_poll). */
enum pt_event_kind { PT_EV_CLONE = 1, PT_EV_EXIT, PT_EV_FORK };
struct pt_event {
	enum pt_event_kind kind;
	pid_t pid;              /* the process */
	pid_t tid;              /* CLONE, FORK: the parent thread; EXIT: the thread that ended */
	pid_t child;            /* CLONE: the new thread; FORK: the new process, traced from
	                         * its first instruction, stopped there until it is
	                         * adopted (pt_tracee_attach) or let go (pt_tracer_poll) */
	/* CLONE, with pt_tracee_clone_stacks on: the parent's stack at the
	 * clone (leaf first, as pt_unwind gives it), else NULL. */
	const uint64_t *stack;
	int n;
	/* CLONE: when the thread was born (CLOCK_MONOTONIC), as the kernel
	 * stamped its FORK record (its clocks then 0), or 0 where not known
	 * (its birth stop, a rescan): it counts from when it is told, and
	 * run_ns and wait_ns are its clocks then (before it was told it may
	 * have run, and waited for a core to reach its birth stop). */
	uint64_t born_ns;
	/* EXIT: the thread's CPU time and its time runnable but waiting for a
	 * core over its life, read at its end before it was reaped; both 0 if
	 * unknown (an exit seen otherwise: through an exec, or reaped early).
	 * CLONE: see born_ns. */
	uint64_t run_ns, wait_ns;
};
typedef void (*pt_event_cb)(void *arg, const struct pt_event *ev);

/* What one thread was doing when a tick looked at it, without a stop. */
struct pt_thread_state {
	uint64_t at_ns;         /* when the tick looked (CLOCK_MONOTONIC) */
	pid_t pid, tid;
	const char *comm;
	char state;             /* R (running or runnable), S, D, T, t ... */
	int syscall;            /* the system call it is blocked in; -1 if none or running */
	uint64_t run_ns;        /* CPU time so far (schedstat) */
	uint64_t wait_ns;       /* time so far runnable but waiting for a core */
	int ran;                /* it ran since the tick before */
	/* Its stack as cached at its last snapshot stop, if that still holds
	 * (it has not run since, see pt_snapshot_take); else NULL. */
	const uint64_t *stack;
	int n;
};
typedef void (*pt_state_cb)(void *arg, const struct pt_thread_state *st);

/* What a batch of stops reports to whoever chose the threads. */
struct pt_stop_ops {
	/* th, interrupted for a CPU sample (PT_TH_TICK), stopped with
	 * registers regs and is still stopped: 1 to take the sample, 0 to
	 * resume it without one. NULL: every stop is taken. */
	int (*keep)(void *arg, struct pt_thread *th, const struct user_regs_struct *regs);
	/* Each capture, unwound, once every thread of the batch runs again;
	 * the caller may set smp's cpu_ns and state before passing it on. */
	void (*sample)(void *arg, struct pt_thread *th, struct pt_sample *smp);
	/* Each stop's pause and unwind time (may be NULL). */
	pt_timing_cb timing;
	void *arg;
};

/* Where a tick reports: each thread-sample, each pause, and, if `state` is
 * not NULL, every thread of the target (each tick then looks at all of
 * them, not only those whose CPU moved). */
struct pt_tick_cbs {
	pt_sample_cb sample;
	pt_timing_cb timing;
	pt_state_cb state;
	void *arg;
	uint64_t tick;          /* the tick's number: its samples carry it (pt_sample) */
};

/* The sampling rule's counters, cumulative since its creation. */
struct pt_rule_stats {
	uint64_t preempted_stops;   /* a tick's, dropped: stopped where it waited for a core */
	uint64_t unborn_stops;      /* a tick's, dropped: a new thread before its first instruction */
	uint64_t handler_stops;     /* a tick's, dropped: at a signal handler's first instruction */
	uint64_t unpaid_stops;      /* a tick's, dropped: at a system call's exit its kernel time
				     * does not pay for (reached after our interrupt) */
	uint64_t snapshot_stops;    /* stacks cached at a snapshot's or a state report's stop */
	uint64_t snapshot_reused;   /* stacks answered from the cache instead of a stop */
	/* ptrace backend: threads born while sampled, stopped by the CPU they
	 * used (ptrace/rule/cpudraw.c) */
	uint64_t draws;             /* such stops */
	uint64_t draw_threads;      /* threads armed */
	int draw_err;               /* why none are (a refused open's errno), 0 */
	/* perf_event backend */
	uint64_t perf_samples;      /* samples read from the rings */
	uint64_t perf_lost;         /* samples the kernel could not write (a ring full) */
	uint64_t perf_stack_bytes;  /* user stack the kernel copied, over the samples read */
	uint64_t perf_opens, perf_open_failures, perf_reopens;   /* events (re)sized to the stack */
	int perf_open_err;          /* the last failed open's errno (0: none) */
	uint64_t perf_adopted;      /* new threads seized without a stop at a FORK record */
	uint64_t perf_wakes;        /* threads given a wake event for their FORK records */
};

/* What a tracee's owner keeps per thread: its size in bytes (the part of
 * struct pt_thread named `rule`), `drop`, called before that part is
 * zeroed again (the thread exec'd) or freed (the thread is forgotten), and
 * what it does at a thread's birth. */
struct pt_thread_ops {
	size_t size;
	void (*drop)(void *arg, struct pt_thread *th);
	/* A thread born while traced, registered in its birth stop before it
	 * first runs, when `early` (may be NULL) says 1 now; `born` acts on it
	 * there (each costs the new thread's first stop its time). */
	int (*early)(void *arg);
	void (*born)(void *arg, struct pt_thread *th);
	/* The same once the new thread and its parent are let go (may be
	 * NULL): for what need not hold either up. */
	void (*started)(void *arg, struct pt_thread *th);
	/* A signal-delivery stop of `own_sig` (pt_tracee_set_own_signal):
	 * 1 if si (PTRACE_GETSIGINFO's) is the owner's own signal, which
	 * the thread then never takes (resumed without it) and whose stop
	 * is captured as a late sample of the last tick's (may be NULL). */
	int (*own_signal)(void *arg, struct pt_thread *th, const siginfo_t *si);
	void *arg;
};

#endif
