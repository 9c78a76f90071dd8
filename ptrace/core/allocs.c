/* Allocation records in neutral form (see allocs.h). */
#include "ptrace/core/allocs.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "base/array.h"
#include "base/mem.h"

int pt_allocs_add(struct pt_allocs *a, const uint64_t *frames, uint32_t n,
		  const struct pt_alloc_stack *counts)
{
	struct pt_alloc_stack *s;

	if (n > PT_ALLOCS_MAX_FRAMES)
		n = PT_ALLOCS_MAX_FRAMES;
	if (a->nstacks >= PT_ALLOCS_MAX_STACKS)
		return -E2BIG;
	if (BASE_ARRAY_GROW(a->frames, a->frames_cap, a->nframes + n))
		return -ENOMEM;
	if (!(s = BASE_ARRAY_PUSH(a->stacks, a->nstacks, a->stacks_cap)))
		return -ENOMEM;
	*s = *counts;
	s->first = (uint32_t)a->nframes;
	s->n = n;
	/* No frames (a Go bucket's stack can be empty): frames may be NULL
	 * while nothing was added yet, and memcpy is not given it. */
	if (n)
		memcpy(a->frames + a->nframes, frames, n * sizeof(*frames));
	a->nframes += n;
	return 0;
}

void pt_allocs_clear(struct pt_allocs *a)
{
	base_free(a->stacks);
	base_free(a->frames);
	memset(a, 0, sizeof(*a));
}

void pt_allocs_scale(int64_t count, int64_t bytes, uint64_t rate, int64_t *count_out,
		     int64_t *bytes_out)
{
	double avg, scale;

	*count_out = count;
	*bytes_out = bytes;
	if (rate <= 1 || count <= 0 || bytes <= 0)
		return;
	avg = (double)bytes / (double)count;
	scale = 1.0 / -expm1(-avg / (double)rate);
	*count_out = (double)count * scale < (double)PT_ALLOCS_MAX_VALUE ?
			     (int64_t)((double)count * scale) : PT_ALLOCS_MAX_VALUE;
	*bytes_out = (double)bytes * scale < (double)PT_ALLOCS_MAX_VALUE ?
			     (int64_t)((double)bytes * scale) : PT_ALLOCS_MAX_VALUE;
}
