/* The CPython reader's handle and its life: detection of the interpreter
 * (its symbols or section, its release, its layout: a table of ours for
 * 3.11 and 3.12, its own table of offsets from 3.13 on, offsets.h) and
 * the code of its eval function. Sampler thread only, but for
 * pt_py_layout_find and pt_py_jumps_out (any thread). */
#ifndef PT_PYTHON_INTERP_H
#define PT_PYTHON_INTERP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/runtimes/python/python.h"

struct pt_maps;
struct pt_mem;
struct pt_modules;

/* The layout of release `version` (Py_Version's value, 0x030b07f0 for
 * 3.11.7: the micro release does not change the layout) among podprof's
 * own (3.11, 3.12), or NULL (3.13 on: offsets.h gives it). */
const struct pt_py_layout *pt_py_layout_find(uint32_t version);

/* Returns 0 or -ENOMEM. */
int pt_py_new(struct pt_py **out, pid_t pid, struct pt_mem *mem);
/* NULL-safe. */
void pt_py_free(struct pt_py *py);
/* Forgets the interpreter, caches and tokens (exec: a new program). */
void pt_py_reset(struct pt_py *py);

/* Looks for the interpreter in the modules mapped (an executable or
 * library named python3* or libpython3*): its runtime state (_PyRuntime, or
 * the .PyRuntime section), Py_Version, _PyEval_EvalFrameDefault (and the
 * parts of its code the compiler split off) and PyCode_Type, and the
 * layout of its release: from its table of offsets where its runtime state
 * begins with one (3.13 on), else from podprof's (3.11, 3.12). Returns the
 * state; note[0..len) gets a line worth logging, and for a CPython it
 * cannot read, why, in words fit for an answer ("" for a process without
 * Python). */
enum pt_py_state pt_py_detect(struct pt_py *py, const struct pt_maps *maps,
			      struct pt_modules *mods, char *note, size_t len);
enum pt_py_state pt_py_state(const struct pt_py *py);

/* Tests and fuzzing: a memory image instead of the target's (python.h's
 * pt_py_read_fn). */
void pt_py_set_reader(struct pt_py *py, pt_py_read_fn fn, void *arg);
/* Active with layout L (copied; pt_py_layout_find's, or one
 * pt_py_layout_from_table made) for release `version`, with these
 * addresses, as pt_py_detect finds them (and tests and fuzzing make them).
 * Returns 0 or -ENOENT (L NULL: an unknown release). */
int pt_py_activate(struct pt_py *py, const struct pt_py_layout *L, uint32_t version, uint64_t runtime,
		   uint64_t eval_lo, uint64_t eval_hi, uint64_t code_type);
/* One more range of _PyEval_EvalFrameDefault's code (a part the compiler
 * split off), after pt_py_activate. Returns 0 or -E2BIG (PT_PY_EVAL_PARTS). */
int pt_py_add_eval_part(struct pt_py *py, uint64_t lo, uint64_t hi);
/* The targets of the direct jumps (jmp and jcc, rel32) that code[0..len),
 * found at runtime address `at`, makes outside [lo, hi), each once, added
 * to out[0..n) up to max: read as bytes, not decoded, so some are the
 * bytes of other instructions (the caller checks each target). Returns the
 * new count. */
int pt_py_jumps_out(const uint8_t *code, size_t len, uint64_t at, uint64_t lo, uint64_t hi,
		    uint64_t *out, int n, int max);

void pt_py_stats(const struct pt_py *py, struct pt_py_stats *out);

#endif
