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

struct pt_maps;
struct pt_mem;
struct pt_modules;
struct pt_unwinder;

/* A thread's state captured during one stop. */
struct pt_capture {
	struct user_regs_struct regs;
	uint8_t *stack;          /* copy of [regs.rsp, regs.rsp + stack_len) */
	size_t stack_len;
	/* [rsp + stack_len, rsp + stack_limit) is stack left uncopied: an
	 * unwind that needs it stops there (stack_short) rather than read the
	 * running thread's memory. stack_limit <= stack_len: none. */
	size_t stack_limit;
	/* The stack was copied by the kernel at a sample, the thread ran on
	 * (perf_event): what lies past the copy is read from its memory now,
	 * where callers' frames are most likely unchanged, and the unwind is
	 * still marked stack_short (its next copy can be larger). */
	int read_beyond;
	/* A Go thread stopped in its signal handler (on its signal stack): the
	 * stack the signal interrupted, copied in the same stop from the SP
	 * saved in the kernel's signal frame (see pt_capture_signal).
	 * sig_len 0: none. */
	uint8_t *sig_stack;      /* stack_bytes, allocated at first use */
	uint64_t sig_sp;
	size_t sig_len, sig_limit;
	/* set by pt_unwind */
	size_t stack_used;       /* bytes of stack the unwind read (past the copy too: read_beyond) */
	int stack_short;         /* it needed stack beyond the copy */
	/* The walk crossed Go's signal handler: where the kernel's ucontext
	 * lay and the bounds of the signal stack holding it (0: it did not).
	 * A thread's signal stack does not move: its next stop there can copy
	 * the interrupted stack too. */
	uint64_t sig_uc, sig_lo, sig_hi;
};

/* The interrupted SP and PC that a signal frame whose ucontext is at `uc`
 * holds, read from cap's stack copy. 0 if the copy does not hold it. */
int pt_capture_signal(const struct pt_capture *cap, uint64_t uc, uint64_t *sp, uint64_t *pc);

int pt_unwinder_new(struct pt_unwinder **out, struct pt_mem *mem, struct pt_modules *mods);
void pt_unwinder_free(struct pt_unwinder *u);
/* Maps used to find modules; not owned; must outlive the next pt_unwind(). */
void pt_unwinder_set_maps(struct pt_unwinder *u, const struct pt_maps *maps);
/* The first address since the last call that lay outside every mapping
 * (the maps may be stale: a library loaded since), or 0; clears it. */
uint64_t pt_unwinder_take_miss(struct pt_unwinder *u);
/* Drops libunwind's caches (exec). */
void pt_unwinder_flush(struct pt_unwinder *u);

/* Unwinds `cap` into frames[0..max), leaf first. frames[0] is the leaf PC;
 * later frames are return addresses minus one (inside the call instruction),
 * except a signal trampoline and the frame it interrupted, kept as they are. Returns the
 * number of frames (>= 1). *complete is set when the walk reached the
 * outermost frame rather than failing or hitting max. */
int pt_unwind(struct pt_unwinder *u, struct pt_capture *cap, uint64_t *frames, int max,
	      int *complete);

#endif
