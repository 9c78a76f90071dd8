/* A process's address space as podprof reads it from outside, apart from
 * its threads: its maps, its memory (through a page pool shared by every
 * process that maps the same files), its modules (the files it maps, their
 * symbols, build-ids and Go tables), the unwinder over them, and the perf
 * map a JIT in it writes. Nothing here needs the process traced: any pid
 * whose memory podprof may read (process_vm_readv) will do, which is how
 * its unit tests use their own. The tracee (ptrace/mechanism/) holds one
 * per traced process; the runtimes (ptrace/runtimes/) read through it.
 * Sampler thread only. */
#ifndef PT_SPACE_H
#define PT_SPACE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pt_goline;
struct pt_maps;
struct pt_mem;
struct pt_mem_pool;
struct pt_mem_region;
struct pt_module;
struct pt_modules;
struct pt_objects;
struct pt_space;
struct pt_unwinder;

/* What a space counted since it was made. */
struct pt_space_stats {
	uint64_t maps_rereads;      /* maps read again because an unwind left them */
	uint64_t perfmap_entries;   /* JIT symbols loaded from the process's perf map */
	uint64_t symtab_load_ns, symtab_loads;   /* symbol tables read (cold symbolization) */
};

/* The space of pid, its maps not read yet (pt_space_refresh_maps). pages
 * and objects are shared with the other spaces of the caller (NULL: this
 * space's own, for a space used alone); debug_dir is where debug files are
 * found by build-id (NULL: /usr/lib/debug/.build-id). Returns 0 or -ENOMEM. */
int pt_space_new(struct pt_space **out, pid_t pid, struct pt_mem_pool *pages,
		 struct pt_objects *objects, const char *debug_dir);
/* NULL-safe. */
void pt_space_free(struct pt_space *s);

pid_t pt_space_pid(const struct pt_space *s);
/* The process's pid as it sees itself (NSpid in /proc/<pid>/status), read
 * once; the pid itself when that cannot be read. */
pid_t pt_space_nspid(struct pt_space *s);

/* Reads /proc/<pid>/maps again (unless held). Returns 0 or a negative
 * errno (-ESRCH: the process is gone). */
int pt_space_refresh_maps(struct pt_space *s);
/* An unwind found `miss` outside every mapping: the maps may be stale (a
 * library loaded since). Reads them again unless it did so less than a
 * backoff ago (10 ms, doubling up to a second each time a read did not
 * place such an address). Returns 1 if the maps now hold miss (unwind
 * again), else 0. */
int pt_space_refresh_for(struct pt_space *s, uint64_t miss);
/* Holds the maps and modules as they are (on=1: the process exec'd, and
 * what was sampled of its old program is still to be named), or lets them
 * go (0). */
void pt_space_hold(struct pt_space *s, int on);
/* A new program: the memory cache, modules, perf map and unwinder caches
 * dropped, the hold let go and the maps read anew (read uncached if that
 * fails). */
void pt_space_reset(struct pt_space *s);
/* Drops the cached pages of target memory (they may have changed while
 * nobody looked). */
void pt_space_flush(struct pt_space *s);

/* The parts, owned by the space. The maps are NULL until first read and
 * change at every refresh. */
const struct pt_maps *pt_space_maps(const struct pt_space *s);
struct pt_mem *pt_space_mem(struct pt_space *s);
struct pt_modules *pt_space_modules(struct pt_space *s);
struct pt_unwinder *pt_space_unwinder(struct pt_space *s);

/* Names a runtime address: *name is the function (NULL if no symbol covers
 * it), *mod the module (NULL outside every file mapping). Addresses outside
 * every module are looked up in the process's perf map (/tmp/perf-<pid>.map
 * in its root, reloaded once per maps refresh if it changed). Strings are
 * owned by the space and valid until the next reset or refresh. */
void pt_space_name(struct pt_space *s, uint64_t addr, const char **name,
		   const struct pt_module **mod);
/* Where addr is Go code, the frames Go's traceback gives there, innermost
 * first (the inlined functions, then the one holding the code), with their
 * files and lines (ptrace/space/gopclntab.h). Returns how many (at most
 * max), 0 for code that is not Go's. Strings as pt_space_name's. */
int pt_space_go_lines(struct pt_space *s, uint64_t addr, struct pt_goline *out, int max);
/* 1 when the module holding addr has Go's .gopclntab, else 0. */
int pt_space_is_go(struct pt_space *s, uint64_t addr);
/* Build-id of the module holding addr ("" if unknown). */
const char *pt_space_build_id(struct pt_space *s, uint64_t addr);
/* Looks up names[0..n) (functions or data; PT_SPACE_SECTION(".name") a
 * section's) in the file of the module holding runtime address addr:
 * addrs[i] gets each one's runtime address (0 if absent), sizes[i] its
 * size. Returns how many were found, -ENOENT
 * when no module holds addr, or another negative errno. */
#define PT_SPACE_SECTION(name) "section:" name
int pt_space_lookup(struct pt_space *s, uint64_t addr, const char *const *names, uint64_t *addrs,
		    uint64_t *sizes, int n);
/* The first module that has a Go table (.gopclntab), in the order of the
 * maps (the executable of a Go program, or its Go library): its runtime
 * address range in *lo, *hi. Returns 0 or -ENOENT. */
int pt_space_go_module(struct pt_space *s, uint64_t *lo, uint64_t *hi);
/* The runtime address range [*entry, *end) of the Go function `name`
 * ("runtime.allgadd") in the Go module holding addr, found by name in its
 * .gopclntab (stripped binaries too). Returns 0 or -ENOENT. */
int pt_space_go_func(struct pt_space *s, uint64_t addr, const char *name, uint64_t *entry,
		     uint64_t *end);
/* Reads len bytes of memory at addr (uncached where it may change).
 * Returns 0, -EFAULT or -ESRCH. */
int pt_space_read(struct pt_space *s, uint64_t addr, void *buf, size_t len);

/* Reads each of n regions of memory (mem.h's pt_mem_read_regions: few
 * system calls, uncached). Returns 0 or -ESRCH. */
int pt_space_read_regions(struct pt_space *s, struct pt_mem_region *r, size_t n);

void pt_space_stats(const struct pt_space *s, struct pt_space_stats *out);

#endif
