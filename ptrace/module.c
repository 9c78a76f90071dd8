#include "ptrace/module.h"

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

#include "ptrace/mem.h"
#include "ptrace/proc.h"

#define MAX_ELF_FILE (4ull << 30)
#define MAX_MEM_IMAGE (64u << 20)

static void load_symbols(struct pt_modules *mods, struct pt_module *mod);

struct pt_modules {
	pid_t pid;
	struct pt_mem *mem;
	struct pt_module **v;
	size_t n, cap;
	int frozen;
	char debug_dir[256];
	uint64_t load_ns, loads;   /* symbol tables read (cold symbolization) */
};

int pt_modules_new(struct pt_modules **out, pid_t pid, struct pt_mem *mem)
{
	struct pt_modules *m = calloc(1, sizeof(*m));

	*out = m;
	if (!m)
		return -ENOMEM;
	m->pid = pid;
	m->mem = mem;
	snprintf(m->debug_dir, sizeof(m->debug_dir), "/usr/lib/debug/.build-id");
	return 0;
}

void pt_modules_set_debug_dir(struct pt_modules *mods, const char *dir)
{
	snprintf(mods->debug_dir, sizeof(mods->debug_dir), "%s", dir);
}

static void module_free(struct pt_module *mod)
{
	if (!mod)
		return;
	free(mod->path);
	pt_symtab_free(&mod->syms);
	free(mod);
}

void pt_modules_freeze(struct pt_modules *mods, int frozen)
{
	mods->frozen = frozen;
}

void pt_modules_reset(struct pt_modules *mods)
{
	for (size_t i = 0; i < mods->n; i++)
		module_free(mods->v[i]);
	mods->n = 0;
}

void pt_modules_free(struct pt_modules *mods)
{
	if (!mods)
		return;
	pt_modules_reset(mods);
	free(mods->v);
	free(mods);
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
	if (mods->n == mods->cap) {
		size_t cap = mods->cap ? mods->cap * 2 : 32;
		struct pt_module **v = realloc(mods->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		mods->v = v;
		mods->cap = cap;
	}
	mod = calloc(1, sizeof(*mod));
	if (!mod || !(mod->path = strdup(m->path))) {
		free(mod);
		return NULL;
	}
	mod->inode = m->inode;
	mod->deleted = !!(m->flags & PT_MAP_DELETED);
	mod->lo = maps->v[lo_idx].start;
	mod->hi = maps->v[hi_idx].end;
	mod->base = first->start - first->offset;
	read_layout(mods, mod);
	mods->v[mods->n++] = mod;
	/* Load the symbols now, while the process and its files are there: a
	 * profile is symbolized when it ends, possibly after the target has
	 * exited and /proc/<pid>/root with it. */
	load_symbols(mods, mod);
	return mod;
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
			rc = pt_elf_add_symbols(&e, &mod->syms);
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

static int symbols_from_memory(struct pt_modules *mods, struct pt_module *mod)
{
	size_t len = mod->hi - mod->base;
	uint8_t *img;
	ssize_t got;
	int rc;

	if (len > MAX_MEM_IMAGE)
		len = MAX_MEM_IMAGE;
	img = malloc(len);
	if (!img)
		return -ENOMEM;
	got = pt_mem_read_partial(mods->pid, mod->base, img, len);
	if (got <= 0) {
		free(img);
		return got < 0 ? (int)got : -EFAULT;
	}
	if (!strcmp(mod->path, "[vdso]")) {
		/* The vDSO is a complete ELF image, section headers included. */
		struct pt_elf e;

		rc = pt_elf_open(&e, img, (size_t)got);
		if (!rc)
			rc = pt_elf_add_symbols(&e, &mod->syms);
	} else {
		rc = pt_elf_add_dynamic_symbols(img, (size_t)got, mod->base, mod->base - mod->bias,
						&mod->syms);
	}
	free(img);
	return rc;
}

static void load_symbols_timed(struct pt_modules *mods, struct pt_module *mod);

static void load_symbols(struct pt_modules *mods, struct pt_module *mod)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	load_symbols_timed(mods, mod);
	clock_gettime(CLOCK_MONOTONIC, &b);
	mods->load_ns += (uint64_t)((b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec));
	mods->loads++;
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

	mod->sym_state = -1;
	if (!strcmp(mod->path, "[vdso]")) {
		if (symbols_from_memory(mods, mod) > 0)
			mod->sym_source = "vdso";
		goto out;
	}
	/* 1. The file as the target sees it, if it is still the mapped file. */
	if (!mod->deleted && mod->path[0] == '/') {
		snprintf(path, sizeof(path), "/proc/%d/root%s", (int)mods->pid, mod->path);
		fd = open_checked(path, mod->inode);
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
		mod->sym_source = "file";
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
				mod->sym_source = "debug";
				break;
			}
		}
	}
	/* 4. .dynsym from the loaded image. */
	if (rc <= 0 && symbols_from_memory(mods, mod) > 0)
		mod->sym_source = "memory";
out:
	if (mod->syms.n && pt_symtab_finish(&mod->syms) == 0)
		mod->sym_state = 1;
}

const char *pt_module_symbol(struct pt_modules *mods, struct pt_module *mod, uint64_t addr)
{
	if (!mod->sym_state)
		load_symbols(mods, mod);
	if (mod->sym_state < 0 || !mod->elf_ok)
		return NULL;
	return pt_symtab_lookup(&mod->syms, addr - mod->bias, NULL);
}
