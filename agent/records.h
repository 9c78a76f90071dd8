/* The agent's records (agent/area.h is their published layout): one fixed
 * area mapped at set-up, holding the distinct stacks that allocated
 * sampled blocks with their counters and the table of sampled blocks still
 * live; and, in the agent's own data, a filter that lets a free learn in
 * one load that its block was not sampled. Internal to the agent; every function may run on any thread,
 * before or after the agent's constructor, inside a signal handler, and
 * never blocks for long (a busy table drops the event and counts it). */
#ifndef PPA_RECORDS_H
#define PPA_RECORDS_H

#include <stddef.h>
#include <stdint.h>
#include <unwind.h>

#include "agent/area.h"
#include "agent/unwind.h"

/* Sets the area up once (later calls return at once). Returns 1 when the
 * records are usable, 0 while another thread sets them up, -1 when they
 * never will be (sampling off, no memory, a fork child's records stopped:
 * the agent then only passes calls through). */
int ppa_records_ready(void);
/* The sampling rate read at set-up (PODPROF_ALLOC_RATE; 0: off). */
uint64_t ppa_records_rate(void);
/* Captures the running stack into f[0 .. PPA_MAX_FRAMES) (return
 * addresses, leaf first), the agent's own frames left out; returns how
 * many. The cached rules of agent/unwind.c first; GCC's unwinder for a
 * stack they cannot walk (~0.1 us a frame), inline so that it starts in
 * the hook that calls it (the agent's own frames, those of functions that
 * would call a capture function, were most of a sample's). */
struct ppa_walk {
	uint64_t *f;
	uint32_t n;
};
_Unwind_Reason_Code ppa_records_step(struct _Unwind_Context *c, void *arg);
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char __etext[] __attribute__((visibility("hidden")));

static inline __attribute__((always_inline)) uint32_t ppa_records_capture(uint64_t *f)
{
	struct ppa_walk w = { f, 0 };
	int n = ppa_unwind(f, PPA_MAX_FRAMES, (uint64_t)(uintptr_t)__ehdr_start,
			   (uint64_t)(uintptr_t)__etext);

	if (n >= 0)
		return (uint32_t)n;
	_Unwind_Backtrace(ppa_records_step, &w);
	return w.n;
}

/* Records a sampled allocation of size bytes at p, made at stack
 * f[0 .. n) (ppa_records_capture's). */
void ppa_records_alloc(void *p, size_t size, const uint64_t *f, uint32_t n);
/* The filter of live sampled blocks (a count per hash of the address), in
 * the agent's own zeroed data (no pointer to load, no NULL to test: free's
 * fast path is a shift, a mask, one load and a branch not taken): private to
 * records.c but for the inline test below, which free's fast path makes
 * without a call. Untouched pages of it cost no memory. */
#define PPA_FILTER_BITS 16
extern uint8_t ppa__filter[1u << PPA_FILTER_BITS] __attribute__((visibility("hidden")));

/* The filter's byte of block p: the top 16 bits of the low 32 of its
 * address times 0x09e3779b, which is 2^28 over the golden ratio: glibc's
 * blocks are 16-byte aligned, so that is Fibonacci hashing of the block's
 * 16-byte unit, and packed blocks, page- and MiB-aligned ones (buffer
 * pools, glibc's own mmapped chunks) all spread over the filter. A byte
 * shared with a live sampled block lets a free through to a lookup that
 * finds nothing: some 50-100 ns, never a wrong count. One 32-bit multiply
 * by an immediate and a shift: a 64-bit multiplying hash, or shifts and a
 * xor, cost free's fast path 0.2-0.3 ns a pair more (docs/BENCHMARKS.md). */
static inline size_t ppa__filter_at(const void *p)
{
	return (size_t)(((uint32_t)(uintptr_t)p * 0x09e3779bu) >> (32 - PPA_FILTER_BITS));
}

/* 1 when p may be a sampled block (then call ppa_records_free), 0 when it
 * surely is not. One load. */
static inline int ppa_records_maybe(const void *p)
{
	return __atomic_load_n(&ppa__filter[ppa__filter_at(p)], __ATOMIC_RELAXED) != 0;
}
/* A live sampled block, as ppa_records_free found it. */
struct ppa_block {
	uint32_t stack;
	uint64_t size;
};
/* Counts the free of p if it is a live sampled block; returns 1 if it was
 * (*b then says which), 0 if not. Call before the block goes back to the
 * allocator. */
int ppa_records_free(const void *p, struct ppa_block *b);
/* Undoes a ppa_records_free that returned 1 (a realloc that failed keeps
 * its block): the block is live again under its stack. */
void ppa_records_unfree(const void *p, const struct ppa_block *b);
/* fork: the parent takes the records' lock before fork and each side
 * releases it after; the child marks its records as inherited. */
void ppa_records_fork_prepare(void);
void ppa_records_fork_parent(void);
void ppa_records_fork_child(void);

#endif
