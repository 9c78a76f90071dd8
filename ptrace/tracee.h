/* One traced process: its threads, attach/detach, ptrace event handling and
 * the per-tick snapshot of running threads; and the tracer, the thread that
 * traces them. Every function here runs on the tracer thread (the sampler
 * thread), the only thread that calls ptrace or waitpid (STYLE H12).
 * The mechanism is in tracee.c, the sampling rule (which threads a tick
 * stops) in rule.c, naming addresses in symbolize.c. */
#ifndef PT_TRACEE_H
#define PT_TRACEE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pt_maps;
struct pt_module;
struct pt_tracee;

struct pt_tracee_opts {
	size_t stack_bytes;     /* most stack copied per thread-sample */
	int max_frames;
	int max_threads;        /* threads tracked */
	int max_per_tick;       /* threads stopped in one tick */
	uint64_t spin_ns;       /* poll for a stop this long before sleeping (0: sleep) */
	const char *debug_dir;  /* NULL: /usr/lib/debug/.build-id */
	int python;             /* CPython frames replace the interpreter's eval frames */
};

/* Counters, cumulative since creation. */
struct pt_tracee_stats {
	uint64_t thread_samples, stops, pause_ns_total, unwind_ns_total, frames_total;
	uint64_t late_stops;        /* stopped after their tick (a tick's: captured then) */
	uint64_t preempted_stops;   /* a tick's, dropped: stopped where it waited for a core */
	uint64_t incomplete_stacks;
	uint64_t signals_reinjected, group_stops, clones, execs;
	uint64_t perfmap_entries;   /* JIT symbols loaded from the target's perf map */
	uint64_t snapshot_stops, snapshot_reused;
	uint64_t maps_rereads;      /* maps read again because an unwind left them */
	uint64_t short_copies;      /* unwinds that needed more stack than was copied */
	uint64_t signal_copies;     /* Go stacks interrupted by a signal, copied too */
	uint64_t symtab_load_ns, symtab_loads;   /* symbol tables read (cold symbolization) */
	/* Python frame chains read during stops, and the time that took
	 * (inside the pause) */
	uint64_t py_captures, py_capture_ns;
};

/* One thread's stack, handed to a callback after the thread was resumed. */
struct pt_sample {
	pid_t pid;              /* the process (pt_tracee_pid) */
	pid_t tid;
	const char *comm;       /* the thread's name */
	char state;             /* from /proc/<tid>/stat: R S D T t Z ... */
	int syscall;            /* the system call it was in when stopped, or -1 */
	const uint64_t *frames; /* leaf first (see pt_unwind) */
	int n;
	uint64_t cpu_ns;        /* tick: CPU the thread used since its previous sample */
	int cached;             /* snapshot: not stopped, its last stack still holds */
	unsigned int flags;     /* PT_SAMPLE_F_* (sampler.h), set by sessions for their results */
};
typedef void (*pt_sample_cb)(void *arg, const struct pt_sample *s);
/* Receives each pause (interrupt sent .. thread resumed) and unwind time. */
typedef void (*pt_timing_cb)(void *arg, uint64_t pause_ns, uint64_t unwind_ns);

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
	 * (it has not run since, see pt_tracee_snapshot); else NULL. */
	const uint64_t *stack;
	int n;
};
typedef void (*pt_state_cb)(void *arg, const struct pt_thread_state *st);

/* Where a tick reports: each thread-sample, each pause, and, if `state` is
 * not NULL, every thread of the target (each tick then looks at all of
 * them, not only those whose CPU moved). */
struct pt_tick_cbs {
	pt_sample_cb sample;
	pt_timing_cb timing;
	pt_state_cb state;
	void *arg;
};

/* Thread life events seen while attached (pt_tracer_poll). */
enum pt_event_kind { PT_EV_CLONE = 1, PT_EV_EXIT };
struct pt_event {
	enum pt_event_kind kind;
	pid_t pid;              /* the process */
	pid_t tid;              /* CLONE: the parent thread; EXIT: the thread that ended */
	pid_t child;            /* CLONE: the new thread */
	/* CLONE, with pt_tracee_clone_stacks on: the parent's stack at the
	 * clone (leaf first, as pt_unwind gives it), else NULL. */
	const uint64_t *stack;
	int n;
};
typedef void (*pt_event_cb)(void *arg, const struct pt_event *ev);

struct pt_tracer;

/* A tracer: the thread that first attaches one of its tracees becomes the
 * tracer thread, and every other call on it and its tracees must come from
 * that thread (except pt_tracer_new and pt_tracer_free, and pt_tracee_free
 * after that thread ended). wake_fd is a signalfd for SIGCHLD (readable
 * when a tracee changes state), or -1. Returns 0 or -ENOMEM. */
int pt_tracer_new(struct pt_tracer **out, int wake_fd);
/* Frees the tracer; its tracees must have been freed. NULL-safe. */
void pt_tracer_free(struct pt_tracer *tr);
/* Where thread life events go (may be NULL). */
void pt_tracer_set_events(struct pt_tracer *tr, pt_event_cb cb, void *arg);
/* Handles every pending state change of every tracee of this tracer (one
 * system call per event): re-injects signals, honours group-stop with
 * PTRACE_LISTEN, registers new threads, notices exec and exit, and captures
 * the stops that came after their tick (kept for pt_tracee_report_late).
 * Returns 1 if it stopped with events left (call again soon), else 0. */
int pt_tracer_poll(struct pt_tracer *tr);
/* Marks the tracer's wake-up from a sleep: the pause of a stop that the next
 * pt_tracer_poll takes counts from then (else from that call). */
void pt_tracer_woke(struct pt_tracer *tr);
/* Time pt_tracer_poll spent taking stops that came after their tick, since
 * the last call. */
uint64_t pt_tracer_take_late_ns(struct pt_tracer *tr);

/* A tracee of `tr` (not attached yet). Returns 0 or -ENOMEM. */
int pt_tracee_new(struct pt_tracee **out, struct pt_tracer *tr, pid_t pid,
		  const struct pt_tracee_opts *opts);
/* Detaches (bounded wait) and frees. NULL-safe. */
void pt_tracee_free(struct pt_tracee *t);

pid_t pt_tracee_pid(const struct pt_tracee *t);
int pt_tracee_attached(const struct pt_tracee *t);
/* 1 while a detach that timed out waits for threads still to stop. */
int pt_tracee_detaching(const struct pt_tracee *t);
/* 1 once the process has exited (or was never there). */
int pt_tracee_gone(const struct pt_tracee *t);
/* 1 after the target exec'd and before pt_tracee_ack_exec(): meanwhile no
 * tick samples and symbolization still uses the old program's maps and
 * modules, so sessions that saw the old program can end with its names. */
int pt_tracee_exec_pending(const struct pt_tracee *t);
/* Forgets the old program (maps, modules, caches) and resumes sampling. */
void pt_tracee_ack_exec(struct pt_tracee *t);
size_t pt_tracee_nthreads(const struct pt_tracee *t);
void pt_tracee_stats(const struct pt_tracee *t, struct pt_tracee_stats *out);

/* With on, each clone event carries the parent's stack (taken while the
 * parent is stopped at the event anyway: no extra stop, a copy and an
 * unwind more per thread created). */
void pt_tracee_clone_stacks(struct pt_tracee *t, int on);

/* Seizes every thread (PTRACE_SEIZE, following clones and execs; nothing is
 * stopped). Returns 0, -ESRCH (no such process), -EPERM (ptrace denied:
 * CAP_SYS_PTRACE missing or Yama), -E2BIG (over max_threads) or -ENOMEM. */
int pt_tracee_attach(struct pt_tracee *t);
/* Interrupts and detaches every thread, waiting at most timeout_ns; threads
 * still pending are detached when their stop arrives (pt_tracer_poll).
 * Returns 0 when fully detached, -EINPROGRESS otherwise. */
int pt_tracee_detach(struct pt_tracee *t, uint64_t timeout_ns);
/* Unwinds and reports the stops captured after their tick, through that
 * tick's callbacks. The next tick or snapshot does it first thing; call it
 * before the sessions those callbacks serve change. */
void pt_tracee_report_late(struct pt_tracee *t);

/* One CPU tick. A thread is due for a sample once it has used cpu_period_ns
 * of CPU since its last sample (one /proc read per thread that did not run,
 * no stop); the due threads that are running now are interrupted together,
 * each captured (registers and stack) as it stops and resumed at once, then
 * unwound offline and passed to cb with the CPU it used since its last
 * sample as weight. Polls for stops while spin_ns lasts, never sleeps: a
 * thread that stops later (one that was runnable but not on a core) is
 * captured by pt_tracer_poll and reported by the next tick, with this tick's
 * callbacks. A thread has at most one interrupt pending: it is not selected
 * again until its stop came. With cbs->state, every thread is looked at and
 * reported (the rule is in rule.c). Returns the number of thread-samples
 * taken now or a negative errno. */
int pt_tracee_tick(struct pt_tracee *t, uint64_t cpu_period_ns, const struct pt_tick_cbs *cbs);

/* Every thread's stack now (the thread dump). Threads are stopped one batch
 * of max_per_tick at a time, each resumed at once after its capture. A
 * thread blocked since its last snapshot is not stopped again: if it has
 * not run since (one /proc read), or if it ran only to restart the system
 * call our own stop interrupted (same stack and instruction pointers in
 * /proc/<tid>/syscall), its cached stack is reported with cached=1.
 * Threads in a group-stop are reported with state 'T' and their last stack
 * (n=0 if none). Returns the number of threads reported or a negative errno;
 * *stopped counts the threads stopped. */
int pt_tracee_snapshot(struct pt_tracee *t, uint64_t wait_ns, pt_sample_cb cb, void *arg,
		       int *stopped);

/* Re-reads /proc/<pid>/maps. Returns 0 or a negative errno. */
int pt_tracee_refresh_maps(struct pt_tracee *t);
const struct pt_maps *pt_tracee_maps(const struct pt_tracee *t);

/* Symbolizes a runtime address: *name is the function (NULL if no symbol
 * covers it), *mod the module (NULL outside every file mapping). Addresses
 * outside every module are looked up in the target's perf map
 * (/tmp/perf-<pid>.map, reloaded once per maps refresh if it changed).
 * Strings are owned by the tracee and valid until the next exec or refresh. */
void pt_tracee_symbolize(struct pt_tracee *t, uint64_t addr, const char **name,
			 const struct pt_module **mod);
/* Where addr is Go code, the frames Go's traceback gives there, innermost
 * first (the inlined functions, then the one holding the code), with their
 * files and lines (ptrace/gopclntab.h). Returns how many (at most max), 0
 * for code that is not Go's. Strings as pt_tracee_symbolize's. */
struct pt_goline;
int pt_tracee_go_frames(struct pt_tracee *t, uint64_t addr, struct pt_goline *out, int max);
/* Where addr is a token for Python frames (ptrace/python.h), those frames,
 * innermost first, at most max: names, files and lines, strings owned by
 * the tracee (valid until the next exec). Returns how many, 0 for any other
 * address. */
struct pt_py_line;
int pt_tracee_python_lines(struct pt_tracee *t, uint64_t addr, struct pt_py_line *out, int max);
/* What looking for a Python interpreter found, worth one log line: the first
 * call after a detection that found one (supported or not) returns it,
 * every other call NULL. */
const char *pt_tracee_python_note(struct pt_tracee *t);
/* Build-id of the module holding addr ("" if unknown). */
const char *pt_tracee_build_id(struct pt_tracee *t, uint64_t addr);

#endif
