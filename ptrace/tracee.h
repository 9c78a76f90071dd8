/* The ptrace mechanism: a tracer (the thread that traces) and its tracees
 * (traced processes): attach and detach, every ptrace event acted on
 * (signals re-injected, group-stops honoured, clones followed, exec and
 * exit noticed), and the stop cycle: the threads a caller chose are
 * interrupted, each captured (registers, a stack copy) as it stops and
 * resumed at once, then unwound offline and reported back. Which threads
 * to stop is not decided here: that is the sampling rule's (ptrace/rule.h),
 * which calls this layer, never the other way round; what must flow back up
 * goes through the ops structures its callers give (struct pt_stop_ops,
 * struct pt_thread_ops, pt_event_cb).
 *
 * Every function here runs on the tracer thread (the sampler thread), the
 * only thread that calls ptrace or waitpid (STYLE H12), except where noted.
 * Implemented by the files listed in ptrace/tracee_internal.h: tracee.c (a
 * tracee's life), threads.c (its thread table), tracer.c (reaping events),
 * events.c (acting on one), stop.c (the stop cycle), capture.c, batch.c
 * (unwinding and reporting captures), execfp.c (noticing an exec) and
 * symbolize.c (maps and names). */
#ifndef PT_TRACEE_H
#define PT_TRACEE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/thread.h"

struct pt_maps;
struct pt_module;
struct pt_tracee;
struct pt_tracer;
struct user_regs_struct;

struct pt_tracee_opts {
	size_t stack_bytes;     /* most stack copied per thread-sample */
	int max_frames;
	int max_threads;        /* threads tracked */
	int max_per_tick;       /* threads stopped in one batch */
	uint64_t spin_ns;       /* poll for a stop this long before sleeping (0: sleep) */
	const char *debug_dir;  /* NULL: /usr/lib/debug/.build-id */
	int python;             /* CPython frames replace the interpreter's eval frames */
};

/* Counters, cumulative since creation. */
struct pt_tracee_stats {
	uint64_t thread_samples, stops, pause_ns_total, unwind_ns_total, frames_total;
	uint64_t late_stops;        /* stopped after their tick (a tick's: captured then) */
	uint64_t incomplete_stacks;
	uint64_t signals_reinjected, group_stops, clones, execs;
	uint64_t perfmap_entries;   /* JIT symbols loaded from the target's perf map */
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
	uint64_t sp, pc;        /* where it stopped (0: not stopped now) */
};
typedef void (*pt_sample_cb)(void *arg, const struct pt_sample *s);
/* Receives each pause (interrupt sent .. thread resumed) and unwind time. */
typedef void (*pt_timing_cb)(void *arg, uint64_t pause_ns, uint64_t unwind_ns);

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

/* What a batch of stops reports to whoever chose the threads. */
struct pt_stop_ops {
	/* th, interrupted for a CPU sample (PT_TH_TICK), stopped at about
	 * stop_ns with registers regs and is still stopped: 1 to take the
	 * sample, 0 to resume it without one. NULL: every stop is taken. */
	int (*keep)(void *arg, struct pt_thread *th, uint64_t stop_ns,
		    const struct user_regs_struct *regs);
	/* Each capture, unwound, once every thread of the batch runs again;
	 * the caller may set smp's cpu_ns and state before passing it on. */
	void (*sample)(void *arg, struct pt_thread *th, struct pt_sample *smp);
	/* Each stop's pause and unwind time (may be NULL). */
	pt_timing_cb timing;
	void *arg;
};

/* What a tracee's owner keeps per thread: its size in bytes (the part of
 * struct pt_thread named `rule`), and `drop`, called before that part is
 * zeroed again (the thread exec'd) or freed (the thread is forgotten). */
struct pt_thread_ops {
	size_t size;
	void (*drop)(void *arg, struct pt_thread *th);
	void *arg;
};

/* ---- the tracer ------------------------------------------------------------ */

/* A tracer: the thread that first attaches one of its tracees becomes the
 * tracer thread, and every other call on it and its tracees must come from
 * that thread (except pt_tracer_new and pt_tracer_free, and pt_tracee_free
 * after that thread ended). wake_fd is a signalfd for SIGCHLD (readable
 * when a tracee changes state), or -1. Returns 0 or -ENOMEM. Any thread. */
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

/* ---- a tracee ----------------------------------------------------------- */

/* A tracee of `tr` (not attached yet). Returns 0 or -ENOMEM. */
int pt_tracee_new(struct pt_tracee **out, struct pt_tracer *tr, pid_t pid,
		  const struct pt_tracee_opts *opts);
/* Detaches (bounded wait) and frees. NULL-safe. */
void pt_tracee_free(struct pt_tracee *t);
/* Sets what the owner keeps per thread (see struct pt_thread_ops); only
 * before the first attach. Returns 0 or -EBUSY (threads are held). */
int pt_tracee_set_thread_ops(struct pt_tracee *t, const struct pt_thread_ops *ops);

pid_t pt_tracee_pid(const struct pt_tracee *t);
const struct pt_tracee_opts *pt_tracee_opts(const struct pt_tracee *t);
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
void pt_tracee_stats(const struct pt_tracee *t, struct pt_tracee_stats *out);
/* When t's tracer last woke from a sleep (pt_tracer_woke), 0 if it has
 * polled since. */
uint64_t pt_tracee_woke_ns(const struct pt_tracee *t);
/* The CPU time the process used so far, all its threads, the exited ones
 * too (the sums of each thread's schedstat); 0 if unreadable. */
uint64_t pt_tracee_cpu_ns(const struct pt_tracee *t);

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

/* ---- its threads ---------------------------------------------------------- */

/* Threads held, and thread i (0 <= i < n), gone ones included until the next
 * pt_tracee_compact; a thread's address is stable until it is compacted. */
size_t pt_tracee_nthreads(const struct pt_tracee *t);
struct pt_thread *pt_tracee_thread(const struct pt_tracee *t, size_t i);
/* The live thread with this tid, or NULL. */
struct pt_thread *pt_tracee_find(const struct pt_tracee *t, pid_t tid);
/* Forgets the threads marked gone (never while late captures wait, nor
 * during an iteration over the threads). */
void pt_tracee_compact(struct pt_tracee *t);

/* ---- the stop cycle --------------------------------------------------------- */

/* Interrupts the threads sel[0..nsel) (an entry that could not be
 * interrupted is set to NULL), captures each as it stops and resumes it at
 * once: registers, a stack copy (as much as its last unwind needed, with
 * room to spare), a Python thread's frame chain. Polls for their stops
 * while spin_ns lasts, only with a core to spare (else the polling takes
 * that core from the threads it waits for); a snapshot (snap) then waits up
 * to wait_ns for the rest, a tick leaves them to pt_tracer_poll, which
 * captures them as they come for the next pt_tracee_report_late, through
 * this tick's ops. Then unwinds offline and reports each capture through
 * ops (with snap, threads are marked PT_TH_WANTED only, not PT_TH_TICK).
 * Returns the number of captures reported now. */
int pt_tracee_collect(struct pt_tracee *t, struct pt_thread **sel, int nsel, uint64_t wait_ns,
		      int snap, const struct pt_stop_ops *ops);
/* Unwinds and reports the stops captured after their tick, through that
 * tick's ops. The next collect does it first thing; call it before the
 * sessions those ops serve change. */
void pt_tracee_report_late(struct pt_tracee *t);

/* ---- naming addresses (symbolize.c) ----------------------------------------- */

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
