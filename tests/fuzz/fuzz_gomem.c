/* libFuzzer harness: the Go memory-profile reader on arbitrary target
 * memory. The input is five uint32 offsets (the symbols of struct
 * pt_gomem_syms, 0xffffffff for one that is absent), then an image of
 * target memory at address 0x10000 (tests/fuzz/make_gomem_seeds.py writes
 * the seeds). Never a crash, never a loop: each input ends in bounded
 * reads, and what the reader returns holds together (the stacks' frames
 * inside the frames read, nothing kept on failure, a reason with each
 * -ENOENT and -EPROTO). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "ptrace/runtimes/go/gomem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BASE 0x10000u
#define HDR (PT_GOMEM_NSYMS * 4)

struct img {
	const uint8_t *bytes;
	size_t len;
	uint64_t reads;
};

static int img_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct img *im = arg;

	im->reads++;
	if (addr < BASE || addr - BASE > im->len || len > im->len - (addr - BASE))
		return -EFAULT;
	memcpy(buf, im->bytes + (addr - BASE), len);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t addrs[PT_GOMEM_NSYMS];
	struct pt_gomem_syms syms;
	struct pt_allocs out = { 0 };
	struct img im = { data + HDR, 0, 0 };
	const char *why = NULL;
	int err;

	if (size < HDR)
		return 0;
	im.len = size - HDR;
	for (int i = 0; i < PT_GOMEM_NSYMS; i++) {
		uint32_t off;

		memcpy(&off, data + 4 * i, 4);
		addrs[i] = off == UINT32_MAX ? 0 : BASE + (uint64_t)off;
	}
	/* Both record layouts: counts only (1.27 on) when the input's size is odd. */
	syms = (struct pt_gomem_syms){ .mbuckets = addrs[0], .mprofcycle = addrs[1], .mprof = addrs[2],
				       .memprofilerate = addrs[3], .disable = addrs[4],
				       .counts_only = (int)(size & 1) };
	err = pt_gomem_read(img_read, &im, &syms, &out, &why);
	/* Buckets (8-aligned, perhaps overlapping) are at most len/8 + 1
	 * distinct addresses, each read at most twice a visit, and a loop is
	 * found within 4 visits of each: reads stay within the image's size. */
	if (im.reads > 8 + 8 * (im.len / 8 + 1))
		__builtin_trap();
	if (err) {
		if (out.nstacks || out.nframes)
			__builtin_trap();
		if ((err == -ENOENT || err == -EPROTO) && !why)
			__builtin_trap();
	} else {
		for (size_t i = 0; i < out.nstacks; i++) {
			const struct pt_alloc_stack *s = &out.stacks[i];

			if ((uint64_t)s->first + s->n > out.nframes || s->n > PT_ALLOCS_MAX_FRAMES ||
			    (!s->alloc_objects && !s->free_objects))
				__builtin_trap();
		}
		if (strcmp(out.source, "go") || !out.rate)
			__builtin_trap();
	}
	pt_allocs_clear(&out);
	return 0;
}
