/* libFuzzer harness: the allocation agent's records (ptrace/allocs/agentrec.c), a
 * memory image the target writes. The input is the target's memory from
 * address BASE on (the agent's header at BASE); reads outside it fail as
 * reads of unmapped memory do. Every stack read must lie within its caps. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "ptrace/allocs/agentrec.h"
#include "ptrace/core/allocs.h"

#define BASE 0x7f0000000000ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct image {
	const uint8_t *data;
	size_t size;
};

static int image_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	const struct image *im = arg;

	if (addr < BASE || addr - BASE > im->size || len > im->size - (addr - BASE))
		return -EFAULT;
	memcpy(buf, im->data + (addr - BASE), len);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image im = { data, size };
	struct pt_allocs a;
	const char *why;

	if (pt_agentrec_read(image_read, &im, BASE, &a, &why))
		return 0;
	if (a.nstacks > PT_ALLOCS_MAX_STACKS)
		__builtin_trap();
	for (size_t i = 0; i < a.nstacks; i++)
		if (a.stacks[i].n > PT_ALLOCS_MAX_FRAMES || a.stacks[i].first + a.stacks[i].n > a.nframes)
			__builtin_trap();
	pt_allocs_clear(&a);
	return 0;
}
