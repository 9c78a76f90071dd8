/* libFuzzer harness: CPython frame reading on a hostile interpreter (3.11
 * or 3.12 layout, by the input's last byte's low bit). The input is the
 * target's memory at IMG_BASE (the runtime state at its start;
 * its second half doubles as the stack copy): the thread states are walked,
 * the frame chain of the first one read as during a stop, its code objects,
 * names and location tables read as after it, and the eval frames of a
 * native stack replaced; the input is also a location table. Never a crash,
 * never a loop, bounded time whatever the structures claim. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ptrace/runtimes/python/frames.h"
#include "ptrace/runtimes/python/interp.h"
#include "ptrace/runtimes/python/names.h"
#include "ptrace/space/unwinder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define IMG_BASE 0x10000000ull
#define EVAL_LO 0x5000u
#define EVAL_HI 0x6000u

struct image {
	const uint8_t *data;
	size_t size;
};

static int image_read(void *arg, uint64_t addr, void *dst, size_t len)
{
	const struct image *im = arg;

	if (addr < IMG_BASE || addr - IMG_BASE > im->size || len > im->size - (addr - IMG_BASE))
		return -1;
	memcpy(dst, im->data + (addr - IMG_BASE), len);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pt_py_cap pc;
	struct image im = { data, size };
	struct pt_py_line ln[PT_PY_MAX_FRAMES];
	struct pt_capture cap;
	uint64_t ts[4] = { 0 }, frames[12];
	pid_t nstids[4] = { 1, 2, 0x7f, 0x10000000 };
	uint64_t bulk[2] = { 0, 0 };
	struct pt_py *py;
	size_t sink = 0;

	for (int64_t i = 0; i < 40; i++)
		sink += (size_t)pt_py_addr2line(data, size, 1, i * 3);
	if (pt_py_new(&py, 1, NULL))
		return 0;
	pt_py_set_reader(py, image_read, &im);
	/* The input's last byte picks the release whose layout reads it. */
	pt_py_activate(py, size && (data[size - 1] & 1) ? 0x030c01f0 : 0x030b00f0, IMG_BASE, EVAL_LO,
		       EVAL_HI, 0);
	pt_py_find_threads(py, nstids, ts, 4);
	memset(&cap, 0, sizeof(cap));
	cap.regs.rsp = IMG_BASE + size / 2;
	cap.stack = (uint8_t *)(uintptr_t)(data + size / 2);
	cap.stack_len = size - size / 2;
	for (int k = 0; k < 4; k++) {
		uint64_t t = ts[k] ? ts[k] : IMG_BASE + 64 * (uint64_t)k;

		if (pt_py_capture(py, t, nstids[k], bulk, &cap, &pc))
			continue;
		for (int i = 0; i < 12; i++)
			frames[i] = i % 2 ? EVAL_LO + (uint64_t)i : 0x1000 + (uint64_t)i;
		pt_py_merge(py, &pc, frames, 12);
		for (int i = 0; i < 12; i++) {
			int n = pt_py_lines(py, frames[i], ln, PT_PY_MAX_FRAMES);

			for (int j = 0; j < n; j++)
				sink += strlen(ln[j].func) + strlen(ln[j].file) + (size_t)ln[j].line;
		}
	}
	pt_py_free(py);
	return (int)(sink & 0);
}
