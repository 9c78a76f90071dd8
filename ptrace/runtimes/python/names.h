/* What a Python token names: code objects, strings and location tables,
 * read once and cached by address. Sampler thread only, but for
 * pt_py_addr2line (any thread). */
#ifndef PT_PYTHON_NAMES_H
#define PT_PYTHON_NAMES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/runtimes/python/python.h"

/* The line of the instruction `lasti` (in code units from the start of the
 * code) in a CPython 3.11+ location table (co_linetable, PEP 626/657
 * format) of a function starting at line `firstlineno`: the line, or -1 if
 * the table gives that instruction no line, or -EBADMSG if the table ends
 * before it or is malformed. lasti < 0 (a frame that has not started)
 * gives firstlineno. Reads only tab[0..len). */
int pt_py_addr2line(const uint8_t *tab, size_t len, int firstlineno, int64_t lasti);

/* The Python frames a token stands for, innermost first, at most max.
 * Strings are owned by py and valid until pt_py_reset. Returns how many
 * (0: not a token of py's). */
int pt_py_lines(const struct pt_py *py, uint64_t token, struct pt_py_line *out, int max);

/* For the other parts of the reader (state.h). */
struct pt_py_raw;
struct pt__py_frame;

/* Resolves the raw frame r (read during a stop; now: CLOCK_MONOTONIC ns)
 * into *g through the code object cache. Returns 1, 0 for a frame that is
 * not shown (the interpreter's __init__ shim), or -1 if its code object
 * cannot be read. */
int pt__py_resolve(struct pt_py *py, const struct pt_py_raw *r, uint64_t now,
		   struct pt__py_frame *g);
/* The token of the group of frames gf[0..n) (added if new), or 0 when the
 * tables are full (or memory ran out). */
uint64_t pt__py_token(struct pt_py *py, const struct pt__py_frame *gf, uint32_t n);
/* Frees the caches (code objects, strings, groups): every token is
 * forgotten. */
void pt__py_names_reset(struct pt_py *py);

#endif
