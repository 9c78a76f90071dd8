/* ELF images read for symbols, build IDs and segments (see elf.h): every
 * offset and size taken from the image is checked against its length, and
 * what a symbol table yields is copied into a pt_symtab of our own (names in
 * one pool). Any thread; a symbol table has one owner at a time. */
#include "ptrace/space/elf.h"

#include <elf.h>
#include <errno.h>
#include <lzma.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/mem.h"

static int in_bounds(size_t len, uint64_t off, uint64_t size)
{
	return off <= len && size <= len - off;
}

int pt_elf_open(struct pt_elf *e, const void *img, size_t len)
{
	const Elf64_Ehdr *eh = img;

	e->img = img;
	e->len = len;
	if (len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB)
		return -ENOEXEC;
	return 0;
}

static const Elf64_Ehdr *ehdr(const struct pt_elf *e)
{
	return (const Elf64_Ehdr *)e->img;
}

/* Section header i, or NULL when the table is absent or out of bounds. */
static const Elf64_Shdr *shdr(const struct pt_elf *e, unsigned int i)
{
	const Elf64_Ehdr *eh = ehdr(e);

	/* Real files align their tables; a misaligned one is hostile and
	 * could not be read through a struct pointer anyway. */
	if (!eh->e_shoff || (eh->e_shoff & 7) || eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    i >= eh->e_shnum)
		return NULL;
	if (!in_bounds(e->len, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)))
		return NULL;
	return (const Elf64_Shdr *)(e->img + eh->e_shoff) + i;
}

static const Elf64_Phdr *phdr(const struct pt_elf *e, unsigned int i)
{
	const Elf64_Ehdr *eh = ehdr(e);

	if ((eh->e_phoff & 7) || eh->e_phentsize != sizeof(Elf64_Phdr) || i >= eh->e_phnum)
		return NULL;
	if (!in_bounds(e->len, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)))
		return NULL;
	return (const Elf64_Phdr *)(e->img + eh->e_phoff) + i;
}

static const char *section_name(const struct pt_elf *e, const Elf64_Shdr *sh)
{
	const Elf64_Shdr *strs = shdr(e, ehdr(e)->e_shstrndx);

	if (!strs || !in_bounds(e->len, strs->sh_offset, strs->sh_size) ||
	    sh->sh_name >= strs->sh_size)
		return NULL;
	const char *s = (const char *)e->img + strs->sh_offset + sh->sh_name;

	return memchr(s, '\0', strs->sh_size - sh->sh_name) ? s : NULL;
}

static const Elf64_Shdr *find_section(const struct pt_elf *e, const char *name, uint32_t type)
{
	for (unsigned int i = 1; i < ehdr(e)->e_shnum; i++) {
		const Elf64_Shdr *sh = shdr(e, i);
		const char *n;

		if (!sh)
			return NULL;
		if (type && sh->sh_type != type)
			continue;
		n = section_name(e, sh);
		if (n && !strcmp(n, name))
			return sh;
	}
	return NULL;
}

int pt_elf_section(const struct pt_elf *e, const char *name, uint64_t *addr, uint64_t *off,
		   uint64_t *size)
{
	const Elf64_Shdr *sh = find_section(e, name, 0);

	if (!sh || sh->sh_type == SHT_NOBITS || !in_bounds(e->len, sh->sh_offset, sh->sh_size))
		return -ENOENT;
	*addr = sh->sh_addr;
	*off = sh->sh_offset;
	*size = sh->sh_size;
	return 0;
}

int pt_elf_segments(const struct pt_elf *e, struct pt_elf_seg *segs, int max)
{
	int n = 0;

	for (unsigned int i = 0; i < ehdr(e)->e_phnum && n < max; i++) {
		const Elf64_Phdr *ph = phdr(e, i);

		if (!ph)
			break;
		if (ph->p_type != PT_LOAD || ph->p_offset > e->len)
			continue;
		segs[n] = (struct pt_elf_seg){ .vaddr = ph->p_vaddr, .off = ph->p_offset,
					       .filesz = ph->p_filesz, .memsz = ph->p_memsz,
					       .flags = ph->p_flags };
		if (segs[n].filesz > e->len - ph->p_offset)
			segs[n].filesz = e->len - ph->p_offset;
		n++;
	}
	return n;
}

/* Walks the notes in [p, p+len) for NT_GNU_BUILD_ID. */
int pt_elf_scan_notes(const void *notes, size_t len, char *hex, size_t hexlen)
{
	const uint8_t *p = notes;
	size_t off = 0;

	while (off + sizeof(Elf64_Nhdr) <= len) {
		Elf64_Nhdr note;
		const Elf64_Nhdr *nh = &note;   /* a copy: the notes may be misaligned */
		uint64_t namesz, descsz, name_off, desc_off;

		memcpy(&note, p + off, sizeof(note));
		namesz = (nh->n_namesz + 3ull) & ~3ull;
		descsz = (nh->n_descsz + 3ull) & ~3ull;
		name_off = off + sizeof(*nh);
		desc_off = name_off + namesz;

		if (!in_bounds(len, name_off, namesz) || !in_bounds(len, desc_off, descsz))
			return -ENOENT;
		if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
		    !memcmp(p + name_off, "GNU", 4) && nh->n_descsz > 0 &&
		    (size_t)nh->n_descsz * 2 < hexlen) {
			static const char digits[] = "0123456789abcdef";

			for (uint32_t i = 0; i < nh->n_descsz; i++) {
				hex[2 * i] = digits[p[desc_off + i] >> 4];
				hex[2 * i + 1] = digits[p[desc_off + i] & 15];
			}
			hex[2 * nh->n_descsz] = '\0';
			return (int)(2 * nh->n_descsz);
		}
		off = desc_off + descsz;
	}
	return -ENOENT;
}

int pt_elf_build_id(const struct pt_elf *e, char *hex, size_t hexlen)
{
	int rc;

	for (unsigned int i = 1; i < ehdr(e)->e_shnum; i++) {
		const Elf64_Shdr *sh = shdr(e, i);

		if (!sh)
			break;
		if (sh->sh_type == SHT_NOTE && in_bounds(e->len, sh->sh_offset, sh->sh_size) &&
		    (rc = pt_elf_scan_notes(e->img + sh->sh_offset, sh->sh_size, hex, hexlen)) > 0)
			return rc;
	}
	for (unsigned int i = 0; i < ehdr(e)->e_phnum; i++) {
		const Elf64_Phdr *ph = phdr(e, i);

		if (!ph)
			break;
		if (ph->p_type == PT_NOTE && in_bounds(e->len, ph->p_offset, ph->p_filesz) &&
		    (rc = pt_elf_scan_notes(e->img + ph->p_offset, ph->p_filesz, hex, hexlen)) > 0)
			return rc;
	}
	return -ENOENT;
}

static int add_name(struct pt_symtab *st, const char *s, size_t n, uint32_t *off)
{
	int err;

	if (st->names_len + n + 1 > PT_ELF_MAX_NAMES)
		return -E2BIG;
	if ((err = BASE_ARRAY_GROW(st->names, st->names_cap, st->names_len + n + 1)))
		return err;
	memcpy(st->names + st->names_len, s, n);
	st->names[st->names_len + n] = '\0';
	*off = (uint32_t)st->names_len;
	st->names_len += n + 1;
	return 0;
}

static int add_sym(struct pt_symtab *st, uint64_t addr, uint64_t size, const char *name,
		   size_t namelen, unsigned char bind)
{
	struct pt_sym *s;
	int err;

	if (st->n == PT_ELF_MAX_SYMS)
		return -E2BIG;
	if ((err = BASE_ARRAY_GROW(st->v, st->cap, st->n + 1)))
		return err;
	s = &st->v[st->n];
	if ((err = add_name(st, name, namelen, &s->name)))
		return err;
	s->addr = addr;
	s->size = size;
	s->rank = bind == STB_GLOBAL ? 2 : bind == STB_WEAK ? 1 : 0;
	st->n++;
	return 0;
}

/* Adds the FUNC/IFUNC symbols with a size from a symbol table whose entries
 * are at syms[0..count) and names in strs[0..strsz). */
static int add_table(struct pt_symtab *st, const Elf64_Sym *syms, size_t count,
		     const char *strs, size_t strsz)
{
	int added = 0, err;

	for (size_t i = 0; i < count; i++) {
		const Elf64_Sym *s = &syms[i];
		unsigned char type = ELF64_ST_TYPE(s->st_info);
		const char *name;
		size_t n;

		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s->st_shndx == SHN_UNDEF ||
		    !s->st_name || s->st_name >= strsz)
			continue;
		name = strs + s->st_name;
		n = strnlen(name, strsz - s->st_name);
		if (n == strsz - s->st_name || n == 0)
			continue;   /* not NUL-terminated inside the table */
		if ((err = add_sym(st, s->st_value, s->st_size, name, n, ELF64_ST_BIND(s->st_info))))
			return err;
		added++;
	}
	return added;
}

static int add_section_table(const struct pt_elf *e, const Elf64_Shdr *sh, struct pt_symtab *st)
{
	const Elf64_Shdr *strs = shdr(e, sh->sh_link);

	if (!strs || sh->sh_entsize != sizeof(Elf64_Sym) ||
	    !in_bounds(e->len, sh->sh_offset, sh->sh_size) ||
	    !in_bounds(e->len, strs->sh_offset, strs->sh_size) || (sh->sh_offset & 7))
		return -ENOEXEC;
	return add_table(st, (const Elf64_Sym *)(e->img + sh->sh_offset),
			 sh->sh_size / sizeof(Elf64_Sym),
			 (const char *)e->img + strs->sh_offset, strs->sh_size);
}

/* MiniDebugInfo: .gnu_debugdata is an xz stream holding an ELF whose .symtab
 * has the local function symbols that .dynsym lacks. */
static int add_debugdata(const struct pt_elf *e, struct pt_symtab *st)
{
	const Elf64_Shdr *sh = find_section(e, ".gnu_debugdata", SHT_PROGBITS);
	uint64_t memlimit = PT_ELF_MAX_DEBUGDATA;
	size_t in_pos = 0, out_pos = 0, cap = 1u << 20;
	struct pt_elf inner;
	uint8_t *out = NULL;
	int rc = 0;

	if (!sh || !in_bounds(e->len, sh->sh_offset, sh->sh_size))
		return 0;
	for (;;) {
		uint8_t *p = base_realloc(out, cap);
		lzma_ret lr;

		if (!p) {
			rc = -ENOMEM;
			goto out;
		}
		out = p;
		in_pos = out_pos = 0;
		memlimit = PT_ELF_MAX_DEBUGDATA;
		lr = lzma_stream_buffer_decode(&memlimit, 0, NULL, e->img + sh->sh_offset, &in_pos,
					       sh->sh_size, out, &out_pos, cap);
		if (lr == LZMA_OK)
			break;
		if (lr != LZMA_BUF_ERROR || cap >= PT_ELF_MAX_DEBUGDATA) {
			rc = -ENOEXEC;
			goto out;
		}
		cap *= 4;
	}
	if (pt_elf_open(&inner, out, out_pos) == 0) {
		const Elf64_Shdr *tab = find_section(&inner, ".symtab", SHT_SYMTAB);

		if (tab)
			rc = add_section_table(&inner, tab, st);
	}
out:
	base_free(out);
	return rc;
}

int pt_elf_add_symbols(const struct pt_elf *e, struct pt_symtab *st)
{
	const Elf64_Shdr *tab = find_section(e, ".symtab", SHT_SYMTAB);
	int rc, more;

	if (!tab)
		tab = find_section(e, ".dynsym", SHT_DYNSYM);
	rc = tab ? add_section_table(e, tab, st) : 0;
	if (rc < 0 && rc != -ENOEXEC)
		return rc;
	if (rc < 0)
		rc = 0;
	more = add_debugdata(e, st);
	if (more < 0 && more != -ENOEXEC)
		return more;
	return rc + (more > 0 ? more : 0);
}

/* The symbol `name` in one symbol table section, checked as add_table does. */
static int table_symbol(const struct pt_elf *e, const Elf64_Shdr *sh, const char *name,
			uint64_t *vaddr, uint64_t *size)
{
	const Elf64_Shdr *strs = sh ? shdr(e, sh->sh_link) : NULL;
	size_t want = strlen(name) + 1;
	const Elf64_Sym *syms;
	const char *str;

	if (!strs || sh->sh_entsize != sizeof(Elf64_Sym) ||
	    !in_bounds(e->len, sh->sh_offset, sh->sh_size) ||
	    !in_bounds(e->len, strs->sh_offset, strs->sh_size) || (sh->sh_offset & 7))
		return -ENOENT;
	syms = (const Elf64_Sym *)(e->img + sh->sh_offset);
	str = (const char *)e->img + strs->sh_offset;
	for (size_t i = 0; i < sh->sh_size / sizeof(Elf64_Sym); i++) {
		const Elf64_Sym *s = &syms[i];

		if (s->st_shndx == SHN_UNDEF || !s->st_name || s->st_name >= strs->sh_size ||
		    strs->sh_size - s->st_name < want || memcmp(str + s->st_name, name, want))
			continue;
		*vaddr = s->st_value;
		*size = s->st_size;
		return 0;
	}
	return -ENOENT;
}

int pt_elf_symbol(const struct pt_elf *e, const char *name, uint64_t *vaddr, uint64_t *size)
{
	if (!table_symbol(e, find_section(e, ".dynsym", SHT_DYNSYM), name, vaddr, size))
		return 0;
	return table_symbol(e, find_section(e, ".symtab", SHT_SYMTAB), name, vaddr, size);
}

int pt_elf_add_dynamic_symbols(const void *img, size_t len, uint64_t rt_base,
			       uint64_t vaddr_base, struct pt_symtab *st)
{
	const uint8_t *b = img;
	const Elf64_Ehdr *eh = img;
	uint64_t symtab = 0, strtab = 0, strsz = 0, syment = sizeof(Elf64_Sym);
	const Elf64_Dyn *dyn = NULL;
	size_t ndyn = 0;

	if (len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    (eh->e_phoff & 7) || !in_bounds(len, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)))
		return -ENOEXEC;
	for (unsigned int i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(b + eh->e_phoff) + i;

		if (ph->p_type != PT_DYNAMIC)
			continue;
		if (ph->p_vaddr < vaddr_base || ((ph->p_vaddr - vaddr_base) & 7) ||
		    !in_bounds(len, ph->p_vaddr - vaddr_base, ph->p_memsz))
			return -ENOEXEC;
		dyn = (const Elf64_Dyn *)(b + (ph->p_vaddr - vaddr_base));
		ndyn = ph->p_memsz / sizeof(Elf64_Dyn);
	}
	if (!dyn)
		return -ENOEXEC;
	for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
		switch (dyn[i].d_tag) {
		case DT_SYMTAB: symtab = dyn[i].d_un.d_ptr; break;
		case DT_STRTAB: strtab = dyn[i].d_un.d_ptr; break;
		case DT_STRSZ: strsz = dyn[i].d_un.d_val; break;
		case DT_SYMENT: syment = dyn[i].d_un.d_val; break;
		}
	}
	/* ld.so relocates these entries in place on x86-64; accept either form. */
	if (symtab >= rt_base)
		symtab -= rt_base;
	else if (symtab >= vaddr_base)
		symtab -= vaddr_base;
	if (strtab >= rt_base)
		strtab -= rt_base;
	else if (strtab >= vaddr_base)
		strtab -= vaddr_base;
	if (!symtab || !strtab || syment != sizeof(Elf64_Sym) || strtab <= symtab ||
	    (symtab & 7) || !in_bounds(len, strtab, strsz) || !in_bounds(len, symtab, strtab - symtab))
		return -ENOEXEC;
	/* .dynstr follows .dynsym in every linker's default layout: the gap is the count. */
	return add_table(st, (const Elf64_Sym *)(b + symtab), (strtab - symtab) / sizeof(Elf64_Sym),
			 (const char *)b + strtab, strsz);
}

static int cmp_sym(const void *a, const void *b)
{
	const struct pt_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (!x->size != !y->size)
		return x->size ? -1 : 1;         /* a sized alias first */
	if (x->rank != y->rank)
		return y->rank - x->rank;        /* best alias first */
	return x->name < y->name ? -1 : x->name > y->name;
}

int pt_symtab_finish(struct pt_symtab *st)
{
	size_t w = 0;

	if (!st->n)
		return 0;
	qsort(st->v, st->n, sizeof(*st->v), cmp_sym);
	for (size_t r = 0; r < st->n; r++)
		if (!w || st->v[w - 1].addr != st->v[r].addr)
			st->v[w++] = st->v[r];
	st->n = w;
	return 0;
}

const char *pt_symtab_lookup(const struct pt_symtab *st, uint64_t vaddr, uint64_t *start)
{
	size_t lo = 0, hi = st->n;

	/* Last symbol starting at or below vaddr; then walk back a little in
	 * case an enclosing symbol (a function with a nested cold part listed
	 * separately) holds the address. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (st->v[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, k = 0; i > 0 && k < 4; i--, k++) {
		const struct pt_sym *s = &st->v[i - 1];

		/* A symbol without a size (assembly like __restore_rt) names
		 * its exact address only. */
		if (vaddr - s->addr < s->size || (!s->size && vaddr == s->addr)) {
			if (start)
				*start = s->addr;
			return st->names + s->name;
		}
	}
	return NULL;
}

void pt_symtab_free(struct pt_symtab *st)
{
	base_free(st->v);
	base_free(st->names);
	memset(st, 0, sizeof(*st));
}
