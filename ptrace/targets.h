/* The processes the sampler traces: a table of targets (struct
 * pt__target, sampler_state.h), found or made by pid, forgotten when
 * gone and unused (the sampler seizes them, sampler.c target_attach). Sampler thread only. */
#ifndef PT_TARGETS_H
#define PT_TARGETS_H

#include <sys/types.h>

struct pt__target;
struct pt_sampler;

/* The target of pid, found or made (not attached): NULL with *err set
 * (-EBUSY when the table is full of targets in use). To make room it may
 * forget targets nobody uses (the last target then moves to the freed
 * slot), but not without `evict`: inside a poll (a fork's child adopted)
 * a caller outside may hold a target's address across it. */
struct pt__target *pt__target_get(struct pt_sampler *s, pid_t pid, int evict, int *err);
/* Forgets target i, which no session uses: the last target takes its
 * slot, and the sessions of that one follow it there. */
void pt__target_forget(struct pt_sampler *s, int i);
/* Frees what tg holds: the kinds' state, its tracee and its rule. */
void pt__target_free(struct pt__target *tg);

#endif
