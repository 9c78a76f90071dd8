/* Go's own symbol table, .gopclntab: the functions of a Go module (entry
 * PCs, names, present even in stripped binaries), the SP delta at each PC
 * (the pcsp table Go's own traceback unwinds with) and the inline tree (which
 * functions the compiler inlined at a PC). Layouts of Go 1.16 and 1.17 (magic
 * 0xfffffffa), 1.18 and 1.19 (0xfffffff0), 1.20 and later (0xfffffff1),
 * 64-bit little-endian only.
 *
 * The parser reads a byte image the caller owns (a file mapping or a copy of
 * target memory) and trusts none of it: every offset, count and varint is
 * bounds-checked, every table walk is bounded, and a table that lies gives
 * an error or a wrong answer for that lookup, never a read outside the image
 * or a loop. Addresses here are the ELF's own virtual addresses (subtract
 * the module's load bias from a runtime address first).
 *
 * Any thread; a table is read-only after pt_gotab_new() (and
 * pt_gotab_find_gofunc()), so lookups may run concurrently. */
#ifndef PT_GOPCLNTAB_H
#define PT_GOPCLNTAB_H

#include <stddef.h>
#include <stdint.h>

struct pt_gotab;

/* One function of the table, as pt_gotab_lookup() finds it. The fields are
 * copies; name points into the caller's image. */
struct pt_gofunc {
	uint64_t entry, end;     /* [entry, end): its code */
	const char *name;        /* "main.work"; NULL if the table's name is unusable */
	uint32_t off;            /* its _func record, from the start of the image */
	uint32_t pcsp;           /* its pcsp table, an offset into pctab (0: none) */
	uint32_t pcfile, pcln;   /* its file-number and line tables, likewise */
	uint32_t cuoff;          /* its compilation unit's first entry in cutab */
	int32_t start_line;      /* the line of its func keyword (Go 1.20+), or 0 */
	uint32_t npcdata;
	uint8_t nfuncdata;
	uint8_t funcid;          /* Go's funcID: version-dependent, informative only */
	uint8_t flag;            /* PT_GOFUNC_* (Go 1.17+; 0 before) */
};

/* Go's funcFlag bits (runtime/symtab.go), the same since Go 1.17. */
#define PT_GOFUNC_TOPFRAME 0x01u  /* the top of a stack: goexit, mstart, rt0_go, sigtramp */
#define PT_GOFUNC_SPWRITE  0x02u  /* writes SP in ways pcsp does not record */
#define PT_GOFUNC_ASM      0x04u

/* Caps on what one lookup may cost, whatever the table says. */
#define PT_GOTAB_MAX_FUNCS   (16u << 20)   /* functions in one table */
#define PT_GOTAB_MAX_STEPS   65536u        /* pc-value pairs decoded per lookup */
#define PT_GOTAB_MAX_INLINE  32            /* inlined calls nested at one PC */

/* Parses the table whose header (the magic) is at byte `tab` of the image
 * img[0..len), which holds the ELF virtual addresses [vaddr, vaddr + len):
 * the table and, for inline trees, the go:func.* data before it (pass the
 * whole read-only segment). tab_len bounds the table (its section's size;
 * len - tab if unknown). text_vaddr is where the module's Go code starts in
 * case the header's text base is 0 (a position-independent binary whose
 * relocations were not applied in this image); 0 if unknown.
 * Returns 0, -ENOEXEC (not a table of a supported layout), -EBADMSG (a
 * header that contradicts itself) or -ENOMEM. The image must outlive the
 * table. */
int pt_gotab_new(struct pt_gotab **out, const uint8_t *img, size_t len, uint64_t vaddr,
		 size_t tab, size_t tab_len, uint64_t text_vaddr);
/* NULL-safe. The image is the caller's. */
void pt_gotab_free(struct pt_gotab *g);

/* Finds a table by its magic in img[0..len) (vaddr as above) when the ELF
 * has no .gopclntab section header: the first 8-aligned header whose fields
 * are sane and whose text base lies in [text_lo, text_hi) (for the layouts
 * that record one). Returns its offset, or -ENOENT. */
long pt_gotab_scan(const uint8_t *img, size_t len, uint64_t vaddr, uint64_t text_lo,
		   uint64_t text_hi);

/* Go 1.18 and later find a function's inline tree relative to go:func.*,
 * whose address only the module's runtime.moduledata records. Looks for it
 * in data[0..len) (the module's initialized data, ELF vaddr data_vaddr, its
 * pointers being ELF vaddrs + ptr_bias: 0 in a file, the load bias in
 * memory): the 8-aligned word that points at the table, followed by the
 * function name table's slice, and checked against the text base. Returns
 * 0 (inline trees are usable), -ENOENT, or 0 at once for layouts that need
 * no moduledata (1.16, 1.17). */
int pt_gotab_find_gofunc(struct pt_gotab *g, const uint8_t *data, size_t len, uint64_t data_vaddr,
			 uint64_t ptr_bias);

/* Layout version: 116, 118 or 120 (the Go release that introduced it). */
int pt_gotab_version(const struct pt_gotab *g);
/* [lo, hi): the code the table describes. */
void pt_gotab_range(const struct pt_gotab *g, uint64_t *lo, uint64_t *hi);
/* Whether inline trees can be read (pt_gotab_find_gofunc succeeded or was
 * not needed). */
int pt_gotab_has_inline(const struct pt_gotab *g);

/* The function whose code holds pc. Returns 0, -ENOENT (no function there)
 * or -EBADMSG (the table contradicts itself there). */
int pt_gotab_lookup(const struct pt_gotab *g, uint64_t pc, struct pt_gofunc *f);
/* The function named `name` (the table's own spelling, "runtime.allgadd"),
 * found by walking every function: for a reader that looks a few up once,
 * not per sample. Returns 0, -ENOENT or -EBADMSG. */
int pt_gotab_find(const struct pt_gotab *g, const char *name, struct pt_gofunc *f);
/* The SP delta at pc in f: how far SP is below its value at f's entry (the
 * return address is at SP + delta). Returns 0, -ENOENT (no entry covers pc),
 * -EBADMSG or -E2BIG (a table longer than PT_GOTAB_MAX_STEPS). */
int pt_gotab_spdelta(const struct pt_gotab *g, const struct pt_gofunc *f, uint64_t pc,
		     int32_t *delta);
/* One frame of Go's traceback at a PC: a function (inlined there, or the
 * one holding the code), its source file and the line of the PC in it (for
 * a function that others were inlined into, the line of that call), and its
 * first line (Go 1.20+). file is NULL and line 0 where the table has none.
 * Strings point into the image. */
struct pt_goline {
	const char *name, *file;
	int32_t line, start;
	uint64_t entry;          /* the entry of the function holding the code (the
				  * outermost's for inlined frames): a traceback's
				  * "+0x" counts from it */
};
/* The frames at pc in f, innermost first, f's own last, as Go's traceback
 * and its profiles give them (pcfile and pcln at pc, then at each inlined
 * call's site). Returns how many (1 + the inlined ones, at most max), 0 if
 * f has no name. */
int pt_gotab_frames(const struct pt_gotab *g, const struct pt_gofunc *f, uint64_t pc,
		    struct pt_goline *out, int max);

#endif
