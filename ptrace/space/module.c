/* The target's modules (see module.h): one record per mapped file (and the
 * vDSO), made at the first address seen in it, with its layout read from
 * target memory, its symbols loaded at once (file, /proc/<pid>/exe, a
 * debug file by build-id, else .dynsym from memory) and its Go table kept
 * mapped. Owns the records, their paths, symbol tables and Go images.
 * Sampler thread only. */
#include "ptrace/space/module.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/array.h"
#include "base/mem.h"
#include "ptrace/space/gopclntab.h"
#include "ptrace/space/mem.h"
#include "ptrace/space/objects.h"
#include "ptrace/proc/proc.h"

#define MAX_ELF_FILE (4ull << 30)
#define MAX_MEM_IMAGE (64u << 20)
/* A Go table found in target memory is copied: at most this much of one
 * read-only mapping (the largest Go programs' tables are tens of MB). */
#define MAX_GO_MEM_IMAGE (256u << 20)
#define MAX_GO_MEM_DATA (64u << 20)
#define MAX_SEGS 32

static void load_symbols(struct pt_modules *mods, struct pt_module *mod);
static struct pt_object *object_of(struct pt_modules *mods, const struct pt_module *mod,
				   const struct pt_map *m);
static void load_go(struct pt_modules *mods, struct pt_module *mod, const struct pt_maps *maps,
		    size_t lo_idx, size_t hi_idx);

struct pt_modules {
	pid_t pid;
	struct pt_mem *mem;
	struct pt_objects *objs;
	struct pt_module **v;
	size_t n, cap;
	int frozen;
	int ngo;                   /* modules with a Go table */
	char debug_dir[256];
	uint64_t load_ns, loads;   /* symbol tables read (cold symbolization) */
};

int pt_modules_new(struct pt_modules **out, pid_t pid, struct pt_mem *mem,
		   struct pt_objects *objs)
{
	struct pt_modules *m = base_calloc(1, sizeof(*m));

	*out = m;
	if (!m)
		return -ENOMEM;
	m->pid = pid;
	m->mem = mem;
	m->objs = objs;
	snprintf(m->debug_dir, sizeof(m->debug_dir), "/usr/lib/debug/.build-id");
	return 0;
}

void pt_modules_set_debug_dir(struct pt_modules *mods, const char *dir)
{
	snprintf(mods->debug_dir, sizeof(mods->debug_dir), "%s", dir);
}

static void module_free(struct pt_modules *mods, struct pt_module *mod)
{
	if (!mod)
		return;
	base_free(mod->path);
	base_free(mod->go_memo);
	pt_object_put(mods->objs, mod->obj);
	base_free(mod);
}

void pt_modules_freeze(struct pt_modules *mods, int frozen)
{
	mods->frozen = frozen;
}

void pt_modules_reset(struct pt_modules *mods)
{
	for (size_t i = 0; i < mods->n; i++)
		module_free(mods, mods->v[i]);
	mods->n = 0;
	mods->ngo = 0;
}

void pt_modules_free(struct pt_modules *mods)
{
	if (!mods)
		return;
	pt_modules_reset(mods);
	base_free(mods->v);
	base_free(mods);
}

static int same_file(const struct pt_map *a, const struct pt_map *b)
{
	return a->inode == b->inode && a->dev_major == b->dev_major &&
	       a->dev_minor == b->dev_minor && !strcmp(a->path, b->path);
}

/* Reads the ELF header and program headers from target memory at mod->base
 * and fills the load bias, text range, .eh_frame_hdr table and build-id. */
static void read_layout(struct pt_modules *mods, struct pt_module *mod)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];
	uint64_t first_vaddr = UINT64_MAX;
	unsigned int n;

	if (pt_mem_read(mods->mem, mod->base, &eh, sizeof(eh)) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0)
		return;
	n = eh.e_phnum < 64 ? eh.e_phnum : 64;
	if (eh.e_phoff > mod->hi - mod->base ||
	    pt_mem_read(mods->mem, mod->base + eh.e_phoff, ph, n * sizeof(ph[0])))
		return;
	for (unsigned int i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0 && ph[i].p_vaddr < first_vaddr)
			first_vaddr = ph[i].p_vaddr & ~(uint64_t)(PT_MEM_PAGE - 1);
	if (first_vaddr == UINT64_MAX)
		return;
	mod->bias = mod->base - first_vaddr;
	mod->elf_ok = 1;
	for (unsigned int i = 0; i < n; i++) {
		if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) && !mod->text_hi) {
			mod->text_lo = mod->bias + ph[i].p_vaddr;
			mod->text_hi = mod->text_lo + ph[i].p_memsz;
		} else if (ph[i].p_type == PT_GNU_EH_FRAME) {
			mod->eh_hdr = mod->bias + ph[i].p_vaddr;
		} else if (ph[i].p_type == PT_NOTE && !mod->build_id[0] && ph[i].p_filesz <= 4096) {
			uint8_t notes[4096];

			if (!pt_mem_read(mods->mem, mod->bias + ph[i].p_vaddr, notes, ph[i].p_filesz))
				pt_elf_scan_notes(notes, ph[i].p_filesz, mod->build_id,
						  sizeof(mod->build_id));
		}
	}
	if (mod->eh_hdr) {
		/* .eh_frame_hdr: version 1, eh_frame_ptr_enc, fde_count_enc,
		 * table_enc, then eh_frame_ptr and fde_count. libunwind's remote
		 * search needs the table as datarel|sdata4 (0x3b) pairs. */
		uint8_t hdr[12];
		uint32_t count;

		if (pt_mem_read(mods->mem, mod->eh_hdr, hdr, sizeof(hdr)) || hdr[0] != 1 ||
		    hdr[2] != 0x03 /* udata4 */ || hdr[3] != 0x3b ||
		    ((hdr[1] & 0x0f) != 0x0b && (hdr[1] & 0x0f) != 0x03)) {
			mod->eh_hdr = 0;
			return;
		}
		memcpy(&count, hdr + 8, 4);
		mod->eh_table = mod->eh_hdr + 12;
		mod->eh_count = count;
	}
}

struct pt_module *pt_modules_find(struct pt_modules *mods, const struct pt_maps *maps,
				  uint64_t addr)
{
	const struct pt_map *m = pt_maps_find(maps, addr), *first;
	struct pt_module *mod;
	size_t i, lo_idx, hi_idx;

	for (i = 0; i < mods->n; i++)
		if (addr >= mods->v[i]->lo && addr < mods->v[i]->hi)
			return mods->v[i];
	if (mods->frozen || !m || (!m->inode && strcmp(m->path, "[vdso]")))
		return NULL;
	/* Gather the run of mappings of the same file around m. */
	lo_idx = hi_idx = (size_t)(m - maps->v);
	while (lo_idx > 0 && same_file(&maps->v[lo_idx - 1], m))
		lo_idx--;
	while (hi_idx + 1 < maps->n && same_file(&maps->v[hi_idx + 1], m))
		hi_idx++;
	first = &maps->v[lo_idx];
	for (i = lo_idx; i <= hi_idx; i++)
		if (maps->v[i].offset == 0) {
			first = &maps->v[i];
			break;
		}
	if (BASE_ARRAY_RESERVE(mods->v, mods->cap, mods->n + 1))
		return NULL;
	mod = base_calloc(1, sizeof(*mod));
	if (!mod || !(mod->path = base_strdup(m->path))) {
		base_free(mod);
		return NULL;
	}
	mod->inode = m->inode;
	mod->deleted = !!(m->flags & PT_MAP_DELETED);
	mod->lo = maps->v[lo_idx].start;
	mod->hi = maps->v[hi_idx].end;
	mod->base = first->start - first->offset;
	read_layout(mods, mod);
	if (!(mod->obj = object_of(mods, mod, m))) {
		module_free(mods, mod);
		return NULL;
	}
	mods->v[mods->n++] = mod;
	load_go(mods, mod, maps, lo_idx, hi_idx);
	/* Load the symbols now, while the process and its files are there: a
	 * profile is symbolized when it ends, possibly after the target has
	 * exited and /proc/<pid>/root with it. */
	load_symbols(mods, mod);
	return mod;
}

/* The shared object of mod's file: by build-id, else by the file as the
 * maps name it; the vDSO without one is its own. NULL on -ENOMEM. */
static struct pt_object *object_of(struct pt_modules *mods, const struct pt_module *mod,
				   const struct pt_map *m)
{
	char key[PT_PROC_MAX_PATH + 128];

	if (mod->build_id[0])
		snprintf(key, sizeof(key), "%s:%s", mod->path[0] == '[' ? "vdso" : "id", mod->build_id);
	else if (m->inode)
		snprintf(key, sizeof(key), "file:%x:%x:%llu:%s", m->dev_major, m->dev_minor,
			 (unsigned long long)m->inode, m->path);
	else
		return pt_object_get(mods->objs, NULL);
	return pt_object_get(mods->objs, key);
}

/* Maps a whole file read-only. Returns 0 and the mapping, or a negative errno. */
static int map_file(int fd, const uint8_t **img, size_t *len)
{
	struct stat st;
	void *p;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr) ||
	    (uint64_t)st.st_size > MAX_ELF_FILE)
		return -ENOEXEC;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*img = p;
	*len = (size_t)st.st_size;
	return 0;
}

/* Adds symbols from the file at fd if its build-id matches mod's (or mod has
 * none and `trust` is set). Returns symbols added, or a negative errno. */
static int symbols_from_fd(struct pt_module *mod, int fd, int trust)
{
	const uint8_t *img = NULL;
	struct pt_elf e;
	char id[81];
	size_t len = 0;
	int rc;

	if ((rc = map_file(fd, &img, &len)))
		return rc;
	rc = pt_elf_open(&e, img, len);
	if (!rc) {
		int have = pt_elf_build_id(&e, id, sizeof(id)) > 0;

		/* A file is only trusted when it is provably the mapped one. */
		if (mod->build_id[0] ? (have && !strcmp(id, mod->build_id)) : trust)
			rc = pt_elf_add_symbols(&e, &mod->obj->syms);
		else
			rc = -ESTALE;
	}
	munmap((void *)img, len);
	return rc;
}

static int open_checked(const char *path, uint64_t inode)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_ino != inode) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* The mapped file by its path in the maps, checked to be it (its inode):
 * through the target's root (/proc/<pid>/root: a container's files), else
 * as podprof sees that path (the maps name files from the reader's root:
 * a target chrooted below podprof's, whose root holds them further down).
 * Returns an fd or a negative errno. */
static int open_as_mapped(const struct pt_modules *mods, const struct pt_module *mod)
{
	char path[PT_PROC_MAX_PATH + 64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)mods->pid, mod->path);
	fd = open_checked(path, mod->inode);
	return fd >= 0 ? fd : open_checked(mod->path, mod->inode);
}

static int symbols_from_memory(struct pt_modules *mods, struct pt_module *mod)
{
	size_t len = mod->hi - mod->base;
	uint8_t *img;
	ssize_t got;
	int rc;

	if (len > MAX_MEM_IMAGE)
		len = MAX_MEM_IMAGE;
	img = base_malloc(len);
	if (!img)
		return -ENOMEM;
	got = pt_mem_read_partial(mods->pid, mod->base, img, len);
	if (got <= 0) {
		base_free(img);
		return got < 0 ? (int)got : -EFAULT;
	}
	if (!strcmp(mod->path, "[vdso]")) {
		/* The vDSO is a complete ELF image, section headers included. */
		struct pt_elf e;

		rc = pt_elf_open(&e, img, (size_t)got);
		if (!rc)
			rc = pt_elf_add_symbols(&e, &mod->obj->syms);
	} else {
		rc = pt_elf_add_dynamic_symbols(img, (size_t)got, mod->base, mod->base - mod->bias,
						&mod->obj->syms);
	}
	base_free(img);
	return rc;
}

static void load_symbols_timed(struct pt_modules *mods, struct pt_module *mod);

static void load_symbols(struct pt_modules *mods, struct pt_module *mod)
{
	struct pt_object *obj = mod->obj;
	struct timespec a, b;

	/* Loaded for another module of the same file: nothing to read. A
	 * file none was found for is tried again (this process may see
	 * through its root what another did not). */
	if (obj->sym_state <= 0) {
		pt_symtab_free(&obj->syms);
		clock_gettime(CLOCK_MONOTONIC, &a);
		load_symbols_timed(mods, mod);
		clock_gettime(CLOCK_MONOTONIC, &b);
		mods->load_ns += (uint64_t)((b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec));
		mods->loads++;
	}
	mod->sym_state = obj->sym_state;
	mod->sym_source = obj->sym_source;
}

void pt_modules_load_stats(const struct pt_modules *mods, uint64_t *ns, uint64_t *count)
{
	*ns = mods->load_ns;
	*count = mods->loads;
}

static void load_symbols_timed(struct pt_modules *mods, struct pt_module *mod)
{
	char path[PT_PROC_MAX_PATH + 64];
	int fd, rc = -ENOENT;

	mod->obj->sym_state = -1;
	if (!strcmp(mod->path, "[vdso]")) {
		if (symbols_from_memory(mods, mod) > 0)
			mod->obj->sym_source = "vdso";
		goto out;
	}
	/* 1. The file as the target sees it, if it is still the mapped file. */
	if (!mod->deleted && mod->path[0] == '/') {
		fd = open_as_mapped(mods, mod);
		if (fd >= 0) {
			rc = symbols_from_fd(mod, fd, 1);
			close(fd);
		}
	}
	/* 2. The main executable, even deleted, through /proc/<pid>/exe. */
	if (rc <= 0) {
		snprintf(path, sizeof(path), "/proc/%d/exe", (int)mods->pid);
		fd = open_checked(path, mod->inode);
		if (fd >= 0) {
			int r2 = symbols_from_fd(mod, fd, 1);

			if (r2 > 0 || rc < 0)
				rc = r2;
			close(fd);
		}
	}
	if (rc > 0)
		mod->obj->sym_source = "file";
	/* 3. A separate debug file with the same build-id (libc6-dbg and the
	 *    like) has the local symbols a stripped library lacks. */
	if (mod->build_id[0] && mod->build_id[1]) {
		const char *roots[2] = { "root", NULL };

		for (int i = 0; i < 2; i++) {
			int r2;

			if (roots[i])
				snprintf(path, sizeof(path), "/proc/%d/root%s/%.2s/%s.debug",
					 (int)mods->pid, mods->debug_dir, mod->build_id, mod->build_id + 2);
			else
				snprintf(path, sizeof(path), "%s/%.2s/%s.debug", mods->debug_dir,
					 mod->build_id, mod->build_id + 2);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue;
			r2 = symbols_from_fd(mod, fd, 0);
			close(fd);
			if (r2 > 0) {
				rc = r2;
				mod->obj->sym_source = "debug";
				break;
			}
		}
	}
	/* 4. .dynsym from the loaded image. */
	if (rc <= 0 && symbols_from_memory(mods, mod) > 0)
		mod->obj->sym_source = "memory";
out:
	if (mod->obj->syms.n && pt_symtab_finish(&mod->obj->syms) == 0)
		mod->obj->sym_state = 1;
}

/* ---- Go: .gopclntab -------------------------------------------------- */

/* Opens the module's file (open_as_mapped), else the main executable
 * through /proc/<pid>/exe.
 * Returns an fd or a negative errno. */
static int open_module_file(struct pt_modules *mods, struct pt_module *mod)
{
	char path[PT_PROC_MAX_PATH + 64];
	int fd = -ENOENT;

	if (!mod->deleted && mod->path[0] == '/')
		fd = open_as_mapped(mods, mod);
	if (fd < 0) {
		snprintf(path, sizeof(path), "/proc/%d/exe", (int)mods->pid);
		fd = open_checked(path, mod->inode);
	}
	return fd;
}

/* The .gopclntab of the ELF file image img[0..len): by its section (named
 * .data.rel.ro.gopclntab by some external linkers), else by its magic in a
 * read-only segment; go:func.* from the moduledata in a writable segment.
 * Returns 0 (mod->go set), -ENOENT or another negative errno. */
static int go_from_file(struct pt_module *mod, const uint8_t *img, size_t len)
{
	struct pt_elf_seg segs[MAX_SEGS];
	uint64_t addr, off, size, text = 0, text_lo = 0, text_hi = 0, tsz;
	struct pt_elf e;
	int nseg, rc = -ENOENT;

	if (pt_elf_open(&e, img, len))
		return -ENOEXEC;
	nseg = pt_elf_segments(&e, segs, MAX_SEGS);
	for (int i = 0; i < nseg; i++)
		if ((segs[i].flags & PF_X) && !text_hi) {
			text_lo = segs[i].vaddr;
			text_hi = segs[i].vaddr + segs[i].memsz;
		}
	pt_elf_section(&e, ".text", &text, &off, &tsz);
	if (!pt_elf_section(&e, ".gopclntab", &addr, &off, &size) ||
	    !pt_elf_section(&e, ".data.rel.ro.gopclntab", &addr, &off, &size)) {
		for (int i = 0; i < nseg && rc; i++)
			if (addr >= segs[i].vaddr && addr - segs[i].vaddr < segs[i].filesz &&
			    off - segs[i].off == addr - segs[i].vaddr)
				rc = pt_gotab_new(&mod->obj->go, img + segs[i].off, segs[i].filesz,
						  segs[i].vaddr, addr - segs[i].vaddr, size, text);
		mod->obj->go_source = "section";
	} else {
		/* No section headers (or a linker that names it otherwise):
		 * the header's magic, in a segment that is neither code nor
		 * writable. */
		for (int i = 0; i < nseg && rc; i++) {
			long at;

			if (segs[i].flags & (PF_X | PF_W))
				continue;
			at = pt_gotab_scan(img + segs[i].off, segs[i].filesz, segs[i].vaddr,
					   text_lo, text_hi);
			if (at >= 0)
				rc = pt_gotab_new(&mod->obj->go, img + segs[i].off, segs[i].filesz,
						  segs[i].vaddr, (size_t)at, segs[i].filesz - (size_t)at,
						  text);
		}
		mod->obj->go_source = "scan";
	}
	if (rc)
		return rc;
	for (int i = 0; i < nseg; i++)
		if ((segs[i].flags & PF_W) &&
		    !pt_gotab_find_gofunc(mod->obj->go, img + segs[i].off, segs[i].filesz, segs[i].vaddr, 0))
			break;
	return 0;
}

/* The same from target memory, for a module whose file we cannot open:
 * the magic in one of its read-only mappings (copied, bounded), the
 * moduledata in its writable ones. Returns 0 or a negative errno. */
static int go_from_memory(struct pt_modules *mods, struct pt_module *mod,
			  const struct pt_maps *maps, size_t lo_idx, size_t hi_idx)
{
	int rc = -ENOENT;

	for (size_t i = lo_idx; i <= hi_idx && rc; i++) {
		const struct pt_map *m = &maps->v[i];
		size_t len = m->end - m->start;
		uint8_t *buf;
		ssize_t got;
		long at;

		if ((m->flags & (PT_MAP_X | PT_MAP_W)) || len > MAX_GO_MEM_IMAGE)
			continue;
		if (!(buf = base_malloc(len)))
			return -ENOMEM;
		got = pt_mem_read_partial(mods->pid, m->start, buf, len);
		at = got > 0 ? pt_gotab_scan(buf, (size_t)got, m->start - mod->bias,
					     mod->text_lo - mod->bias, mod->text_hi - mod->bias) : -ENOENT;
		if (at >= 0)
			rc = pt_gotab_new(&mod->obj->go, buf, (size_t)got, m->start - mod->bias, (size_t)at,
					  (size_t)got - (size_t)at, 0);
		if (rc) {
			base_free(buf);
			continue;
		}
		mod->obj->go_img = buf;
		mod->obj->go_img_len = len;
		mod->obj->go_source = "memory";
	}
	if (rc)
		return rc;
	for (size_t i = lo_idx; i <= hi_idx; i++) {
		const struct pt_map *m = &maps->v[i];
		size_t len = m->end - m->start;
		uint8_t *buf;
		ssize_t got;
		int found;

		if (!(m->flags & PT_MAP_W) || len > MAX_GO_MEM_DATA || !(buf = base_malloc(len)))
			continue;
		got = pt_mem_read_partial(mods->pid, m->start, buf, len);
		found = got > 0 && !pt_gotab_find_gofunc(mod->obj->go, buf, (size_t)got, m->start - mod->bias,
							 mod->bias);
		base_free(buf);
		if (found)
			break;
	}
	return 0;
}

/* Finds the module's Go table, if it has one: in its file (kept mapped:
 * the table is read at every unwind step), else in its memory. */
static void load_go(struct pt_modules *mods, struct pt_module *mod, const struct pt_maps *maps,
		    size_t lo_idx, size_t hi_idx)
{
	struct pt_object *obj = mod->obj;
	const uint8_t *img = NULL;
	size_t len = 0;
	int fd, rc = -ENOENT;

	if (!mod->elf_ok || !strcmp(mod->path, "[vdso]"))
		return;
	/* Looked for already, for another module of the same file: the
	 * table (or that the file has none) holds for this one too. */
	if (!obj->go_state) {
		int looked = 0;   /* the file was mapped and looked through */

		fd = open_module_file(mods, mod);
		if (fd >= 0) {
			rc = map_file(fd, &img, &len);
			close(fd);
			if (!rc) {
				rc = go_from_file(mod, img, len);
				looked = rc == 0 || rc == -ENOENT || rc == -ENOEXEC;
				if (rc) {
					munmap((void *)img, len);
				} else {
					obj->go_img = (void *)img;
					obj->go_img_len = len;
					obj->go_img_mapped = 1;
				}
			}
		}
		if (fd < 0)
			rc = go_from_memory(mods, mod, maps, lo_idx, hi_idx);
		/* A file read and found without a table has none; a failure
		 * (no memory, an unreadable file) or memory that did not show
		 * one is looked at again by the next module. */
		obj->go_state = !rc && obj->go ? 1 : looked ? -1 : 0;
	}
	if (obj->go_state <= 0)
		return;
	mod->go = obj->go;
	pt_gotab_range(mod->go, &mod->go_lo, &mod->go_hi);
	mod->go_lo += mod->bias;
	mod->go_hi += mod->bias;
	mods->ngo++;
}

int pt_module_lookup(struct pt_modules *mods, struct pt_module *mod, const char *const *names,
		     uint64_t *addrs, uint64_t *sizes, int n)
{
	const uint8_t *img = NULL;
	size_t len = 0;
	struct pt_elf e;
	int fd, rc, found = 0, missing = 0;

	/* Looked up for another module of the same file already: no need
	 * to map the file again (64 workers, one lookup). */
	for (int i = 0; i < n; i++) {
		const struct pt_object_name *on = pt_object_name(mod->obj, names[i]);

		addrs[i] = sizes[i] = 0;
		if (!on) {
			missing++;
		} else if (on->found) {
			addrs[i] = on->vaddr + mod->bias;
			sizes[i] = on->size;
			found++;
		}
	}
	if (!missing)
		return found;
	if (!mod->elf_ok || (fd = open_module_file(mods, mod)) < 0)
		return found ? found : -ENOENT;
	rc = map_file(fd, &img, &len);
	close(fd);
	if (rc)
		return found ? found : rc;
	if (pt_elf_open(&e, img, len) == 0)
		for (int i = 0; i < n; i++) {
			uint64_t v = 0, sz = 0;
			int ok;

			if (pt_object_name(mod->obj, names[i]))
				continue;   /* known already (counted above) */
			if (!strncmp(names[i], PT_MODULE_SECTION, sizeof(PT_MODULE_SECTION) - 1)) {
				uint64_t off;

				ok = !pt_elf_section(&e, names[i] + sizeof(PT_MODULE_SECTION) - 1, &v, &off,
						     &sz) && v;
			} else {
				ok = !pt_elf_symbol(&e, names[i], &v, &sz);
			}
			if (ok) {
				addrs[i] = v + mod->bias;
				sizes[i] = sz;
				found++;
			}
			(void)pt_object_name_add(mod->obj, names[i], ok, v, sz);
		}
	munmap((void *)img, len);
	return found;
}

int pt_modules_go_count(const struct pt_modules *mods)
{
	return mods->ngo;
}

/* A direct-mapped memo of lookups by address: a hit is the same address
 * looked up before, in the same table, so the same answer. */
#define GO_MEMO_SLOTS 256

struct pt_gofunc_memo {
	struct {
		uint64_t addr;          /* + 1: 0 is an empty slot */
		struct pt_gofunc f;
	} slot[GO_MEMO_SLOTS];
};

int pt_module_go_func(struct pt_module *mod, uint64_t addr, struct pt_gofunc *f)
{
	size_t i = (size_t)((addr * 0x9e3779b97f4a7c15ull) >> 56) % GO_MEMO_SLOTS;
	int err;

	if (!mod->go || addr < mod->go_lo || addr >= mod->go_hi)
		return -ENOENT;
	if (mod->go_memo && mod->go_memo->slot[i].addr == addr + 1) {
		*f = mod->go_memo->slot[i].f;
		return 0;
	}
	if ((err = pt_gotab_lookup(mod->go, addr - mod->bias, f)))
		return err;
	if (!mod->go_memo)
		mod->go_memo = base_calloc(1, sizeof(*mod->go_memo));   /* none: no memo */
	if (mod->go_memo) {
		mod->go_memo->slot[i].addr = addr + 1;
		mod->go_memo->slot[i].f = *f;
	}
	return 0;
}

int pt_module_go_frames(struct pt_module *mod, uint64_t addr, struct pt_goline *out, int max)
{
	struct pt_gofunc f;
	int n;

	if (pt_module_go_func(mod, addr, &f))
		return 0;
	n = pt_gotab_frames(mod->go, &f, addr - mod->bias, out, max);
	for (int k = 0; k < n; k++)
		out[k].entry += mod->bias;
	return n;
}

const char *pt_module_symbol(struct pt_modules *mods, struct pt_module *mod, uint64_t addr)
{
	struct pt_gofunc f;

	if (!pt_module_go_func(mod, addr, &f) && f.name)
		return f.name;
	if (!mod->sym_state)
		load_symbols(mods, mod);
	if (mod->sym_state < 0 || !mod->elf_ok)
		return NULL;
	return pt_symtab_lookup(&mod->obj->syms, addr - mod->bias, NULL);
}

int pt_module_unwind_entry(struct pt_modules *mods, const struct pt_module *mod, uint64_t addr,
			   uint64_t *lo, uint64_t *hi)
{
	uint64_t n = mod->eh_count, a = 0, b = n;
	int32_t row[2], next;

	/* .eh_frame_hdr's table: (initial location, FDE) pairs of sdata4
	 * relative to the header, sorted by location (read_layout checked the
	 * encoding). The target's memory: a lie gives a wrong range, no more. */
	if (!mod->eh_hdr || !n || n > (1u << 24) || addr < mod->text_lo || addr >= mod->text_hi)
		return -ENOENT;
	while (b - a > 1) {   /* the last row whose location is at or below addr */
		uint64_t mid = a + (b - a) / 2;

		if (pt_mem_read(mods->mem, mod->eh_table + mid * 8, row, 4))
			return -ENOENT;
		if (mod->eh_hdr + (uint64_t)(int64_t)row[0] <= addr)
			a = mid;
		else
			b = mid;
	}
	if (pt_mem_read(mods->mem, mod->eh_table + a * 8, row, 8) ||
	    mod->eh_hdr + (uint64_t)(int64_t)row[0] > addr)
		return -ENOENT;
	*lo = mod->eh_hdr + (uint64_t)(int64_t)row[0];
	*hi = mod->text_hi;
	if (a + 1 < n && !pt_mem_read(mods->mem, mod->eh_table + (a + 1) * 8, &next, 4) &&
	    mod->eh_hdr + (uint64_t)(int64_t)next > *lo && mod->eh_hdr + (uint64_t)(int64_t)next < *hi)
		*hi = mod->eh_hdr + (uint64_t)(int64_t)next;
	return 0;
}
