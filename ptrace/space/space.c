/* A process's address space (see space.h): its maps, memory, modules,
 * unwinder and perf map, and the naming of its addresses. Sampler thread
 * only. */
#include "ptrace/space/space.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/proc/proc.h"
#include "ptrace/space/gopclntab.h"
#include "ptrace/space/mem.h"
#include "ptrace/space/module.h"
#include "ptrace/space/objects.h"
#include "ptrace/space/perfmap.h"
#include "ptrace/space/unwinder.h"

#define MAPS_BACKOFF_MIN_NS 10000000ull     /* 10 ms */
#define MAPS_BACKOFF_MAX_NS 1000000000ull   /* 1 s */

struct pt_space {
	pid_t pid, nspid;
	struct pt_maps *maps;
	struct pt_mem *mem;
	struct pt_modules *mods;
	struct pt_unwinder *unw;
	struct pt_objects *own_objects;   /* made for a space used alone */
	int held;                /* the maps and modules kept as they are (exec) */
	uint64_t maps_at_ns;     /* last /proc/<pid>/maps read */
	uint64_t maps_backoff_ns;  /* least time between reads forced by a miss */
	/* JIT symbols (perf map): reloaded at most once per maps refresh, and
	 * only when the file changed */
	struct pt_perfmap *pm;
	int pm_checked;
	struct stat pm_st;
	struct pt_space_stats st;
};

int pt_space_new(struct pt_space **out, pid_t pid, struct pt_mem_pool *pages,
		 struct pt_objects *objects, const char *debug_dir)
{
	struct pt_space *s = base_calloc(1, sizeof(*s));
	int err = -ENOMEM;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->pid = pid;
	s->maps_backoff_ns = MAPS_BACKOFF_MIN_NS;
	if (!objects && (err = pt_objects_new(&s->own_objects)))
		goto out;
	if ((err = pt_mem_new(&s->mem, pid, pages)) ||
	    (err = pt_modules_new(&s->mods, pid, s->mem, objects ? objects : s->own_objects)) ||
	    (err = pt_unwinder_new(&s->unw, s->mem, s->mods)))
		goto out;
	if (debug_dir)
		pt_modules_set_debug_dir(s->mods, debug_dir);
	*out = s;
	s = NULL;
	err = 0;
out:
	pt_space_free(s);
	return err;
}

void pt_space_free(struct pt_space *s)
{
	if (!s)
		return;
	pt_unwinder_free(s->unw);
	pt_modules_free(s->mods);
	pt_mem_free(s->mem);
	pt_maps_free(s->maps);
	pt_perfmap_free(s->pm);
	pt_objects_free(s->own_objects);
	base_free(s);
}

pid_t pt_space_pid(const struct pt_space *s) { return s->pid; }
const struct pt_maps *pt_space_maps(const struct pt_space *s) { return s->maps; }
struct pt_mem *pt_space_mem(struct pt_space *s) { return s->mem; }
struct pt_modules *pt_space_modules(struct pt_space *s) { return s->mods; }
struct pt_unwinder *pt_space_unwinder(struct pt_space *s) { return s->unw; }

pid_t pt_space_nspid(struct pt_space *s)
{
	if (!s->nspid) {
		char path[64], buf[4096];

		snprintf(path, sizeof(path), "/proc/%d/status", (int)s->pid);
		if (pt_proc_slurp(path, buf, sizeof(buf)) < 0 || pt_proc_parse_nspid(buf, &s->nspid))
			s->nspid = s->pid;
	}
	return s->nspid;
}

int pt_space_refresh_maps(struct pt_space *s)
{
	struct pt_maps *m;
	int err;

	if (s->held)
		return 0;   /* keep the old program's maps until it is let go */
	if ((err = pt_proc_read_maps(s->pid, &m)))
		return err;
	pt_maps_free(s->maps);
	s->maps = m;
	s->maps_at_ns = pt__now_ns();
	s->pm_checked = 0;
	pt_mem_set_maps(s->mem, m);
	pt_unwinder_set_maps(s->unw, m);
	return 0;
}

int pt_space_refresh_for(struct pt_space *s, uint64_t miss)
{
	if (pt__now_ns() < s->maps_at_ns + s->maps_backoff_ns || pt_space_refresh_maps(s))
		return 0;
	s->st.maps_rereads++;
	if (pt_maps_find(s->maps, miss)) {
		s->maps_backoff_ns = MAPS_BACKOFF_MIN_NS;
		return 1;
	}
	s->maps_backoff_ns = s->maps_backoff_ns * 2 < MAPS_BACKOFF_MAX_NS ? s->maps_backoff_ns * 2 :
									       MAPS_BACKOFF_MAX_NS;
	return 0;
}

void pt_space_hold(struct pt_space *s, int on)
{
	s->held = on;
	pt_modules_freeze(s->mods, on);
}

void pt_space_reset(struct pt_space *s)
{
	pt_space_hold(s, 0);
	pt_mem_flush(s->mem);
	pt_modules_reset(s->mods);
	pt_perfmap_free(s->pm);
	s->pm = NULL;
	memset(&s->pm_st, 0, sizeof(s->pm_st));
	pt_unwinder_flush(s->unw);
	/* Without the new program's maps, the old ones would key its reads
	 * as the old program's files (the shared pages): read uncached. */
	if (pt_space_refresh_maps(s))
		pt_mem_set_maps(s->mem, NULL);
}

void pt_space_flush(struct pt_space *s)
{
	pt_mem_flush(s->mem);
}

/* Loads the process's perf map if it changed since the last load. A file
 * still being appended to is read up to its last complete line. */
static void perfmap_refresh(struct pt_space *s)
{
	struct pt_perfmap *pm;
	struct stat st;
	char *text = NULL;
	size_t len = 0, want;
	int fd;

	s->pm_checked = 1;
	fd = pt_perfmap_open(s->pid, pt_space_nspid(s));
	if (fd < 0)
		return;   /* none (the usual case), or not a regular file: keep what we had */
	if (fstat(fd, &st) < 0 || (st.st_ino == s->pm_st.st_ino && st.st_dev == s->pm_st.st_dev &&
				   st.st_size == s->pm_st.st_size &&
				   st.st_mtim.tv_sec == s->pm_st.st_mtim.tv_sec &&
				   st.st_mtim.tv_nsec == s->pm_st.st_mtim.tv_nsec))
		goto out;
	want = st.st_size > (off_t)PT_PERFMAP_MAX_BYTES ? PT_PERFMAP_MAX_BYTES : (size_t)st.st_size;
	if (!(text = base_malloc(want + 1)))
		goto out;
	while (len < want) {
		ssize_t n = read(fd, text + len, want - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	while (len && text[len - 1] != '\n')
		len--;
	if (pt_perfmap_parse(text, len, &pm, NULL) == 0) {
		pt_perfmap_free(s->pm);
		s->pm = pm;
		s->pm_st = st;
		s->st.perfmap_entries = pt_perfmap_count(pm);
	}
out:
	base_free(text);
	close(fd);
}

void pt_space_name(struct pt_space *s, uint64_t addr, const char **name,
		   const struct pt_module **modp)
{
	struct pt_module *mod = pt_modules_find(s->mods, s->maps, addr);

	*name = mod ? pt_module_symbol(s->mods, mod, addr) : NULL;
	*modp = mod;
	if (!mod) {
		/* Anonymous memory: code a JIT wrote, named in its perf map. */
		if (!s->pm_checked)
			perfmap_refresh(s);
		*name = pt_perfmap_lookup(s->pm, addr);
	}
}

int pt_space_go_lines(struct pt_space *s, uint64_t addr, struct pt_goline *out, int max)
{
	struct pt_module *mod = pt_modules_find(s->mods, s->maps, addr);

	return mod && mod->go ? pt_module_go_frames(mod, addr, out, max) : 0;
}

int pt_space_is_go(struct pt_space *s, uint64_t addr)
{
	struct pt_module *mod = pt_modules_find(s->mods, s->maps, addr);

	return mod && mod->go;
}

const char *pt_space_build_id(struct pt_space *s, uint64_t addr)
{
	struct pt_module *mod = pt_modules_find(s->mods, s->maps, addr);

	return mod ? mod->build_id : "";
}

int pt_space_lookup(struct pt_space *s, uint64_t addr, const char *const *names, uint64_t *addrs,
		    uint64_t *sizes, int n)
{
	struct pt_module *mod = pt_modules_find(s->mods, s->maps, addr);

	return mod ? pt_module_lookup(s->mods, mod, names, addrs, sizes, n) : -ENOENT;
}

int pt_space_go_module(struct pt_space *s, uint64_t *lo, uint64_t *hi)
{
	for (size_t i = 0; s->maps && i < s->maps->n; i++) {
		const struct pt_map *m = &s->maps->v[i];
		struct pt_module *mod;

		if (!(m->flags & PT_MAP_X) || !m->path[0] || m->path[0] == '[')
			continue;
		if ((mod = pt_modules_find(s->mods, s->maps, m->start)) && mod->go) {
			*lo = mod->lo;
			*hi = mod->hi;
			return 0;
		}
	}
	return -ENOENT;
}

int pt_space_go_func(struct pt_space *s, uint64_t addr, const char *name, uint64_t *entry,
		     uint64_t *end)
{
	struct pt_module *mod = pt_modules_find(s->mods, s->maps, addr);
	struct pt_gofunc f;

	if (!mod || !mod->go || pt_gotab_find(mod->go, name, &f))
		return -ENOENT;
	*entry = f.entry + mod->bias;
	*end = f.end + mod->bias;
	return 0;
}

int pt_space_read(struct pt_space *s, uint64_t addr, void *buf, size_t len)
{
	return pt_mem_read(s->mem, addr, buf, len);
}

int pt_space_read_regions(struct pt_space *s, struct pt_mem_region *r, size_t n)
{
	return pt_mem_read_regions(s->pid, r, n);
}

void pt_space_stats(const struct pt_space *s, struct pt_space_stats *out)
{
	*out = s->st;
	pt_modules_load_stats(s->mods, &out->symtab_load_ns, &out->symtab_loads);
}
