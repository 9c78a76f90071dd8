/* A tracee's maps and the naming of its addresses: the module that holds
 * an address and its symbol, or the target's perf map for code a JIT wrote
 * into anonymous memory. Sampler thread only. */
#include "ptrace/mechanism/symbolize.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/mem.h"
#include "ptrace/space/mem.h"
#include "ptrace/space/module.h"
#include "ptrace/space/perfmap.h"
#include "ptrace/proc/proc.h"
#include "ptrace/runtimes/python/python.h"
#include "ptrace/core/internal.h"
#include "ptrace/mechanism/mechanism.h"
#include "ptrace/runtimes/python/names.h"
#include "ptrace/space/unwinder.h"

int pt_symbolize_refresh_maps(struct pt_tracee *t)
{
	struct pt_maps *m;
	int err;

	if (t->execed)
		return 0;   /* keep the old program's maps until the exec is acknowledged */
	err = pt_proc_read_maps(t->pid, &m);

	if (err)
		return err;
	pt_maps_free(t->maps);
	t->maps = m;
	t->maps_at_ns = pt__now_ns();
	t->pm_checked = 0;
	pt_mem_set_maps(t->mem, m);
	pt_unwinder_set_maps(t->unw, m);
	return 0;
}

const struct pt_maps *pt_symbolize_maps(const struct pt_tracee *t)
{
	return t->maps;
}

/* Loads the target's perf map if it changed since the last load. A file
 * still being appended to is read up to its last complete line. */
static void perfmap_refresh(struct pt_tracee *t)
{
	struct pt_perfmap *pm;
	struct stat st;
	char *text = NULL;
	size_t len = 0, want;
	int fd;

	t->pm_checked = 1;
	fd = pt_perfmap_open(t->pid, pt__symbolize_nspid(t));
	if (fd < 0)
		return;   /* none (the usual case), or not a regular file: keep what we had */
	if (fstat(fd, &st) < 0 || (st.st_ino == t->pm_st.st_ino && st.st_dev == t->pm_st.st_dev &&
				   st.st_size == t->pm_st.st_size &&
				   st.st_mtim.tv_sec == t->pm_st.st_mtim.tv_sec &&
				   st.st_mtim.tv_nsec == t->pm_st.st_mtim.tv_nsec))
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
		pt_perfmap_free(t->pm);
		t->pm = pm;
		t->pm_st = st;
		t->st.perfmap_entries = pt_perfmap_count(pm);
	}
out:
	base_free(text);
	close(fd);
}

void pt_symbolize_addr(struct pt_tracee *t, uint64_t addr, const char **name,
			 const struct pt_module **modp)
{
	struct pt_module *mod = pt_modules_find(t->mods, t->maps, addr);

	*name = mod ? pt_module_symbol(t->mods, mod, addr) : NULL;
	*modp = mod;
	if (!mod) {
		/* Anonymous memory: code a JIT wrote, named in its perf map. */
		if (!t->pm_checked)
			perfmap_refresh(t);
		*name = pt_perfmap_lookup(t->pm, addr);
	}
}

pid_t pt__symbolize_nspid(struct pt_tracee *t)
{
	if (!t->nspid) {
		char path[64], buf[4096];

		snprintf(path, sizeof(path), "/proc/%d/status", (int)t->pid);
		if (pt_proc_slurp(path, buf, sizeof(buf)) < 0 || pt_proc_parse_nspid(buf, &t->nspid))
			t->nspid = t->pid;
	}
	return t->nspid;
}

int pt_symbolize_python(struct pt_tracee *t, uint64_t addr, struct pt_py_line *out, int max)
{
	return t->py && pt_py_is_token(addr) ? pt_py_lines(t->py, addr, out, max) : 0;
}

const char *pt_symbolize_python_note(struct pt_tracee *t)
{
	if (t->py_noted || !t->py_note[0])
		return NULL;
	t->py_noted = 1;
	return t->py_note;
}

int pt_symbolize_go(struct pt_tracee *t, uint64_t addr, struct pt_goline *out, int max)
{
	struct pt_module *mod = pt_modules_find(t->mods, t->maps, addr);

	return mod && mod->go ? pt_module_go_frames(mod, addr, out, max) : 0;
}

const char *pt_symbolize_build_id(struct pt_tracee *t, uint64_t addr)
{
	struct pt_module *mod = pt_modules_find(t->mods, t->maps, addr);

	return mod ? mod->build_id : "";
}

int pt_symbolize_lookup(struct pt_tracee *t, uint64_t addr, const char *const *names,
			uint64_t *addrs, uint64_t *sizes, int n)
{
	struct pt_module *mod = pt_modules_find(t->mods, t->maps, addr);

	return mod ? pt_module_lookup(t->mods, mod, names, addrs, sizes, n) : -ENOENT;
}

int pt_symbolize_read(struct pt_tracee *t, uint64_t addr, void *buf, size_t len)
{
	return pt_mem_read(t->mem, addr, buf, len);
}

int pt_symbolize_is_go(struct pt_tracee *t, uint64_t addr)
{
	struct pt_module *mod = pt_modules_find(t->mods, t->maps, addr);

	return mod && mod->go;
}
