/* Where a target keeps allocation records, and reading them into a stack
 * table: the allocation agent's area (its library mapped in the target,
 * ptrace/agentrec.h), else a Go runtime's memory-profile buckets (the
 * executable's symbols, ptrace/gomem.h). Sampler thread (it uses the
 * tracee's maps, symbols and memory). */
#ifndef PT_ALLOCSRC_H
#define PT_ALLOCSRC_H

#include "ptrace/allocs.h"

struct pt_stacks;
struct pt_tracee;

/* Reads t's records into out (overwritten). Returns 0; -ENOENT when the
 * target keeps none, or none yet (*why, a static sentence, says why);
 * -EPROTO when its records make no sense (*why says what); another
 * negative errno (-ESRCH, -EFAULT, -E2BIG, -ENOMEM). */
int pt_allocsrc_read(struct pt_tracee *t, struct pt_allocs *out, const char **why);

/* Adds every stack of a to st (a table of at most max stacks, made here if
 * *st is NULL) with the values Go's heap profile carries, estimated from
 * the samples (Go's unsampling, per record): alloc_objects, alloc_space,
 * inuse_objects, inuse_space (allocations less frees, never below zero).
 * Returns 0 or -ENOMEM; stacks past the table's cap are counted as dropped
 * in it. */
int pt_allocsrc_stacks(const struct pt_allocs *a, struct pt_stacks **st, size_t max);

#endif
