/* A stack table: distinct (thread, stack) pairs with their values, bounded
 * by the number of distinct stacks (never by duration). Every kind of
 * session that gathers stacks aggregates into one, and the neutral profile
 * is built from it (ptrace/profile/profile.h). Sampler thread only. */
#ifndef PT_STACKS_H
#define PT_STACKS_H

#include <stddef.h>
#include <stdint.h>

#include "ptrace/core/types.h"

struct pt_stacks;

/* A table of at most max_stacks distinct stacks. Returns 0 or -ENOMEM. */
int pt_stacks_new(struct pt_stacks **out, size_t max_stacks);
/* NULL-safe. */
void pt_stacks_free(struct pt_stacks *st);
/* Adds values v[0..PT_MAX_VALUES) to smp's (tid, stack), remembering the
 * thread's name, state and system call at its first sight. Returns the
 * entry's id (0, 1, ... in order of first sight: the index of its sample in
 * the built profile), -E2BIG (a new stack past max_stacks: counted as
 * dropped) or -ENOMEM. */
int pt_stacks_add(struct pt_stacks *st, const struct pt_sample *smp, const int64_t *v);
/* Adds every entry of src, its values times sign (1 or -1), to dst (summed
 * where the stack is there already). Returns 0 or -ENOMEM; stacks past
 * dst's cap are dropped. */
int pt_stacks_merge(struct pt_stacks *dst, const struct pt_stacks *src, int sign);
/* Distinct stacks held, new stacks refused at the cap, and frames held. */
size_t pt_stacks_count(const struct pt_stacks *st);
uint64_t pt_stacks_dropped(const struct pt_stacks *st);
size_t pt_stacks_nframes(const struct pt_stacks *st);
/* Adds v to a copy of e's stack (e may point into st: it is copied first)
 * under one more leaf frame, `mark` (a PT_MARK_* pseudo address), for no
 * thread (tid 0): what is known of threads that ended, not of one. Returns
 * as pt_stacks_add, 0 for an id. */
int pt_stacks_add_under(struct pt_stacks *st, const struct pt_sample *e, uint64_t mark,
			const int64_t *v);
/* What pt_stacks_spread spreads, and over what. */
struct pt_spread {
	uint64_t mark;                 /* the leaf frame every share goes under */
	/* entry id's weight (e, v: the entry), 0 for an entry that takes none */
	uint64_t (*weight)(void *arg, size_t id, const struct pt_sample *e, const int64_t *v);
	void *arg;
	uint64_t alone;                /* a weight beside the entries': its share goes under the mark alone */
};
/* Adds `amount` (as the second value, the first 0) under s->mark to copies
 * of entries 0..n-1 (n <= pt_stacks_count) in proportion to their weights
 * and s->alone's, rounding losing nothing (each share is what is left in
 * proportion to the weight left); all of it under the mark alone when
 * nothing weighs. Stops at the first refusal (a table full: the rest is
 * not added). Returns the amount added; *copies (if not NULL) is added the
 * number of new stacks (copies that merged with one made before are not). */
uint64_t pt_stacks_spread(struct pt_stacks *st, size_t n, const struct pt_spread *s, uint64_t amount,
			  uint64_t *copies);
/* Adds v[0..PT_MAX_VALUES) to entry id (< pt_stacks_count). */
void pt_stacks_add_to(struct pt_stacks *st, size_t id, const int64_t *v);
/* Entry id (< pt_stacks_count) as a sample (its frames, name and state,
 * pointing into the table: valid until it changes) and its values
 * v[0..PT_MAX_VALUES). */
void pt_stacks_get(const struct pt_stacks *st, size_t id, struct pt_sample *smp, int64_t *v);

#endif
