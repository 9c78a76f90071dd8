/* Where a target keeps allocation records, and reading them into a stack
 * table: the allocation agent's area (its library mapped in the target,
 * ptrace/allocs/agentrec.h), else a Go runtime's memory-profile buckets (the
 * executable's symbols, ptrace/runtimes/go/gomem.h). Sampler thread (it uses the
 * tracee's maps, symbols and memory). */
#ifndef PT_ALLOCSRC_H
#define PT_ALLOCSRC_H

#include "ptrace/core/allocs.h"

struct pt_stacks;
struct pt_tracee;

#define PT_ALLOCSRC_MAX 2   /* the agent's, and a Go runtime's (a cgo program may have both) */

/* Reads t's records into out[0 .. *n) (overwritten): a Go runtime's when
 * the executable is Go's, then the agent's when its library is loaded.
 * Returns 0 with *n >= 1; -ENOENT when the target keeps none, or none yet (*why, a
 * static sentence, says why); -EPROTO when its records make no sense (*why
 * says what); another negative errno (-ESRCH, -EFAULT, -E2BIG, -ENOMEM).
 * With two sources, one that fails (but for -ENOMEM and -ESRCH) is left
 * out and *why says why. The caller clears each out[i] in any case. */
int pt_allocsrc_read(struct pt_tracee *t, struct pt_allocs out[PT_ALLOCSRC_MAX], int *n,
		     const char **why);

/* Adds every stack of a to st (a table of at most max stacks, made here if
 * *st is NULL) with the values Go's heap profile carries, estimated from
 * the samples (Go's unsampling, per record): alloc_objects, alloc_space,
 * inuse_objects, inuse_space (allocations less frees, never below zero).
 * Returns 0 or -ENOMEM; stacks past the table's cap are counted as dropped
 * in it. */
int pt_allocsrc_stacks(const struct pt_allocs *a, struct pt_stacks **st, size_t max);

#endif
