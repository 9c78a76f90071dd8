/* The stacks cached at stops: a thread stopped for a thread dump or a
 * state report keeps its stack, which holds for as long as the thread does
 * not run. Sampler thread only. */
#ifndef PT_SNAPCACHE_H
#define PT_SNAPCACHE_H

#include <stdint.h>

#include "ptrace/core/types.h"

struct pt_rule;
struct pt_rule_thread;
struct pt_thread;

/* What a snapshot's or a state report's stops report to (arg: the rule):
 * each stack kept in its thread's cache, then passed to r->snap_cb. */
extern const struct pt_stop_ops pt__snapcache_ops;
/* 1 if th's cached stack still holds at CPU time run: it has not run since
 * (run is what it was at the capture), or ran only to go back into the same
 * system call at the same stack and instruction pointers after our stop
 * woke it. */
int pt__snapcache_still_valid(struct pt_thread *th, uint64_t run);
/* 1 if th, blocked anew, waits where its cached stack was taken. */
int pt__snapcache_same_place(struct pt_thread *th);
/* Stops sel (a snapshot's or a state report's), keeping their stacks;
 * samples go to cb (may be NULL), pauses to timing (may be NULL), with arg.
 * Returns how many were captured now. */
int pt__snapcache_collect(struct pt_rule *r, struct pt_thread **sel, int nsel, uint64_t wait_ns,
			  pt_sample_cb cb, pt_timing_cb timing, void *arg);
/* A stop of ours is to cut (or cut) system call nr, made at sp and pc
 * (nr < 0: none): a timed wait goes on as restart_syscall. */
void pt__cut_note(struct pt_rule_thread *rt, int nr, uint64_t sp, uint64_t pc);
/* 1 if a restart_syscall at sp and pc goes on with the call a stop of ours
 * cut there (rt->cut_syscall). */
int pt__cut_here(const struct pt_rule_thread *rt, uint64_t sp, uint64_t pc);
/* Frees th's cache (the mechanism forgets or resets th). */
void pt__snapcache_drop(struct pt_thread *th);

#endif
