/* The agent's fast stack walk: return addresses read with the CFA rules of
 * each one, kept in a cache by return address. A rule is what most frames
 * of x86-64 code have: the frame's CFA (the caller's stack pointer) is
 * rsp or rbp plus a constant, the return address and the saved rbp lie at
 * constant offsets from it. A miss reads the rule from the object's
 * .eh_frame (found through GCC's unwinder's own lookup, agent/findobj.c),
 * once per return address, and again after a dlclose that unloaded code. Frames whose rules are
 * anything else (signal frames, a CFA given by an expression or another
 * register) make the walk give up: the caller then unwinds with GCC's
 * unwinder, as before this cache. Internal to the agent; any thread, no
 * lock, no allocation. */
#ifndef PPA_UNWIND_H
#define PPA_UNWIND_H

#include <stdint.h>

/* Writes the return addresses of its caller's stack into f[0 .. max),
 * leaf first (the first, the return address into the caller), but those
 * at the top of the stack that lie in [skip_lo, skip_hi) (the agent's own
 * frames). Returns how many, or -1 when a frame's rule is not a simple one
 * (or on a machine other than x86-64): then nothing in f is meaningful. */
int ppa_unwind(uint64_t *f, uint32_t max, uint64_t skip_lo, uint64_t skip_hi);

/* In a fork's child (one thread): slots left half written by a thread of
 * the parent are emptied. */
void ppa_unwind_fork_child(void);

/* dlclose(handle) through real (glibc's): while it runs, the cache gives
 * no rule and keeps none; after it, if it unloaded an object, the rules
 * read before are misses (another object may now be mapped where the
 * unloaded one was). hooks.c's exported dlclose calls it. Returns what
 * real returned. */
int ppa_unwind_dlclose(void *handle, int (*real)(void *));

/* Figures for the tests: rules read from .eh_frame (misses), of them not
 * simple ones, cached rules refused as read before a dlclose (unloaded),
 * and cached rules refused as the code at their address changed with no
 * dlclose seen (stale). Process-wide. */
struct ppa_unwind_stats {
	uint64_t misses, complex, stale, unloaded;
};
void ppa_unwind_stats(struct ppa_unwind_stats *out);

#endif
