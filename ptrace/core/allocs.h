/* Allocation records with stacks, in neutral form: what the allocation
 * agent (ptrace/allocs/agentrec.c) or a Go runtime's memory-profile buckets
 * (ptrace/runtimes/go/gomem.c) hold about who allocated what, read from outside the
 * target. Values are the sampled counts, not scaled: pt_allocs_scale gives
 * Go's estimate of the true ones. Any thread (the records are plain data). */
#ifndef PT_ALLOCS_H
#define PT_ALLOCS_H

#include <stddef.h>
#include <stdint.h>

#define PT_ALLOCS_MAX_FRAMES 128     /* frames kept per stack */
#define PT_ALLOCS_MAX_VALUE (1ll << 46)   /* a count or byte total, read or estimated, at most */
#define PT_ALLOCS_MAX_STACKS 200000  /* stacks read from one target */

/* Reads len bytes of the target's memory at addr into buf. Returns 0, or a
 * negative errno (-EFAULT: not all of it was readable). */
typedef int (*pt_allocs_read_fn)(void *arg, uint64_t addr, void *buf, size_t len);

struct pt_alloc_stack {
	uint32_t first, n;               /* frames[first .. first + n), leaf first */
	uint64_t alloc_objects, alloc_bytes;
	uint64_t free_objects, free_bytes;
	uint64_t size;                   /* of each allocation counted (Go's buckets); 0: mixed */
};

struct pt_allocs {
	const char *source;          /* "agent" or "go" (static strings) */
	uint64_t rate;               /* mean bytes per sample; <= 1: every allocation */
	int rate_assumed;            /* the rate could not be read: the source's default */
	struct pt_alloc_stack *stacks;
	size_t nstacks, stacks_cap;
	/* Call sites: return addresses minus one (inside the call instruction),
	 * as pt_unwind gives every frame but the leaf. */
	uint64_t *frames;
	size_t nframes, frames_cap;
	uint64_t samples;            /* allocations sampled (agent; 0 if unknown) */
	uint64_t dropped;            /* samples the source could not record */
	uint64_t lost_frees;         /* frees of sampled blocks not recorded */
	int full;                    /* the source ran out of room for new stacks */
	int scaled;                  /* the counts are estimates already (the agent weighs
	                              * each sample by its own size); else as sampled */
	int forked;                  /* agent: records inherited from a parent at fork */
	int stopped;                 /* agent: records stopped in a fork child (found mid-update) */
	uint64_t start_ns;           /* CLOCK_REALTIME when records began, 0 if unknown */
};

/* Adds a stack (frames leaf first, already call sites) with its counters.
 * Stacks over PT_ALLOCS_MAX_FRAMES are cut (the outermost frames dropped).
 * Returns 0, -E2BIG past PT_ALLOCS_MAX_STACKS, or -ENOMEM. */
int pt_allocs_add(struct pt_allocs *a, const uint64_t *frames, uint32_t n,
		  const struct pt_alloc_stack *counts);
/* Frees what *a holds (not a itself) and zeroes it. */
void pt_allocs_clear(struct pt_allocs *a);

/* Go's unsampling (runtime/pprof scaleHeapSample): with avg = bytes/count,
 * both are multiplied by 1 / (1 - exp(-avg/rate)). rate <= 1 or count 0:
 * unchanged. Results are held to PT_ALLOCS_MAX_VALUE. */
void pt_allocs_scale(int64_t count, int64_t bytes, uint64_t rate, int64_t *count_out,
		     int64_t *bytes_out);

#endif
