/* Offline unwinding of a captured thread state with libunwind's remote API
 * and accessors of our own: registers and stack words come from the capture
 * taken while the thread was stopped, other memory from the page cache, and
 * unwind tables from each module's .eh_frame_hdr in target memory (so deleted
 * binaries and the vDSO unwind too). Sampler thread only. */
#ifndef PT_UNWIND_H
#define PT_UNWIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

#include "ptrace/space/stackmem.h"

struct pt_maps;
struct pt_mem;
struct pt_modules;
struct pt_unwinder;

int pt_unwinder_new(struct pt_unwinder **out, struct pt_mem *mem, struct pt_modules *mods);
void pt_unwinder_free(struct pt_unwinder *u);
/* Maps used to find modules; not owned; must outlive the next pt_unwind(). */
void pt_unwinder_set_maps(struct pt_unwinder *u, const struct pt_maps *maps);
/* The first address since the last call that lay outside every mapping
 * (the maps may be stale: a library loaded since), or 0; clears it. */
uint64_t pt_unwinder_take_miss(struct pt_unwinder *u);
/* Code in [lo, hi) is a JIT's that neither unwind tables nor frame
 * pointers step (the JVM's code cache): a walk stops at its first frame
 * there and says where (pt_capture's jit_*), for the runtime that knows
 * that code to go on from (ptrace/runtimes/jvm/). lo == hi: none. */
void pt_unwinder_set_jit(struct pt_unwinder *u, uint64_t lo, uint64_t hi);
/* Drops libunwind's caches (exec). */
void pt_unwinder_flush(struct pt_unwinder *u);

/* Unwinds `cap` into frames[0..max), leaf first. frames[0] is the leaf PC;
 * later frames are return addresses minus one (inside the call instruction),
 * except a signal trampoline and the frame it interrupted, kept as they are. Returns the
 * number of frames (>= 1). *complete is set when the walk reached the
 * outermost frame rather than failing or hitting max. A walk that reaches
 * JIT code (pt_unwinder_set_jit) ends at that frame (cap's jit_*). */
int pt_unwind(struct pt_unwinder *u, struct pt_capture *cap, uint64_t *frames, int max,
	      int *complete);

#endif
