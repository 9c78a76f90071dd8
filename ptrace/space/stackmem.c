/* A capture read as memory (see stackmem.h). Sampler thread only. */
#include "ptrace/space/stackmem.h"

#include <errno.h>
#include <string.h>

#include "ptrace/proc/proc.h"
#include "ptrace/space/mem.h"

/* The most a kernel's stack copy can hold (perf_event's sample_stack_user
 * is 16-bit): reads past a copy further than that cannot size the next. */
#define KERNEL_COPY_MAX 65536u

int pt__stackmem_word(struct pt__walk *w, uint64_t addr, uint64_t *val)
{
	const struct pt_capture *cap = w->cap;
	uint64_t sp = cap->regs.rsp;

	if (addr >= sp && addr - sp + sizeof(*val) <= cap->stack_len) {
		memcpy(val, cap->stack + (addr - sp), sizeof(*val));
		if (addr - sp + sizeof(*val) > w->used)
			w->used = addr - sp + sizeof(*val);
		return 0;
	}
	if (addr >= sp && addr - sp < cap->stack_limit) {
		w->short_copy = 1;
		if (!cap->read_beyond)
			return -EFAULT;
		/* read from memory after the sample: how much the copy lacked
		 * (as far as a kernel's copy can reach) */
		if (addr - sp + sizeof(*val) > w->used && addr - sp < KERNEL_COPY_MAX)
			w->used = addr - sp + sizeof(*val);
	}
	if (cap->sig_len && addr >= cap->sig_sp) {
		/* The stack a Go signal interrupted, copied in the same stop. */
		if (addr - cap->sig_sp + sizeof(*val) <= cap->sig_len) {
			memcpy(val, cap->sig_stack + (addr - cap->sig_sp), sizeof(*val));
			return 0;
		}
		if (addr - cap->sig_sp < cap->sig_limit)
			return -EFAULT;
	}
	return pt_mem_read(w->mem, addr, val, sizeof(*val)) ? -EFAULT : 0;
}

int pt__stackmem_is_code(struct pt__walk *w, uint64_t addr)
{
	const struct pt_map *m = pt_maps_find(w->maps, addr);

	if (!m && !*w->miss)
		*w->miss = addr;
	return m && (m->flags & PT_MAP_X);
}
