/* Draws: under the ptrace backend, a thread born while a session samples
 * is stopped by the CPU it used rather than looked for at the ticks (one of
 * the rule's files: ptrace/rule/rule.h). As it starts it gets a
 * counting event that signals it after a random part of a period of its
 * CPU, then after every period (ptrace/perf/cpuwake.h); each such stop is
 * where the thread runs, captured as a late sample of the ticks' and
 * weighed one period: a thread of 330 us is drawn about once in 30 births
 * at 100 Hz, and each draw stands for the period that drew it, so what
 * such threads used is sampled, not settled on their last stacks, on
 * average over many. The ticks leave these threads alone (their CPU is the
 * draws'). Where perf_event_open is refused, nothing is drawn: the ticks
 * sample every thread as before. Sampler thread only. */
#ifndef PT_CPUDRAW_H
#define PT_CPUDRAW_H

#include <signal.h>
#include <stdint.h>

struct pt_rule;
struct pt_thread;

/* A sampling tick at cpu_period_ns: new draws are armed from now, at that
 * period (and those a pause left unarmed, again). */
void pt__draw_tick(struct pt_rule *r, uint64_t cpu_period_ns);
/* No session samples now: no draw is armed again (armed ones fire once
 * more, and their stops are still told apart). */
void pt__draw_idle(struct pt_rule *r);
/* A thread born while traced, let go with its parent (struct
 * pt_thread_ops started): while draws are armed, arms th's first draw.
 * Not in the birth stop: the parent waits there too, and a CPython parent
 * holds the GIL every thread waits for (an open there cost a
 * ThreadingHTTPServer a tenth of its requests a second). arg is the rule. */
void pt__draw_born(void *arg, struct pt_thread *th);
/* struct pt_thread_ops own_signal: 1 if si is th's draw, whose period is
 * then th's pending sample weight (rule_thread cpu_ns), armed again. */
int pt__draw_own_signal(void *arg, struct pt_thread *th, const siginfo_t *si);
/* 1 if th is drawn (armed): the ticks neither select it nor count its
 * CPU as pending (only a draw not reported yet is). */
int pt__drawn(struct pt_thread *th);
/* Closes th's event (the thread is forgotten or exec'd). */
void pt__draw_drop(struct pt_thread *th);

#endif
