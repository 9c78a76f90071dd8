/* CPython 3.13 and later describe their own structures: _PyRuntime begins
 * with a table of offsets for debuggers, _Py_DebugOffsets (a cookie
 * "xdebugpy", the release as PY_VERSION_HEX, whether the build is
 * free-threaded, then 8-byte values only). Only that prefix is stable: the
 * table grows and its fields move from one minor release to the next (not
 * between patch releases), so podprof keeps one small descriptor per minor
 * release saying where each value it needs sits in the table, and reads
 * the interpreter's structures at the offsets the target gives. Pure
 * functions: any thread. */
#ifndef PT_PYTHON_OFFSETS_H
#define PT_PYTHON_OFFSETS_H

#include <stddef.h>
#include <stdint.h>

#include "ptrace/runtimes/python/python.h"

/* The most bytes of a table podprof reads: more than the largest table it
 * knows (3.15's, 888 bytes). */
#define PT_PY_TABLE_MAX 1024u
/* The prefix every release keeps: cookie, version, free_threaded. */
#define PT_PY_TABLE_PREFIX 24u

/* 1 if tab[0..len) begins with the table's cookie, else 0. */
int pt_py_table_has_cookie(const uint8_t *tab, size_t len);

/* The layout of the release whose table is tab[0..len) (the first bytes of
 * its _PyRuntime), with its PY_VERSION_HEX in *version (0 when the prefix
 * could not be read). Returns 0, or:
 *   -EBADMSG  not such a table, or one that contradicts itself (a size out
 *             of bounds, a field outside its structure or past what podprof
 *             reads of it);
 *   -ENOTSUP  a free-threaded build;
 *   -ENOENT   a release with no descriptor: newer than podprof knows, or a
 *             pre-release whose table had another shape.
 * why[0..whylen) gets the reason, in words fit for an answer's comment
 * ("CPython 3.16 is newer than podprof knows (it reads 3.11 to 3.15)"). */
int pt_py_layout_from_table(const uint8_t *tab, size_t len, struct pt_py_layout *out,
			    uint32_t *version, char *why, size_t whylen);

/* Where the descriptor of minor release 3.<minor> says the table keeps the
 * value `field` ("thread_state.native_thread_id", as CPython's
 * pycore_debug_offsets.h names it): its byte offset in the table, 0 when
 * that release's table has no such field (or podprof does not read it),
 * -1 with no descriptor for that release. For tests. */
int pt_py_table_field(unsigned int minor, const char *field);
/* sizeof(_Py_DebugOffsets) of minor release 3.<minor>, 0 with no
 * descriptor. For tests. */
size_t pt_py_table_size(unsigned int minor);

/* PY_VERSION_HEX v as CPython writes the release: "3.13.0rc2", "3.14.10". */
void pt_py_version_name(uint32_t v, char *out, size_t len);

#endif
