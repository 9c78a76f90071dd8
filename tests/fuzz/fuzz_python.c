/* libFuzzer harness: CPython frame reading on a hostile interpreter (3.11
 * layout for an input whose last byte is even; else, by its next bits,
 * 3.12's, or one made from a table of offsets of 3.13, 3.14 or 3.15 with
 * fixed values, offsets.c's descriptors placing them). The input is the
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
#include "ptrace/runtimes/python/offsets.h"
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

/* The layout of 3.<minor> from a table of plausible values. */
static int table_layout(unsigned int minor, struct pt_py_layout *l)
{
	static const struct { const char *name; uint64_t v; } vals[] = {
		{ "runtime_state.size", 4096 }, { "runtime_state.interpreters_head", 40 },
		{ "interpreter_state.size", 8192 }, { "interpreter_state.next", 0 },
		{ "interpreter_state.threads_head", 16 }, { "thread_state.size", 800 },
		{ "thread_state.next", 8 }, { "thread_state.current_frame", 72 },
		{ "thread_state.base_frame", 80 }, { "thread_state.native_thread_id", 160 },
		{ "thread_state.datastack_chunk", 232 }, { "interpreter_frame.size", 88 },
		{ "interpreter_frame.previous", 8 }, { "interpreter_frame.executable", 0 },
		{ "interpreter_frame.instr_ptr", 56 }, { "interpreter_frame.owner", 74 },
		{ "code_object.size", 240 }, { "code_object.filename", 112 }, { "code_object.name", 120 },
		{ "code_object.qualname", 128 }, { "code_object.linetable", 136 },
		{ "code_object.firstlineno", 68 }, { "code_object.co_code_adaptive", 208 },
		{ "pyobject.ob_type", 8 }, { "bytes_object.size", 40 }, { "bytes_object.ob_size", 16 },
		{ "bytes_object.ob_sval", 32 }, { "unicode_object.size", 80 }, { "unicode_object.state", 32 },
		{ "unicode_object.length", 16 }, { "unicode_object.asciiobject_size", 40 },
		{ "unicode_object.compactunicodeobject_size", 56 },
	};
	uint8_t tab[PT_PY_TABLE_MAX] = "xdebugpy";
	uint64_t ver = 0x030000f0u | (uint64_t)minor << 16;
	uint32_t v;
	char why[256];

	memcpy(tab + 8, &ver, 8);
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		int at = pt_py_table_field(minor, vals[i].name);

		if (at > 0)
			memcpy(tab + at, &vals[i].v, 8);
	}
	return pt_py_layout_from_table(tab, sizeof(tab), l, &v, why, sizeof(why));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t versions[] = { 0x030c01f0, 0x030d12f0, 0x030e0af0, 0x030f02f0 };
	struct pt_py_layout tl;
	const struct pt_py_layout *l = pt_py_layout_find(0x030b00f0);
	uint32_t version = 0x030b00f0;
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
	if (size && (data[size - 1] & 1)) {
		version = versions[(data[size - 1] >> 1) & 3];
		l = pt_py_layout_find(version);
		if (!l && !table_layout(version >> 16 & 0xff, &tl))
			l = &tl;
	}
	pt_py_activate(py, l, version, IMG_BASE, EVAL_LO, EVAL_HI, 0);
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
