/* The CPython interpreter in a target (see python.h): the handle that
 * remembers it, its detection (which release, where its runtime state and
 * eval function are) and the per-release table of where each release keeps
 * what frames.c and names.c read. Owns the handle; its caches
 * are names.c's. Sampler thread only, but for pt_py_layout_find
 * (any thread: the table is constant). */
#include "ptrace/runtimes/python/interp.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "ptrace/space/mem.h"
#include "ptrace/space/module.h"
#include "ptrace/proc/proc.h"
#include "ptrace/runtimes/python/state.h"
#include "ptrace/runtimes/python/names.h"

/* The releases we know. Their offsets are checked against each release's
 * own headers by a unit test (tests/unit/test_python.c, through a program
 * built with them: tests/unit/py/py_offsets.c; Debian's python3.11-dev,
 * and pyenv's 3.12.1 where installed), and against live interpreters by the
 * integration tests (Debian's python3.11, pyenv's 3.11.7 and 3.12.1). */
static const struct pt_py_layout layouts[] = {
	{
		.version = 0x030b, .name = "3.11", .tested = 1,
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
		.co_linetable = 136, .co_code = 184,
		.str_length = 16, .str_state = 32, .str_ascii_data = 48, .str_compact_data = 72,
		.bytes_size = 16, .bytes_data = 32,
		.chunk_data = 24,
	},
	{
		.version = 0x030c, .name = "3.12", .tested = 1,
		.rt_interp_head = 40,
		.is_next = 0, .is_threads_head = 72,
		.ts_next = 8, .ts_native_tid = 144, .ts_cframe = 56, .ts_chunk = 232, .ts_top = 240,
		.ts_limit = 248, .ts_size = 288,
		.cf_current_frame = 0, .cf_previous = 8,
		.fr_code = 0, .fr_previous = 8, .fr_prev_instr = 56, .fr_is_entry = 0, .fr_owner = 70,
		.fr_size = 72, .owner_cstack = 3,
		.co_firstlineno = 68, .co_filename = 112, .co_name = 120, .co_qualname = 128,
		.co_linetable = 136, .co_code = 192,
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
	py->runtime = py->code_type = py->eval_lo = py->eval_hi = 0;
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

int pt_py_activate(struct pt_py *py, uint32_t version, uint64_t runtime, uint64_t eval_lo,
		   uint64_t eval_hi, uint64_t code_type)
{
	if (!(py->L = pt_py_layout_find(version)))
		return -ENOENT;
	py->version = version;
	py->runtime = runtime;
	py->eval_lo = eval_lo;
	py->eval_hi = eval_hi;
	py->code_type = code_type;
	py->state = PT_PY_ACTIVE;
	return 0;
}

/* ---- detection --------------------------------------------------------- */

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

enum pt_py_state pt_py_detect(struct pt_py *py, const struct pt_maps *maps,
			      struct pt_modules *mods, char *note, size_t len)
{
	static const char *const names[] = { "_PyRuntime", "Py_Version", "_PyEval_EvalFrameDefault",
					     "PyCode_Type" };
	uint64_t a[4], sz[4];
	uint32_t ver = 0;

	note[0] = '\0';
	if (py->state == PT_PY_ACTIVE || !maps)
		return py->state;
	for (size_t i = 0; i < maps->n; i++) {
		const struct pt_map *m = &maps->v[i];
		const char *b = base_name(m->path);
		struct pt_module *mod;

		if (!(m->flags & PT_MAP_X) || (strncmp(b, "python3", 7) && strncmp(b, "libpython3", 10)))
			continue;
		if (!(mod = pt_modules_find(mods, maps, m->start)) ||
		    pt_module_lookup(mods, mod, names, a, sz, 4) <= 0 || !a[0])
			continue;
		/* CPython: _PyRuntime is its one global state. Py_Version
		 * (3.11 and later) says which release, so which layout. */
		if (!a[1] || pt_mem_read(py->mem, a[1], &ver, sizeof(ver))) {
			snprintf(note, len, "python: %s is a CPython without Py_Version (before 3.11): "
				 "profiled natively, its _PyEval_EvalFrameDefault frames stay", m->path);
			return py->state = PT_PY_UNSUPPORTED;
		}
		py->L = pt_py_layout_find(ver);
		if (!py->L || !a[2] || !sz[2]) {
			snprintf(note, len, "python: %s is CPython %u.%u.%u, a release whose layout podprof "
				 "does not know: profiled natively, its _PyEval_EvalFrameDefault frames stay",
				 m->path, ver >> 24, (ver >> 16) & 0xff, (ver >> 8) & 0xff);
			py->L = NULL;
			return py->state = PT_PY_UNSUPPORTED;
		}
		py->version = ver;
		py->runtime = a[0];
		py->eval_lo = a[2];
		py->eval_hi = a[2] + sz[2];
		py->code_type = a[3];
		snprintf(note, len, "python: %s is CPython %u.%u.%u: its _PyEval_EvalFrameDefault frames "
			 "show the Python functions they run%s", m->path, ver >> 24, (ver >> 16) & 0xff,
			 (ver >> 8) & 0xff, py->L->tested ? "" : " (a layout not tested against this release)");
		return py->state = PT_PY_ACTIVE;
	}
	return py->state = PT_PY_NONE;
}
