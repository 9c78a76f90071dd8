/* The stacks of parked goroutines (see parked.h). */
#include "ptrace/runtimes/go/parked.h"

#include <errno.h>
#include <string.h>

#include "ptrace/runtimes/go/gort.h"
#include "ptrace/space/mem.h"
#include "ptrace/space/space.h"
#include "ptrace/space/stackmem.h"
#include "ptrace/space/unwinder.h"

#define MAX_GO_STACK (1ull << 30)      /* Go's largest stack (runtime.maxstacksize, 1 GB) */

/* How much of a parked goroutine's stack to copy in one read: from its SP
 * up to the top of its stack (g.stack.hi), at most PT_GO_STACK_COPY; none
 * when the bounds read do not hold the SP (the walk then reads word by
 * word). */
static size_t stack_copy_len(const struct pt_go_g *g)
{
	if (g->stack_lo >= g->stack_hi || g->stack_hi - g->stack_lo > MAX_GO_STACK ||
	    g->sp < g->stack_lo || g->sp >= g->stack_hi)
		return 0;
	return g->stack_hi - g->sp < PT_GO_STACK_COPY ? (size_t)(g->stack_hi - g->sp) : PT_GO_STACK_COPY;
}

/* One goroutine's stack from its saved registers: the walk reads its stack
 * from copy (copy_len bytes from its SP), past it from memory. */
static int unwind_one(struct pt_space *as, const struct pt_go_g *g, uint8_t *copy, size_t copy_len,
		      uint64_t *frames)
{
	struct pt_capture cap;
	int complete, n;

	memset(&cap, 0, sizeof(cap));
	cap.regs.rip = g->pc;
	cap.regs.rsp = g->sp;
	cap.regs.rbp = g->bp;
	cap.regs.r14 = g->g;   /* Go code's g register */
	cap.stack = copy_len ? copy : NULL;
	cap.stack_len = copy_len;
	n = pt_unwind(pt_space_unwinder(as), &cap, frames, PT_GO_MAX_FRAMES, &complete);
	/* A return address names the call before it, as every caller's. */
	if (n > 0 && g->pc_is_ret)
		frames[0] -= 1;
	return n;
}

int pt_go_unwind_parked(struct pt_go *go, struct pt_space *as, const struct pt_go_g *const *batch,
			size_t n, struct pt_go_parked *pk)
{
	struct pt_mem_region r[PT_GO_BATCH];
	int err;

	if (n > PT_GO_BATCH)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		r[i] = (struct pt_mem_region){ batch[i]->sp, pk->copies + i * PT_GO_STACK_COPY,
					       stack_copy_len(batch[i]), 0 };
	if ((err = pt_space_read_regions(as, r, n)))
		return err;
	for (size_t i = 0; i < n; i++)
		pk->n[i] = unwind_one(as, batch[i], r[i].buf, r[i].err ? 0 : r[i].len, pk->frames[i]);
	return pt_go_recheck_many(go, batch, n, pk->ok);
}
