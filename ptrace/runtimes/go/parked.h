/* The stacks of parked goroutines (gort.h's, not running on a thread),
 * each unwound from where it saved its registers: a batch's stacks copied
 * in one read, unwound, then the batch re-checked in one more read
 * (pt_go_recheck_many), so that a goroutine that moved meanwhile is told,
 * never given a stack it no longer has. For the goroutine dump
 * (ptrace/sessions/goroutines.c) and where goroutines wait
 * (ptrace/sessions/gowaits.c). Sampler thread only. */
#ifndef PT_GO_PARKED_H
#define PT_GO_PARKED_H

#include <stddef.h>
#include <stdint.h>

struct pt_go;
struct pt_go_g;
struct pt_space;

#define PT_GO_BATCH 64              /* goroutines unwound in one call */
#define PT_GO_MAX_FRAMES 128        /* a goroutine's stack, as Go's profiles keep at most */
#define PT_GO_STACK_COPY 8192       /* bytes of a parked goroutine's stack copied at once */

struct pt_go_parked {
	uint64_t frames[PT_GO_BATCH][PT_GO_MAX_FRAMES];   /* innermost first */
	int n[PT_GO_BATCH];
	uint8_t ok[PT_GO_BATCH];    /* 0: it moved while read; its frames do not hold */
	uint8_t copies[PT_GO_BATCH * PT_GO_STACK_COPY];
};

/* Unwinds batch[0..n) (n <= PT_GO_BATCH), parked goroutines of the process
 * whose address space is as, into pk (frames, n, ok for batch[i] at i).
 * Returns 0 or a negative errno (-ESRCH: the process is gone, -ENOMEM). */
int pt_go_unwind_parked(struct pt_go *go, struct pt_space *as, const struct pt_go_g *const *batch,
			size_t n, struct pt_go_parked *pk);

#endif
