/* The processes the sampler traces: a table of targets (struct
 * pt__target, state.h), found or made by pid, forgotten when
 * gone and unused, seized when a request needs them. Sampler thread only. */
#ifndef PT_TARGETS_H
#define PT_TARGETS_H

#include <stdint.h>
#include <sys/types.h>

struct pt__target;
struct pt_event;
struct pt_sampler;
struct pt_session;

/* The target of pid, found or made (not attached): NULL with *err set
 * (-EBUSY when the table is full of targets in use). To make room it may
 * forget targets nobody uses (the last target then moves to the freed
 * slot), but not without `evict`: inside a poll (a fork's child adopted)
 * a caller outside may hold a target's address across it. */
struct pt__target *pt__target_get(struct pt_sampler *s, pid_t pid, int evict, int *err);
/* Forgets target i, which no session uses: the last target takes its
 * slot, and the sessions of that one follow it there. */
void pt__target_forget(struct pt_sampler *s, int i);
/* Seizes tg's process if it is not traced yet (a detach that timed out
 * ended first). Returns 0, -EBUSY (that detach still cannot end) or the
 * attach's negative errno. */
int pt__target_attach(struct pt_sampler *s, struct pt__target *tg);
/* tg's last session ended (now): it stays traced for the detach grace,
 * unless it gets a signal meanwhile (see idle() in sampler.c). Each signal
 * to a traced thread is a round trip through podprof: a Go program's
 * runtime sends SIGURG every 10 ms of a running goroutine, and traced
 * between goroutine dumps a second it lost 1 % of its progress (0.3 % let
 * go after each dump). */
void pt__target_idle(struct pt__target *tg, uint64_t now);
/* State that outlives sessions, kept per target (a cumulative profile's
 * totals since podprof started watching): the slot of `key` (any address
 * the kind owns), NULL at first; free_fn frees what it holds when the target
 * is forgotten; event_fn (may be NULL) gets every thread event of the
 * target from then on, sessions or not, with clone stacks. Returns NULL if
 * the target has no slot left. For session kinds. */
void **pt__target_slot(struct pt_session *ss, const void *key, void (*free_fn)(void *),
		       void (*event_fn)(void *p, const struct pt_event *ev));
/* Frees what tg holds: the kinds' state, its tracee and its rule. */
void pt__target_free(struct pt__target *tg);

#endif
