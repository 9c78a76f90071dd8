/* A thread's state as a stop or a kernel sample copied it (struct
 * pt_capture: its registers and a copy of its stack), and the reads a walk
 * of its frames makes through it: the copy first, target memory past it
 * where that is allowed. The unwinder (unwinder.c) and Go's frames
 * (gowalk.c) read through it. Sampler thread only. */
#ifndef PT_STACKMEM_H
#define PT_STACKMEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

struct pt_maps;
struct pt_mem;
struct pt_modules;

/* A thread's state captured during one stop. */
struct pt_capture {
	struct user_regs_struct regs;
	uint8_t *stack;          /* copy of [regs.rsp, regs.rsp + stack_len) */
	size_t stack_len;
	size_t stack_room;       /* bytes allocated at stack (its owner grows it) */
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
	/* The walk reached code it does not step (a JIT's: see
	 * pt_unwinder_set_jit) and stopped there: frames[jit_at] is the first
	 * frame in it, whose pc, SP and BP the walk recovered as jit_pc,
	 * jit_sp, jit_bp (jit_exact: a pc where the thread stopped or a signal
	 * interrupted it, else a return address). -1: it did not. */
	int jit_at, jit_exact;
	uint64_t jit_pc, jit_sp, jit_bp;
};

/* One walk over a capture: where its reads go and what they record. */
struct pt__walk {
	struct pt_mem *mem;
	struct pt_modules *mods;
	const struct pt_maps *maps;  /* NULL: none known yet */
	uint64_t *miss;          /* the first address found outside every mapping (0: none) */
	unsigned int *m_curg;    /* Go: the offset of m.curg once found (0: not yet) */
	uint64_t jit_lo, jit_hi; /* code the walk stops at (none: equal) */
	struct pt_capture *cap;
	/* The registers libunwind starts from: the capture's, or those of the
	 * frame where a walk crossed from Go code into C code. */
	struct user_regs_struct regs;
	size_t used;     /* end of the furthest word of the stack read (from the
			  * copy, or past it from memory: read_beyond) */
	int short_copy;  /* a read fell in the uncopied part of the stack */
};

/* Where a walk stands between frames: the frame whose caller is next, as
 * the address it executes (pc: exact for the leaf and for a frame a signal
 * interrupted, else a return address) and its SP and BP. */
struct pt__walk_state {
	uint64_t pc, sp, bp;
	int exact;
};

/* Why a part of the walk (Go or C frames) handed over. */
enum pt__hand {
	PT__HAND_DONE,   /* the walk is over (*complete says how) */
	PT__HAND_GO,     /* the next frame to step from is Go code */
	PT__HAND_C,      /* ... is code libunwind steps (C, assembly with CFI) */
};

/* At most this many switches between Go and C frames, and stack switches
 * (cgo calls, signal frames), in one walk: a lying stack cannot make the
 * walk bounce for ever. */
#define PT__MAX_CROSSINGS 16

/* Reads the word at addr as the walk sees memory: from the stack copy
 * where it holds addr; in the stack's uncopied part only where the capture
 * allows reads beyond (a kernel's copy), noting the copy was short; the
 * stack a Go signal interrupted from its own copy; anything else from
 * target memory. Returns 0 or -EFAULT. */
int pt__stackmem_word(struct pt__walk *w, uint64_t addr, uint64_t *val);
/* 1 if addr lies in executable memory of the maps (an address outside
 * every mapping is noted in *w->miss: the maps may be stale). */
int pt__stackmem_is_code(struct pt__walk *w, uint64_t addr);

#endif
