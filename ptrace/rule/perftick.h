/* The CPU tick of the perf_event backend, one of the rule's files (see
 * ptrace/rule/rule.h): instead of stopping the due threads, it reads what the
 * kernel sampled since the last tick from each thread's ring
 * (ptrace/perf/perfev.h) and hands each sample to the mechanism as a capture
 * (pt_stop_put_copy), weighed by the CPU its thread used since its
 * previous sample (the event's count). Sampler thread only. */
#ifndef PT_PERFTICK_H
#define PT_PERFTICK_H

#include <stdint.h>
#include <sys/types.h>

#include "ptrace/core/types.h"

struct pt_rule;
struct pt_thread;

/* Under perf_event a tick only reads the rings (the kernel took the
 * samples): the sampler then ticks this far apart at least, not once per
 * sampling period (backends.h), and each ring holds twice what a thread
 * can take in that time and three samples more (for a drain that comes
 * late: the sampler shares the cores with the busy threads it samples). */
#define PT_PERF_DRAIN_NS 5000000ull

/* Decides how t's CPU samples are taken, once, at its first session that
 * samples (*fresh then 1, for a log line): want (ptrace/core/types.h), with
 * auto taking perf_event where perf_event_open allows it, except for a
 * CPython target (its frames are read in a stop). Returns 0, or the
 * negative errno of perf_event_open when perf_event was asked for and
 * refused (pt_perftick_backend's why says why). */
int pt_perftick_choose(struct pt_rule *r, enum pt_backend want, int *fresh);
/* The backend decided (ptrace until then) and, if why is not NULL, why. */
enum pt_backend pt_perftick_backend(const struct pt_rule *r, const char **why);
/* A thread of t was born (its clone event, its adoption, or a rescan that
 * found it: PT_EV_CLONE): under perf_event, its event opens now. */
void pt_perftick_born(struct pt_rule *r, pid_t tid);
/* A thread of t ended (before the sessions are told): under perf_event,
 * what its ring holds is reported now and its event closed. */
void pt_perftick_ended(struct pt_rule *r, pid_t tid);
/* A session that samples t begins: its events (if any) sample again from
 * now, not from the next tick. */
void pt_perftick_resume(struct pt_rule *r);
/* No session samples t now: its perf events (if any) stop sampling until
 * the next tick that samples; under ptrace, no draw is armed again
 * (cpudraw.h). */
void pt_perftick_idle(struct pt_rule *r);

/* ---- the rule's (rule.c) ---------------------------------------------------- */

/* One tick: opens the events of threads that have none (enabled, their
 * first period a random part of the tick period), drains every ring,
 * reports the samples to cbs->sample (to nobody if NULL: their CPU is
 * passed over; with nobody sampling, the events stay off). Returns the
 * number reported. */
int pt__perf_tick(struct pt_rule *r, uint64_t period_ns, const struct pt_tick_cbs *cbs);
/* The CPU th used since its last sample (its next sample carries it). */
uint64_t pt__perf_pending(struct pt_rule *r, struct pt_thread *th);
/* A thread's birth (struct pt_thread_ops): 1 while the perf_event
 * backend samples (its events opened at birth, before the thread runs);
 * opens th's event. arg is the rule. */
int pt__perf_early(void *arg);
void pt__perf_born(void *arg, struct pt_thread *th);
/* Closes th's event (the thread is forgotten or exec'd). */
void pt__perf_drop(struct pt_thread *th);

#endif
