/* libFuzzer harness: the .gopclntab parser on arbitrary bytes, as the image
 * of a read-only segment at vaddr 0x400000 (the layout of the committed
 * seeds, tests/fuzz/make_gopclntab_seeds.py): the table found by its magic
 * and at offset 0x300, go:func.* from a moduledata in the same bytes, then
 * function lookups, SP deltas, inline trees and names at PCs across the
 * table's range and the first bytes' say. Never a crash, never a loop: each
 * input runs in bounded time whatever the table claims. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ptrace/space/gopclntab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define VADDR 0x400000u
#define TEXT 0x401000u

static void exercise(struct pt_gotab *g, const uint8_t *data, size_t size)
{
	struct pt_goline lines[PT_GOTAB_MAX_INLINE + 1];
	uint64_t lo, hi, step;
	size_t sink = 0;

	pt_gotab_range(g, &lo, &hi);
	step = (hi - lo) / 61 + 1;
	for (int i = 0; i < 64 + 8; i++) {
		struct pt_gofunc f;
		uint64_t pc;
		int32_t delta;

		if (i < 64) {
			pc = lo + (uint64_t)i * step;
		} else {
			uint32_t r = 0;

			if (size >= 4 * (size_t)(i - 63))
				memcpy(&r, data + 4 * (i - 64), 4);
			pc = lo + r;
		}
		if (pt_gotab_lookup(g, pc, &f))
			continue;
		if (f.name)
			sink += strlen(f.name);
		for (uint64_t at = f.entry; at < f.end && at < f.entry + 256; at += 7) {
			int n;

			pt_gotab_spdelta(g, &f, at, &delta);
			n = pt_gotab_frames(g, &f, at, lines, PT_GOTAB_MAX_INLINE + 1);
			for (int k = 0; k < n; k++)
				sink += strlen(lines[k].name) + (lines[k].file ? strlen(lines[k].file) : 0);
		}
	}
	__asm__ volatile("" : : "r"(sink));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pt_gotab *g = NULL;
	uint8_t *copy;
	long at;

	/* An 8-aligned private copy, as a mapped file or a memory read is. */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	at = pt_gotab_scan(copy, size, VADDR, TEXT, TEXT + 0x100000);
	if (at >= 0 && pt_gotab_new(&g, copy, size, VADDR, (size_t)at, size - (size_t)at, TEXT) == 0) {
		pt_gotab_find_gofunc(g, copy, size, VADDR, 0);
		exercise(g, data, size);
		pt_gotab_free(g);
	}
	if (pt_gotab_new(&g, copy, size, VADDR, 0x300, size, TEXT) == 0) {
		pt_gotab_find_gofunc(g, copy, size, VADDR, 0);
		exercise(g, data, size);
		pt_gotab_free(g);
	}
	free(copy);
	return 0;
}
