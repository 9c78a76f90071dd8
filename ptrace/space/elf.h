/* ELF reading for symbols and build IDs. Every offset and size in the image is
 * untrusted (the target controls its files and memory) and is bounds-checked.
 * Any thread; objects are not shared between threads. */
#ifndef PT_ELF_H
#define PT_ELF_H

#include <stddef.h>
#include <stdint.h>

/* A symbol: [addr, addr+size) in the ELF's own virtual addresses. */
struct pt_sym {
	uint64_t addr;
	uint64_t size;
	uint32_t name;     /* offset into pt_symtab.names */
	uint8_t rank;      /* preference among aliases: global > weak > local */
};

struct pt_symtab {
	struct pt_sym *v;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
};

#define PT_ELF_MAX_SYMS (4u << 20)
#define PT_ELF_MAX_NAMES (256u << 20)
#define PT_ELF_MAX_DEBUGDATA (256u << 20)

/* Parses an ELF64 file image (file layout). Returns 0 or -ENOEXEC. */
struct pt_elf {
	const uint8_t *img;
	size_t len;
};
int pt_elf_open(struct pt_elf *e, const void *img, size_t len);

/* A section's place: ELF vaddr, file offset and size, the bytes inside
 * the image. Returns 0, or -ENOENT when there is no such section (or no
 * section headers, or it lies outside the image). */
int pt_elf_section(const struct pt_elf *e, const char *name, uint64_t *addr, uint64_t *off,
		   uint64_t *size);

/* A loadable segment (PT_LOAD) whose file bytes lie inside the image. */
struct pt_elf_seg {
	uint64_t vaddr, off, filesz, memsz;
	uint32_t flags;          /* PF_R | PF_W | PF_X */
};
/* Up to max PT_LOAD segments of the image, in program header order; the
 * file part of each is clipped to the image. Returns how many. */
int pt_elf_segments(const struct pt_elf *e, struct pt_elf_seg *segs, int max);

/* Lowercase hex GNU build-id into hex[0..hexlen), from section headers or
 * PT_NOTE. Returns the number of hex digits, or -ENOENT. */
int pt_elf_build_id(const struct pt_elf *e, char *hex, size_t hexlen);
/* The same, over raw ELF notes (a PT_NOTE segment read from memory). */
int pt_elf_scan_notes(const void *notes, size_t len, char *hex, size_t hexlen);

/* Adds the image's function symbols to `st`: .symtab if present, else
 * .dynsym, plus .symtab inside .gnu_debugdata (MiniDebugInfo) when present.
 * Returns the number of symbols added, -ENOEXEC, -E2BIG or -ENOMEM. */
int pt_elf_add_symbols(const struct pt_elf *e, struct pt_symtab *st);

/* The defined symbol called `name` (any type: functions and data), from
 * .dynsym, else .symtab: its ELF vaddr and size. Returns 0 or -ENOENT. */
int pt_elf_symbol(const struct pt_elf *e, const char *name, uint64_t *vaddr, uint64_t *size);

/* For an image copied from the target's memory (loaded segments only, no
 * section headers): finds .dynsym through PT_DYNAMIC. `img` holds the bytes
 * from runtime address `rt_base`, which corresponds to ELF vaddr `vaddr_base`.
 * Returns the number of symbols added or a negative errno as above. */
int pt_elf_add_dynamic_symbols(const void *img, size_t len, uint64_t rt_base,
			       uint64_t vaddr_base, struct pt_symtab *st);

/* Sorts, drops duplicates (keeping the best-ranked alias). Call once after
 * the last add. Returns 0 or -ENOMEM. */
int pt_symtab_finish(struct pt_symtab *st);
/* Name of the symbol whose [addr, addr+size) holds `vaddr`, or NULL: a symbol
 * is never stretched past its size (Debian's libc has only .dynsym, and the
 * nearest exported name would be a lie); a symbol of size 0 names its exact
 * address only. *start gets the symbol address. */
const char *pt_symtab_lookup(const struct pt_symtab *st, uint64_t vaddr, uint64_t *start);
void pt_symtab_free(struct pt_symtab *st);

#endif
