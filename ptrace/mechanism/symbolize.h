/* A tracee's maps and the naming of its addresses: the module that holds
 * an address and its symbol, Go's frames from .gopclntab, Python's frames
 * for the tokens that stand for them, or the target's perf map for code a
 * JIT wrote into anonymous memory. Tracer thread only. */
#ifndef PT_SYMBOLIZE_H
#define PT_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pt_goline;
struct pt_maps;
struct pt_module;
struct pt_py_line;
struct pt_tracee;

/* Re-reads /proc/<pid>/maps. Returns 0 or a negative errno. */
int pt_symbolize_refresh_maps(struct pt_tracee *t);
const struct pt_maps *pt_symbolize_maps(const struct pt_tracee *t);

/* Symbolizes a runtime address: *name is the function (NULL if no symbol
 * covers it), *mod the module (NULL outside every file mapping). Addresses
 * outside every module are looked up in the target's perf map
 * (/tmp/perf-<pid>.map, reloaded once per maps refresh if it changed).
 * Strings are owned by the tracee and valid until the next exec or refresh. */
void pt_symbolize_addr(struct pt_tracee *t, uint64_t addr, const char **name,
		       const struct pt_module **mod);
/* Where addr is Go code, the frames Go's traceback gives there, innermost
 * first (the inlined functions, then the one holding the code), with their
 * files and lines (ptrace/space/gopclntab.h). Returns how many (at most max), 0
 * for code that is not Go's. Strings as pt_symbolize_addr's. */
int pt_symbolize_go(struct pt_tracee *t, uint64_t addr, struct pt_goline *out, int max);
/* Where addr is a token for Python frames (ptrace/runtimes/python/python.h), those frames,
 * innermost first, at most max: names, files and lines, strings owned by
 * the tracee (valid until the next exec). Returns how many, 0 for any other
 * address. */
int pt_symbolize_python(struct pt_tracee *t, uint64_t addr, struct pt_py_line *out, int max);
/* What looking for a Python interpreter found, worth one log line: the first
 * call after a detection that found one (supported or not) returns it,
 * every other call NULL. */
const char *pt_symbolize_python_note(struct pt_tracee *t);
/* Build-id of the module holding addr ("" if unknown). */
const char *pt_symbolize_build_id(struct pt_tracee *t, uint64_t addr);

/* Looks up names[0..n) (functions or data) in the file of the module
 * holding runtime address addr (pt_module_lookup): addrs[i] gets each
 * one's runtime address (0 if absent), sizes[i] its size. Returns how many
 * were found, -ENOENT when no module holds addr, or another negative errno. */
int pt_symbolize_lookup(struct pt_tracee *t, uint64_t addr, const char *const *names,
			uint64_t *addrs, uint64_t *sizes, int n);
/* 1 when the module holding addr has Go's .gopclntab (a Go program or
 * library), else 0. */
int pt_symbolize_is_go(struct pt_tracee *t, uint64_t addr);
/* Reads len bytes of the target's memory at addr (uncached where it may
 * change). Returns 0, -EFAULT or -ESRCH. */
int pt_symbolize_read(struct pt_tracee *t, uint64_t addr, void *buf, size_t len);

/* The target's PID as the target sees it (NSpid in /proc/<pid>/status), read
 * once; the pid itself when that cannot be read. */
pid_t pt__symbolize_nspid(struct pt_tracee *t);

#endif
