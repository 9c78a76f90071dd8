/* The CPython reader's handle and its life: detection of the interpreter
 * (its symbols, its release) and the table of per-release layouts.
 * Sampler thread only, but for pt_py_layout_find (any thread). */
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
 * 3.11.7: the micro release does not change the layout), or NULL. */
const struct pt_py_layout *pt_py_layout_find(uint32_t version);

/* Returns 0 or -ENOMEM. */
int pt_py_new(struct pt_py **out, pid_t pid, struct pt_mem *mem);
/* NULL-safe. */
void pt_py_free(struct pt_py *py);
/* Forgets the interpreter, caches and tokens (exec: a new program). */
void pt_py_reset(struct pt_py *py);

/* Looks for the interpreter in the modules mapped (an executable or
 * library named python3* or libpython3*): its _PyRuntime, Py_Version,
 * _PyEval_EvalFrameDefault and PyCode_Type symbols, and the layout of its
 * release. Returns the state; note[0..len) gets a line worth logging
 * ("" for a process without Python). */
enum pt_py_state pt_py_detect(struct pt_py *py, const struct pt_maps *maps,
			      struct pt_modules *mods, char *note, size_t len);
enum pt_py_state pt_py_state(const struct pt_py *py);

/* Tests and fuzzing: a memory image instead of the target's (python.h's
 * pt_py_read_fn). */
void pt_py_set_reader(struct pt_py *py, pt_py_read_fn fn, void *arg);
/* Tests and fuzzing: active for release `version` with these addresses, as
 * pt_py_detect would find them. Returns 0 or -ENOENT (an unknown release). */
int pt_py_activate(struct pt_py *py, uint32_t version, uint64_t runtime, uint64_t eval_lo,
		   uint64_t eval_hi, uint64_t code_type);

void pt_py_stats(const struct pt_py *py, struct pt_py_stats *out);

#endif
