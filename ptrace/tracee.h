/* A traced process (a tracee) of the ptrace mechanism, and its life:
 * created with its capture slots and its unwinding and naming state,
 * attached (every thread seized, nothing stopped), detached, moved on to a
 * new program after an exec, freed.
 *
 * The mechanism is this header's module and those it lists, one file and
 * header each, bottom-up: execfp (noticing an exec), symbolize (maps and
 * names), capture (a stopped thread's registers and stacks), batch
 * (unwinding and reporting captures), threads (the thread table), events
 * (acting on one waitpid status), stop (the stop cycle), tracer (reaping
 * every tracee's events) and tracee (here). Each calls only those before
 * it; their shared state is ptrace/mechanism.h. Which threads to stop is
 * not decided by the mechanism: that is the sampling rule's
 * (ptrace/rule.h), which calls it and is called back only through the ops
 * structures it gives (struct pt_stop_ops, struct pt_thread_ops).
 *
 * Every function here runs on the tracer thread (the sampler thread), the
 * only thread that calls ptrace or waitpid (STYLE H12), except where
 * noted. */
#ifndef PT_TRACEE_H
#define PT_TRACEE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/sample.h"

struct pt_tracee;
struct pt_tracer;

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

/* A tracee of `tr` (not attached yet). Returns 0 or -ENOMEM. Any thread. */
int pt_tracee_new(struct pt_tracee **out, struct pt_tracer *tr, pid_t pid,
		  const struct pt_tracee_opts *opts);
/* Detaches (bounded wait) and frees. NULL-safe. */
void pt_tracee_free(struct pt_tracee *t);

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

#endif
