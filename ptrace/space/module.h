/* The modules (executable, shared libraries, vDSO) loaded in one target
 * process: where each is loaded, its unwind table in target memory, its
 * build-id and its symbols. Built lazily from /proc/<pid>/maps and target
 * memory; files are opened only through /proc/<pid>/root or /proc/<pid>/exe.
 * Sampler thread only. */
#ifndef PT_MODULE_H
#define PT_MODULE_H

#include <stdint.h>
#include <sys/types.h>

#include "ptrace/space/elf.h"

struct pt_gotab;
struct pt_maps;
struct pt_mem;
struct pt_object;
struct pt_objects;

struct pt_module {
	char *path;             /* as the target sees it ("[vdso]" for the vDSO) */
	uint64_t inode;
	uint64_t lo, hi;        /* extent of all its mappings */
	uint64_t base;          /* runtime address of file offset 0 */
	uint64_t bias;          /* runtime address - ELF vaddr */
	int deleted;
	int elf_ok;             /* header and program headers were readable */
	/* unwind: the .eh_frame_hdr search table, in target memory */
	uint64_t text_lo, text_hi;
	uint64_t eh_hdr, eh_table;
	uint64_t eh_count;
	char build_id[81];
	/* Its file's symbols and Go table, shared with every module of any
	 * process that maps the same file (objects.h). */
	struct pt_object *obj;
	/* symbols: loaded on first lookup (obj's, mirrored here) */
	int sym_state;          /* 0 not tried, 1 loaded, -1 none */
	const char *sym_source; /* "file", "debug", "memory", "vdso" */
	/* Go: obj's .gopclntab (function names, SP deltas, inline trees),
	 * NULL if it has none; read when the module is first found.
	 * [go_lo, go_hi): the runtime addresses of the code it describes. */
	struct pt_gotab *go;
	uint64_t go_lo, go_hi;
	/* The last functions its Go code was looked up in, by address (a
	 * goroutine dump walks the same few stacks thousands of times);
	 * allocated at the first lookup. */
	struct pt_gofunc_memo *go_memo;
};

struct pt_modules;

/* objs: where files' symbols and Go tables are shared (NULL: each module
 * its own). */
int pt_modules_new(struct pt_modules **out, pid_t pid, struct pt_mem *mem,
		   struct pt_objects *objs);
void pt_modules_free(struct pt_modules *mods);
/* Forgets every module (exec). */
void pt_modules_reset(struct pt_modules *mods);
/* While frozen, pt_modules_find() returns known modules only: after an exec
 * the addresses of the old program must not be looked up in the new one. */
void pt_modules_freeze(struct pt_modules *mods, int frozen);
/* The module whose mappings hold addr, built from `maps` on first use (its
 * symbols are loaded then too, while the process is alive); NULL for
 * anonymous memory or addresses outside every mapping. */
struct pt_module *pt_modules_find(struct pt_modules *mods, const struct pt_maps *maps,
				  uint64_t addr);
/* Name of the function holding runtime address addr in `mod`, or NULL when no
 * symbol covers it: a Go function's from .gopclntab first, else the ELF
 * symbols'. Loads the module's symbols on first call. */
const char *pt_module_symbol(struct pt_modules *mods, struct pt_module *mod, uint64_t addr);
/* The Go function at runtime address addr of mod, through the module's
 * memo. Returns as pt_gotab_lookup, -ENOENT outside its Go code. */
struct pt_gofunc;
int pt_module_go_func(struct pt_module *mod, uint64_t addr, struct pt_gofunc *f);
/* Go's traceback frames at runtime address addr of a Go module: the
 * functions inlined there and the one holding the code, innermost first,
 * with files and lines (pt_gotab_frames). Returns how many, 0 if the code is
 * not a named Go function's. */
struct pt_goline;
int pt_module_go_frames(struct pt_module *mod, uint64_t addr, struct pt_goline *out, int max);
/* Looks up names[0..n) (functions or data; a name PT_MODULE_SECTION
 * ".go.buildinfo" is a section's, loaded at run time) in the module's file,
 * opened as the target sees it (checked to be the mapped file): addrs[i]
 * gets the runtime address of each (0 if absent), sizes[i] its size.
 * Returns how many were found, or a negative errno when the file cannot be
 * read. */
#define PT_MODULE_SECTION "section:"   /* as PT_SPACE_SECTION (space.h) */
int pt_module_lookup(struct pt_modules *mods, struct pt_module *mod, const char *const *names,
		     uint64_t *addrs, uint64_t *sizes, int n);
/* The unwind-table entry (a row of the module's .eh_frame_hdr: one
 * function, or one part of a function the compiler split) holding runtime
 * address addr: [*lo, *hi), from its start to the next entry's (the end
 * of the module's code for the last). Returns 0 or -ENOENT (no table, or
 * addr before its first entry or outside the module's code). */
int pt_module_unwind_entry(struct pt_modules *mods, const struct pt_module *mod, uint64_t addr,
			   uint64_t *lo, uint64_t *hi);
/* How many modules with a .gopclntab have been found so far. */
int pt_modules_go_count(const struct pt_modules *mods);
/* Time spent reading symbol tables, and how many were read. */
void pt_modules_load_stats(const struct pt_modules *mods, uint64_t *ns, uint64_t *count);
/* Directories searched for <hex[:2]>/<hex[2:]>.debug by build-id, first in
 * the target's root, then in ours. Default "/usr/lib/debug/.build-id". */
void pt_modules_set_debug_dir(struct pt_modules *mods, const char *dir);

#endif
