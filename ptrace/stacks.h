/* A stack table: distinct (thread, stack) pairs with their values, bounded
 * by the number of distinct stacks (never by duration), and the neutral
 * profile built from it (maps, named locations, samples). Every kind of
 * session that gathers stacks aggregates into one. Sampler thread only. */
#ifndef PT_STACKS_H
#define PT_STACKS_H

#include <stddef.h>
#include <stdint.h>

#include "ptrace/sampler.h"
#include "ptrace/tracee.h"

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
/* Removes the samples whose values are all zero (a delta's unchanged
 * stacks, as Go's delta profiles drop them). Never fails. */
void pt_profile_drop_zero(struct pt_profile *p);
/* Distinct stacks held, and new stacks refused at the cap. */
size_t pt_stacks_count(const struct pt_stacks *st);
uint64_t pt_stacks_dropped(const struct pt_stacks *st);

/* Builds the neutral profile of the table against t's current maps (read
 * again unless the process is gone): one map per executable mapping, one
 * named location per distinct address, one sample per entry. Times, hz and
 * counters are left for the caller. Returns 0 or -ENOMEM; *out is NULL on
 * failure. */
int pt_stacks_build(const struct pt_stacks *st, struct pt_tracee *t, struct pt_profile **out);

#endif
