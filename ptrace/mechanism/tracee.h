/* A traced process (a tracee) of the ptrace mechanism, and its life:
 * created with its capture slots and its unwinding and naming state,
 * attached (every thread seized, nothing stopped), detached, moved on to a
 * new program after an exec, freed.
 *
 * The mechanism is this header's module and those it lists, one file and
 * header each, bottom-up: execfp (noticing an exec), symbolize (maps and
 * names), capture (a stopped thread's registers and stacks), batch
 * (unwinding and reporting captures), threads (the thread table), follow
 * (new threads with a birth stop or without), events (acting on one
 * waitpid status), stop (the stop cycle), tracer (reaping
 * every tracee's events) and tracee (here). Each calls only those before
 * it; their shared state is ptrace/mechanism/mechanism.h. Which threads to stop is
 * not decided by the mechanism: that is the sampling rule's
 * (ptrace/rule/rule.h), which calls it and is called back only through the ops
 * structures it gives (struct pt_stop_ops, struct pt_thread_ops).
 *
 * Every function here runs on the tracer thread (the sampler thread), the
 * only thread that calls ptrace or waitpid (CONVENTIONS H12), except where
 * noted. */
#ifndef PT_TRACEE_H
#define PT_TRACEE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/core/types.h"

struct pt_rt_line;
struct pt_runtimes;
struct pt_space;
struct pt_tracee;
struct pt_tracer;

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
/* 1 if the target runs a language runtime whose frames are read in a
 * thread's stop (CPython: ptrace/runtimes/runtimes.h), so its threads must
 * be sampled by stopping them. */
int pt_tracee_reads_in_stop(const struct pt_tracee *t);
/* Forgets the old program (maps, modules, caches) and resumes sampling. */
void pt_tracee_ack_exec(struct pt_tracee *t);
void pt_tracee_stats(const struct pt_tracee *t, struct pt_tracee_stats *out);
/* The signal the owner sends its threads itself (struct pt_thread_ops
 * own_signal is asked about each stop for it), 0: none. */
void pt_tracee_set_own_signal(struct pt_tracee *t, int sig);
/* Its signals passed on so far (pt_tracee_stats' signals_reinjected). */
uint64_t pt_tracee_signals(const struct pt_tracee *t);
/* t's address space (ptrace/space/space.h): its maps, memory, modules,
 * the naming of its addresses; owned by t. */
struct pt_space *pt_tracee_space(struct pt_tracee *t);
/* Between the pieces of long work for t on the tracer thread: every
 * tracee's waiting stops answered, at most every PT_TRACER_BREATHE_NS
 * (pt_tracer_breathe, tracer.h). */
void pt_tracee_breathe(struct pt_tracee *t);
/* t's language runtimes (ptrace/runtimes/runtimes.h), detected at attach
 * and exec; owned by t. */
struct pt_runtimes *pt_tracee_runtimes(struct pt_tracee *t);
/* Where token stands for a language runtime's frames (ptrace/core/
 * runtime.h: Python's), those frames, innermost first, at most max: names,
 * files and lines, strings owned by t (valid until the next exec). Returns
 * how many, 0 for any other address. */
int pt_tracee_rt_lines(struct pt_tracee *t, uint64_t token, struct pt_rt_line *out, int max);
/* The name the process's runtime gave its thread tid (ours: a Java
 * thread's, longer than its comm), into buf[0..len). Returns 1 if it has
 * one, else 0 (buf untouched). */
int pt_tracee_thread_name(struct pt_tracee *t, pid_t tid, char *buf, size_t len);
/* What looking for the process's language runtimes found, worth one log
 * line: the first call after a detection that found one (supported or
 * not) returns it, every other call NULL. */
const char *pt_tracee_rt_note(struct pt_tracee *t);
/* The CPU time the process used so far, all its threads, the exited ones
 * too (the sums of each thread's schedstat); once it has ended, what it
 * used in all (read as its leader's end was reported, before the reaping);
 * 0 if unreadable. */
uint64_t pt_tracee_cpu_ns(const struct pt_tracee *t);

/* With on, each clone event carries the parent's stack (taken while the
 * parent is stopped at the event anyway: no extra stop, a copy and an
 * unwind more per thread created). */
void pt_tracee_clone_stacks(struct pt_tracee *t, int on);

/* With on (the default), each new thread stops at its birth, its parent
 * at its clone event (PTRACE_O_TRACECLONE), and is known from there. With
 * off, new threads are not traced until their owner adopts them
 * (pt_tracee_adopt, pt_tracee_rescan), with no stop; clone stacks asked
 * for keep the clone events all the same. Threads already seized change in
 * their next stop: turned off, whenever it comes (none is stopped for it);
 * turned on, each interrupted for it once, one thread at a time (resumed
 * at once; follow.h). */
void pt_tracee_set_clone_stops(struct pt_tracee *t, int on);
/* 1 if new threads are to stop at their birth now (see above). */
int pt_tracee_clone_stops(const struct pt_tracee *t);
/* Seizes tid, a new thread of t created by parent at born_ns
 * (CLOCK_MONOTONIC; 0: not known), without a stop, and tells it born
 * (PT_EV_CLONE, no stack, born_ns). Returns 0 (known already too),
 * -ESRCH or -EPERM (ended or ending; traced already: one a clone event
 * reports), -E2BIG (max_threads), -ENOMEM. */
int pt_tracee_adopt(struct pt_tracee *t, pid_t tid, pid_t parent, uint64_t born_ns);
/* Seizes every thread of t that is listed in /proc but not known (created
 * by a thread before it was adopted, or while nobody followed them), each
 * told born (PT_EV_CLONE, parent 0) but counted from now; nothing if clone
 * stops were never off (every thread is known). Returns how many, or a
 * negative errno. */
int pt_tracee_rescan(struct pt_tracee *t);
struct pt_watch;
/* pt_tracer_watch and pt_tracer_unwatch (tracer.h) on t's tracer. */
int pt_tracee_watch(struct pt_tracee *t, int fd, struct pt_watch *w);
void pt_tracee_unwatch(struct pt_tracee *t, struct pt_watch *w);

/* Seizes every thread (PTRACE_SEIZE, following clones and execs; nothing is
 * stopped). Returns 0, -ESRCH (no such process), -EPERM (ptrace denied:
 * CAP_SYS_PTRACE missing or Yama), -E2BIG (over max_threads) or -ENOMEM. */
int pt_tracee_attach(struct pt_tracee *t);
/* Interrupts and detaches every thread, waiting at most timeout_ns; threads
 * still pending are detached when their stop arrives (pt_tracer_poll).
 * Returns 0 when fully detached, -EINPROGRESS otherwise. */
int pt_tracee_detach(struct pt_tracee *t, uint64_t timeout_ns);

#endif
