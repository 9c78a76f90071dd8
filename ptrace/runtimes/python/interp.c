/* The CPython interpreter in a target (see python.h): the handle that
 * remembers it, its detection (which release, where its runtime state and
 * eval function are, the layout of its structures: from the table below
 * for 3.11 and 3.12, from its own table of offsets from 3.13 on,
 * offsets.c) and the per-release table of where 3.11 and 3.12 keep what
 * frames.c and names.c read. Owns the handle; its caches are names.c's.
 * Sampler thread only, but for pt_py_layout_find and pt_py_jumps_out (any
 * thread: pure). */
#include "ptrace/runtimes/python/interp.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "ptrace/space/mem.h"
#include "ptrace/space/module.h"
#include "ptrace/proc/proc.h"
#include "ptrace/runtimes/python/names.h"
#include "ptrace/runtimes/python/offsets.h"
#include "ptrace/runtimes/python/state.h"

/* 3.11 and 3.12, which have no table of offsets of their own. Their offsets
 * are checked against each release's own headers by a unit test
 * (tests/unit/test_python.c, through a program built with them:
 * tests/unit/py/py_offsets.c; Debian's python3.11-dev, and pyenv's 3.12.1
 * where installed), and against live interpreters by the integration tests
 * (Debian's python3.11, pyenv's 3.12.1). */
static const struct pt_py_layout layouts[] = {
	{
		.version = 0x030b, .name = "3.11", .tested = 1, .flags = PT_PY_L_CFRAME,
		.rt_interp_head = 40,
		.is_next = 0, .is_threads_head = 16,
		/* ts_size: the whole PyThreadState (root_cframe, where cframe
		 * points outside any eval call, is its last field). */
		.ts_next = 8, .ts_native_tid = 160, .ts_cframe = 56, .ts_chunk = 296, .ts_top = 304,
		.ts_limit = 312, .ts_size = 360,
		.cf_current_frame = 8, .cf_previous = 16,
		.fr_code = 32, .fr_previous = 48, .fr_prev_instr = 56, .fr_is_entry = 68, .fr_owner = 69,
		.fr_size = 72, .owner_cstack = 0xff,
		.co_firstlineno = 72, .co_filename = 112, .co_name = 120, .co_qualname = 128,
		.co_linetable = 136, .co_code = 184, .ob_type = 8,
		.str_length = 16, .str_state = 32, .str_ascii_data = 48, .str_compact_data = 72,
		.bytes_size = 16, .bytes_data = 32,
		.chunk_data = 24,
	},
	{
		.version = 0x030c, .name = "3.12", .tested = 1, .flags = PT_PY_L_CFRAME,
		.rt_interp_head = 40,
		.is_next = 0, .is_threads_head = 72,
		.ts_next = 8, .ts_native_tid = 144, .ts_cframe = 56, .ts_chunk = 232, .ts_top = 240,
		.ts_limit = 248, .ts_size = 288,
		.cf_current_frame = 0, .cf_previous = 8,
		.fr_code = 0, .fr_previous = 8, .fr_prev_instr = 56, .fr_is_entry = 0, .fr_owner = 70,
		.fr_size = 72, .owner_cstack = 3,
		.co_firstlineno = 68, .co_filename = 112, .co_name = 120, .co_qualname = 128,
		.co_linetable = 136, .co_code = 192, .ob_type = 8,
		.str_length = 16, .str_state = 32, .str_ascii_data = 40, .str_compact_data = 56,
		.bytes_size = 16, .bytes_data = 32,
		.chunk_data = 24,
	},
};

const struct pt_py_layout *pt_py_layout_find(uint32_t version)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].version == (version >> 16))
			return &layouts[i];
	return NULL;
}

/* ---- the handle --------------------------------------------------------- */

int pt_py_new(struct pt_py **out, pid_t pid, struct pt_mem *mem)
{
	struct pt_py *py = base_calloc(1, sizeof(*py));

	*out = NULL;
	if (!py)
		return -ENOMEM;
	py->pid = pid;
	py->mem = mem;
	py->token_base = PT_PY_TOKEN_BASE;
	*out = py;
	return 0;
}

void pt_py_reset(struct pt_py *py)
{
	pt__py_names_reset(py);
	py->state = PT_PY_NONE;
	py->L = NULL;
	py->runtime = py->code_type = 0;
	py->neval = 0;
}

void pt_py_free(struct pt_py *py)
{
	if (!py)
		return;
	pt_py_reset(py);
	base_free(py);
}

enum pt_py_state pt_py_state(const struct pt_py *py)
{
	return py->state;
}

void pt_py_stats(const struct pt_py *py, struct pt_py_stats *out)
{
	*out = py->st;
}

void pt_py_set_reader(struct pt_py *py, pt_py_read_fn fn, void *arg)
{
	py->read = fn;
	py->read_arg = arg;
}

int pt_py_activate(struct pt_py *py, const struct pt_py_layout *L, uint32_t version, uint64_t runtime,
		   uint64_t eval_lo, uint64_t eval_hi, uint64_t code_type)
{
	if (!L)
		return -ENOENT;
	py->lay = *L;
	py->L = &py->lay;
	py->version = version;
	py->runtime = runtime;
	py->eval[0][0] = eval_lo;
	py->eval[0][1] = eval_hi;
	py->neval = 1;
	py->code_type = code_type;
	py->state = PT_PY_ACTIVE;
	return 0;
}

int pt_py_add_eval_part(struct pt_py *py, uint64_t lo, uint64_t hi)
{
	if (py->neval >= PT_PY_EVAL_PARTS || lo >= hi)
		return -E2BIG;
	py->eval[py->neval][0] = lo;
	py->eval[py->neval][1] = hi;
	py->neval++;
	return 0;
}

/* ---- detection --------------------------------------------------------- */

int pt_py_jumps_out(const uint8_t *code, size_t len, uint64_t at, uint64_t lo, uint64_t hi,
		    uint64_t *out, int n, int max)
{
	for (size_t i = 0; i + 5 <= len && n < max; i++) {
		size_t k;
		int32_t rel;
		uint64_t t;
		int seen = 0;

		if (code[i] == 0xe9)                                    /* jmp rel32 */
			k = i + 1;
		else if (code[i] == 0x0f && i + 6 <= len && (code[i + 1] & 0xf0) == 0x80)   /* jcc rel32 */
			k = i + 2;
		else
			continue;
		memcpy(&rel, code + k, 4);
		t = at + k + 4 + (uint64_t)(int64_t)rel;
		if (t >= lo && t < hi)
			continue;
		for (int j = 0; j < n && !seen; j++)
			seen = out[j] == t;
		if (!seen)
			out[n++] = t;
	}
	return n;
}

/* How much of _PyEval_EvalFrameDefault's code is scanned for the jumps
 * to its split parts (it is 40-60 KiB whole, 1-3 KiB where split). */
#define EVAL_SCAN_MAX (256u << 10)
#define EVAL_TARGETS 64

/* The parts of _PyEval_EvalFrameDefault ([lo, hi): its symbol) that the
 * compiler moved elsewhere. Debian's builds (GCC, profile-guided) keep
 * only the function's entry under its symbol and put the whole
 * interpreter loop in a part of its own (its ".cold" in a symbol table,
 * absent from .dynsym), which is where samples find the eval call's
 * native frame: without it none would be replaced. Such a part is code
 * the function jumps to (jmp or jcc, rel32) outside itself where an unwind
 * entry of its own begins, and that no other function's symbol covers (a
 * tail call lands on a named function). A byte pattern taken for a jump
 * must land exactly on an entry's start to count. */
static void eval_parts(struct pt_py *py, struct pt_modules *mods, struct pt_module *mod, uint64_t lo,
		       uint64_t hi)
{
	uint8_t code[4096 + 5];
	uint64_t t[EVAL_TARGETS];
	int nt = 0;

	for (uint64_t at = lo; at < hi && at - lo < EVAL_SCAN_MAX && nt < EVAL_TARGETS; at += 4096) {
		size_t n = hi - at < sizeof(code) ? (size_t)(hi - at) : sizeof(code);

		if (pt_mem_read(py->mem, at, code, n))
			break;
		nt = pt_py_jumps_out(code, n, at, lo, hi, t, nt, EVAL_TARGETS);
	}
	for (int i = 0; i < nt; i++) {
		uint64_t elo, ehi;
		const char *sym;

		if (pt_module_unwind_entry(mods, mod, t[i], &elo, &ehi) || elo != t[i] || ehi - elo > (16u << 20))
			continue;
		sym = pt_module_symbol(mods, mod, t[i]);
		if (sym && strncmp(sym, "_PyEval_EvalFrameDefault", 24))
			continue;
		if (pt_py_add_eval_part(py, elo, ehi))
			break;
	}
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

#define NATIVELY "profiled natively: its Python functions are not shown (its " \
		 "_PyEval_EvalFrameDefault frames stay)"

/* Detection in a module that has CPython's runtime state (runtime): a[] and
 * sz[] are the looked-up names of pt_py_detect. */
static enum pt_py_state detect_in(struct pt_py *py, struct pt_modules *mods, struct pt_module *mod,
				  const char *path, uint64_t runtime, uint64_t runtime_size,
				  const uint64_t *a, const uint64_t *sz, char *note, size_t len)
{
	uint8_t tab[PT_PY_TABLE_MAX];
	size_t tn = runtime_size && runtime_size < sizeof(tab) ? (size_t)runtime_size : sizeof(tab);
	uint32_t ver = 0, pyver = 0;
	int have_pyver = a[1] && !pt_mem_read(py->mem, a[1], &pyver, sizeof(pyver));
	const struct pt_py_layout *L = NULL;
	char why[256], vn[32];

	/* 3.13 on: the runtime state begins with the table of offsets. */
	if (tn >= PT_PY_TABLE_PREFIX && !pt_mem_read(py->mem, runtime, tab, PT_PY_TABLE_PREFIX) &&
	    pt_py_table_has_cookie(tab, PT_PY_TABLE_PREFIX)) {
		if (pt_mem_read(py->mem, runtime, tab, tn))
			snprintf(why, sizeof(why), "its table of offsets could not be read");
		else if (!pt_py_layout_from_table(tab, tn, &py->lay, &ver, why, sizeof(why)))
			L = &py->lay;
		if (L && have_pyver && pyver != ver) {
			pt_py_version_name(ver, vn, sizeof(vn));
			snprintf(why, sizeof(why), "its table of offsets says CPython %s, its Py_Version 0x%x", vn,
				 pyver);
			L = NULL;
		}
	} else if (!have_pyver) {
		snprintf(note, len, "python: %s is a CPython without Py_Version (before 3.11): " NATIVELY, path);
		return py->state = PT_PY_UNSUPPORTED;
	} else if (!(L = pt_py_layout_find(pyver))) {
		pt_py_version_name(pyver, vn, sizeof(vn));
		snprintf(why, sizeof(why), "CPython %s, a release whose layout podprof does not know%s", vn,
			 (pyver >> 16) >= 0x030d ? " (its _PyRuntime has no table of offsets)" : "");
	} else {
		py->lay = *L;
		L = &py->lay;
		ver = pyver;
	}
	if (L && (!a[2] || !sz[2])) {
		pt_py_version_name(ver, vn, sizeof(vn));
		snprintf(why, sizeof(why), "CPython %s without a _PyEval_EvalFrameDefault symbol", vn);
		L = NULL;
	}
	if (!L) {
		snprintf(note, len, "python: %s: %s: " NATIVELY, path, why);
		return py->state = PT_PY_UNSUPPORTED;
	}
	pt_py_activate(py, L, ver, runtime, a[2], a[2] + sz[2], a[3]);
	eval_parts(py, mods, mod, a[2], a[2] + sz[2]);
	pt_py_version_name(ver, vn, sizeof(vn));
	snprintf(note, len, "python: %s is CPython %s: its _PyEval_EvalFrameDefault frames show the Python "
		 "functions they run (%s%s)%s", path, vn,
		 (ver >> 16) >= 0x030d ? "its structures read through its own table of offsets" :
		 "its structures as podprof's table has them",
		 py->neval > 1 ? ", and the parts of its eval loop the compiler split off" : "",
		 L->tested ? "" : " (a layout not tested against this release)");
	return py->state = PT_PY_ACTIVE;
}

enum pt_py_state pt_py_detect(struct pt_py *py, const struct pt_maps *maps,
			      struct pt_modules *mods, char *note, size_t len)
{
	static const char *const names[] = { "_PyRuntime", "Py_Version", "_PyEval_EvalFrameDefault",
					     "PyCode_Type", PT_MODULE_SECTION ".PyRuntime" };
	uint64_t a[5], sz[5];

	note[0] = '\0';
	if (py->state == PT_PY_ACTIVE || !maps)
		return py->state;
	for (size_t i = 0; i < maps->n; i++) {
		const struct pt_map *m = &maps->v[i];
		const char *b = base_name(m->path);
		struct pt_module *mod;

		if (!(m->flags & PT_MAP_X) || (strncmp(b, "python3", 7) && strncmp(b, "libpython3", 10)))
			continue;
		/* CPython: _PyRuntime is its one global state, in a section of
		 * its own (.PyRuntime, 3.11 on), found without symbols too. */
		if (!(mod = pt_modules_find(mods, maps, m->start)) ||
		    pt_module_lookup(mods, mod, names, a, sz, 5) <= 0 || (!a[0] && !a[4]))
			continue;
		return detect_in(py, mods, mod, m->path, a[0] ? a[0] : a[4], a[0] ? sz[0] : sz[4], a, sz,
				 note, len);
	}
	return py->state = PT_PY_NONE;
}
