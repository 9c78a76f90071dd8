/* How CPU samples are taken, as the sampler sees it: the backend of each
 * target (ptrace or perf_event, decided at its first session that samples:
 * ptrace/rule/perftick.h), said in the log and in each profile, and a first
 * look at start-up. The sampler's files (sampler.c and this one) share
 * its state (ptrace/sampler/state.h). */
#ifndef PT_BACKENDS_H
#define PT_BACKENDS_H

#include <stddef.h>
#include <sys/types.h>

#include "ptrace/core/types.h"

struct pt_event;
struct pt_profile;
struct pt_sampler;
struct pt_session;
struct pt__target;

/* Any thread, at start-up: whether this process may sample pid with perf
 * events (a first look; each target is decided at its first profile).
 * Returns 1 if `want` would sample with perf_event, 0 with ptrace, or the
 * negative errno of perf_event_open when want is PT_BACKEND_PERF and it
 * is refused; why says what was found. */
int pt_backend_probe(pid_t pid, enum pt_backend want, char *why, size_t len);

/* ---- the sampler's (sampler thread) ---------------------------------------- */

/* A session begins (before its kind's start): if it takes CPU samples over
 * a window, its target's backend is decided (`want` or auto's choice), and
 * `line` says so when that is news (else it is empty), for the log.
 * Returns 0 or the error of a perf_event backend asked for and refused. */
int pt__backend_begin(struct pt_session *ss, enum pt_backend want, char *line, size_t len);
/* A session ended (out of the sessions): if it took CPU samples and no
 * other session samples its target, the target's perf events stop. */
void pt__backend_end(struct pt_sampler *s, struct pt_session *ss);
/* The profile of a session that took CPU samples says how, why, and what
 * was lost. */
void pt__backend_note(struct pt_session *ss, struct pt_profile *p);
/* How many sampling periods (`period`) apart the ticks may come: more
 * than 1 when every session that ticks takes CPU samples at that period
 * from a target sampled with perf_event (the kernel took the samples: a
 * tick only reads them, PT_PERF_DRAIN_NS apart), else 1. */
uint64_t pt__backend_tick_every(const struct pt_sampler *s, uint64_t period);
/* A thread of tg was born or ended: its perf event opens, or is read a
 * last time and closed. */
void pt__backend_event(struct pt__target *tg, const struct pt_event *ev);

#endif
