/* Go's .gopclntab read in place (see gopclntab.h): the header checked
 * once, then functions, names, files, pc-value programs and the inline tree
 * read straight from the caller's image on each lookup, every offset and
 * walk bounded. Nothing is copied but the handle. Any thread: a table is
 * read-only once set up (the sampler thread sets it up and reads it). */
#include "ptrace/space/gopclntab.h"

#include <errno.h>
#include <string.h>

#include "base/mem.h"
#include "ptrace/core/internal.h"

/* The table as the Go linker writes it (cmd/link/internal/ld/pcln.go; read
 * by runtime/symtab.go). All integers are the target's, here little-endian;
 * "offset" fields of the header count from the header itself.
 *
 *   header   magic u32, pad u8 u8, quantum u8, ptrsize u8, nfunc, nfiles,
 *            [textStart: 1.18+], funcnameOffset, cuOffset, filetabOffset,
 *            pctabOffset, pclnOffset                    (pointer-sized words)
 *   funcnametab  NUL-terminated names, referred to by byte offset
 *   cutab    per compilation unit, u32 offsets into filetab (~0: none),
 *            indexed by a _func's cuOffset plus its pcfile value
 *   filetab  NUL-terminated file names
 *   pctab    pc-value programs: pairs (zigzag value delta, pc delta/quantum)
 *            as unsigned varints, starting at value -1 and the entry PC; a
 *            value delta of 0 after the first pair ends the program
 *   pclntab  functab[nfunc + 1] (1.18+: u32 entry offset from textStart and
 *            u32 _func offset; 1.16: pointer-sized entry PC and offset), the
 *            last entry's PC being the end of the last function; then each
 *            _func record, then its pcdata (u32 pctab offsets) and funcdata
 *            (1.18+: u32 offsets from go:func.*, ~0 for none; 1.16:
 *            pointer-aligned absolute addresses, 0 for none)
 *
 *   _func    1.16: entry u64, nameoff i32, args i32, deferreturn u32, pcsp,
 *            pcfile, pcln, npcdata, cuOffset u32, funcID u8, flag u8 (1.17),
 *            pad u8, nfuncdata u8                                  44 bytes
 *            1.18: entryoff u32 instead of entry                   40 bytes
 *            1.20: startLine i32 after cuOffset                    44 bytes
 *   inlinedCall  1.16-1.19: parent i16, funcID u8, pad, file i32, line i32,
 *            nameoff i32, parentPc i32                             20 bytes
 *            1.20: funcID u8, pad[3], nameoff i32, parentPc i32,
 *            startLine i32                                         16 bytes */

#define MAGIC_116 0xfffffffau
#define MAGIC_118 0xfffffff0u
#define MAGIC_120 0xfffffff1u

#define PCDATA_INLTREE 2
#define FUNCDATA_INLTREE 3

/* runtime.moduledata: the pcHeader pointer, then six slices (funcnametab
 * first); `text` at word 22 in every layout; go:func.* at word 38 (1.18,
 * 1.19), 40 (1.20 added covctrs/ecovctrs before it) or 43 (1.27 added
 * typedesclen, itaboffset and itabsize). 1.20 on share the table's magic:
 * word 40 is tried, then 43 (in 1.27 word 40 is a small offset, never an
 * address in the table's image). */
#define MD_TEXT_WORD 22
#define MD_GOFUNC_WORD_118 38
#define MD_GOFUNC_WORD_120 40
#define MD_GOFUNC_WORD_127 43

struct pt_gotab {
	const uint8_t *img;
	size_t len;
	uint64_t vaddr;
	size_t tab;              /* header, from img */
	int ver;                 /* 116, 118, 120 */
	uint32_t quantum;
	uint32_t nfunc;
	uint64_t text;           /* vaddr functab entry offsets count from (1.18+) */
	uint64_t hdr_funcname;   /* the header's funcnameOffset, for moduledata */
	/* regions, as [start, end) offsets from img */
	size_t names, names_end;
	size_t cutab, cutab_end, filetab, filetab_end;
	size_t pctab, pctab_end;
	size_t pcln, pcln_end;
	size_t func_size, inl_size, inl_name, inl_parentpc, inl_start;   /* inl_start 0: none */
	uint64_t lo, hi;         /* code covered */
	uint64_t gofunc;         /* vaddr of go:func.* (1.18+), 0: unknown */
	int inline_ok;
};

/* [off, off + n) lies inside [0, end). */
static int fits(size_t end, uint64_t off, uint64_t n)
{
	return off <= end && n <= end - off;
}

static int header_version(uint32_t magic)
{
	switch (magic) {
	case MAGIC_116: return 116;
	case MAGIC_118: return 118;
	case MAGIC_120: return 120;
	default: return 0;
	}
}

/* Checks the header at img[tab..tab_end) and fills g's layout. */
static int parse_header(struct pt_gotab *g, size_t tab, size_t tab_end, uint64_t text_vaddr)
{
	const uint8_t *h = g->img + tab;
	uint64_t w[8], off[5];
	size_t nw, tablen = tab_end - tab;
	int ver;

	if (!fits(tab_end, tab, 8))
		return -ENOEXEC;
	ver = header_version(pt__rd32(h));
	if (!ver || h[4] || h[5] || (h[6] != 1 && h[6] != 2 && h[6] != 4) || h[7] != 8)
		return -ENOEXEC;
	nw = ver >= 118 ? 8 : 7;
	if (!fits(tab_end, tab + 8, nw * 8))
		return -ENOEXEC;
	for (size_t i = 0; i < nw; i++)
		w[i] = pt__rd64(h + 8 + 8 * i);
	g->ver = ver;
	g->quantum = h[6];
	if (w[0] == 0 || w[0] > PT_GOTAB_MAX_FUNCS)
		return -EBADMSG;
	g->nfunc = (uint32_t)w[0];
	if (ver >= 118) {
		g->text = w[2] ? w[2] : text_vaddr;
		if (!g->text)
			return -EBADMSG;
		memcpy(off, &w[3], sizeof(off));
	} else {
		memcpy(off, &w[2], sizeof(off));
	}
	/* funcname < cu < filetab < pctab < pcln, all inside the table. */
	for (int i = 0; i < 5; i++)
		if (off[i] < 8 + nw * 8 || off[i] >= tablen || (i && off[i] < off[i - 1]))
			return -EBADMSG;
	g->hdr_funcname = off[0];
	g->names = tab + off[0];
	g->names_end = tab + off[1];
	g->cutab = tab + off[1];
	g->cutab_end = tab + off[2];
	g->filetab = tab + off[2];
	g->filetab_end = tab + off[3];
	g->pctab = tab + off[3];
	g->pctab_end = tab + off[4];
	g->pcln = tab + off[4];
	g->pcln_end = tab_end;
	g->func_size = ver == 118 ? 40 : 44;
	g->inl_size = ver >= 120 ? 16 : 20;
	g->inl_name = ver >= 120 ? 4 : 12;
	g->inl_parentpc = ver >= 120 ? 8 : 16;
	g->inl_start = ver >= 120 ? 12 : 0;
	return 0;
}

/* functab entry i: its code's address and its _func's offset from pcln. */
static void ftab_entry(const struct pt_gotab *g, uint32_t i, uint64_t *pc, uint64_t *funcoff)
{
	if (g->ver >= 118) {
		const uint8_t *e = g->img + g->pcln + (size_t)i * 8;

		*pc = g->text + pt__rd32(e);
		*funcoff = pt__rd32(e + 4);
	} else {
		const uint8_t *e = g->img + g->pcln + (size_t)i * 16;

		*pc = pt__rd64(e);
		*funcoff = pt__rd64(e + 8);
	}
}

int pt_gotab_new(struct pt_gotab **out, const uint8_t *img, size_t len, uint64_t vaddr,
		 size_t tab, size_t tab_len, uint64_t text_vaddr)
{
	struct pt_gotab *g;
	uint64_t first, last, dummy;
	size_t tab_end;
	int err;

	*out = NULL;
	if (tab > len || (tab & 7))
		return -ENOEXEC;
	tab_end = tab_len <= len - tab ? tab + tab_len : len;
	if (!(g = base_calloc(1, sizeof(*g))))
		return -ENOMEM;
	g->img = img;
	g->len = len;
	g->vaddr = vaddr;
	g->tab = tab;
	if ((err = parse_header(g, tab, tab_end, text_vaddr)))
		goto out_free;
	err = -EBADMSG;
	if (!fits(g->pcln_end, g->pcln, ((uint64_t)g->nfunc + 1) * (g->ver >= 118 ? 8 : 16)))
		goto out_free;
	ftab_entry(g, 0, &first, &dummy);
	ftab_entry(g, g->nfunc, &last, &dummy);
	if (last <= first)
		goto out_free;
	g->lo = first;
	g->hi = last;
	g->inline_ok = g->ver < 118;   /* 1.18+: once go:func.* is known */
	*out = g;
	return 0;
out_free:
	base_free(g);
	return err;
}

void pt_gotab_free(struct pt_gotab *g)
{
	base_free(g);
}

int pt_gotab_version(const struct pt_gotab *g) { return g->ver; }
int pt_gotab_has_inline(const struct pt_gotab *g) { return g->inline_ok; }

void pt_gotab_range(const struct pt_gotab *g, uint64_t *lo, uint64_t *hi)
{
	*lo = g->lo;
	*hi = g->hi;
}

long pt_gotab_scan(const uint8_t *img, size_t len, uint64_t vaddr, uint64_t text_lo,
		   uint64_t text_hi)
{
	for (size_t off = 0; off + 64 <= len; off += 8) {
		struct pt_gotab g = { .img = img, .len = len, .vaddr = vaddr };
		uint32_t m = pt__rd32(img + off);

		if ((m & 0xfffffff0u) != 0xfffffff0u || !header_version(m))
			continue;
		if (parse_header(&g, off, len, 0))
			continue;
		if (g.ver >= 118 && (g.text < text_lo || g.text >= text_hi))
			continue;
		if (!fits(len, g.pcln, ((uint64_t)g.nfunc + 1) * (g.ver >= 118 ? 8 : 16)))
			continue;
		return (long)off;
	}
	return -ENOENT;
}

int pt_gotab_find_gofunc(struct pt_gotab *g, const uint8_t *data, size_t len, uint64_t data_vaddr,
			 uint64_t ptr_bias)
{
	static const size_t words_118[] = { MD_GOFUNC_WORD_118 };
	static const size_t words_120[] = { MD_GOFUNC_WORD_120, MD_GOFUNC_WORD_127 };
	uint64_t tab = g->vaddr + g->tab + ptr_bias, text = g->text + ptr_bias;
	const size_t *words = g->ver >= 120 ? words_120 : words_118;
	size_t nwords = g->ver >= 120 ? 2 : 1;

	if (g->ver < 118)
		return 0;
	if (data_vaddr & 7)
		return -ENOENT;
	for (size_t off = 0; fits(len, off, (MD_TEXT_WORD + 1) * 8); off += 8) {
		const uint8_t *md = data + off;

		if (pt__rd64(md) != tab || pt__rd64(md + 8) != tab + g->hdr_funcname ||
		    pt__rd64(md + MD_TEXT_WORD * 8) != text)
			continue;
		/* go:func.* lies in the image read: before the table up to Go
		 * 1.25, after it inside .gopclntab from 1.26. */
		for (size_t k = 0; k < nwords; k++) {
			uint64_t gofunc;

			if (!fits(len, off, (words[k] + 1) * 8))
				break;
			gofunc = pt__rd64(md + words[k] * 8) - ptr_bias;
			if (gofunc < g->vaddr || gofunc - g->vaddr >= g->len)
				continue;
			g->gofunc = gofunc;
			g->inline_ok = 1;
			return 0;
		}
	}
	return -ENOENT;
}

/* A name at byte `nameoff` of the name table, or NULL. */
static const char *name_at(const struct pt_gotab *g, int64_t nameoff)
{
	const char *s;

	if (nameoff < 0 || (uint64_t)nameoff >= g->names_end - g->names)
		return NULL;
	s = (const char *)g->img + g->names + nameoff;
	if (!*s || !memchr(s, '\0', g->names_end - g->names - (size_t)nameoff))
		return NULL;
	return s;
}

int pt_gotab_lookup(const struct pt_gotab *g, uint64_t pc, struct pt_gofunc *f)
{
	uint32_t lo = 0, hi = g->nfunc;
	uint64_t entry, end, funcoff, dummy;
	const uint8_t *fn;
	size_t at;

	if (pc < g->lo || pc >= g->hi)
		return -ENOENT;
	/* The last entry at or below pc (a lying table is not sorted: then
	 * this finds some entry, checked below like any other). */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		ftab_entry(g, mid, &entry, &dummy);
		if (entry <= pc)
			lo = mid;
		else
			hi = mid;
	}
	ftab_entry(g, lo, &entry, &funcoff);
	ftab_entry(g, lo + 1, &end, &dummy);
	if (pc < entry || pc >= end)
		return -EBADMSG;
	if (funcoff > g->pcln_end - g->pcln || !fits(g->pcln_end, g->pcln + funcoff, g->func_size) ||
	    ((g->pcln + funcoff) & 3) || g->pcln + funcoff > UINT32_MAX)
		return -EBADMSG;
	at = g->pcln + (size_t)funcoff;
	fn = g->img + at;
	/* The record names the same entry as the functab, or it is not its. */
	if (g->ver >= 118 ? g->text + pt__rd32(fn) != entry : pt__rd64(fn) != entry)
		return -EBADMSG;
	fn += g->ver >= 118 ? 4 : 8;   /* nameoff, args, deferreturn, pcsp, ... */
	f->entry = entry;
	f->end = end;
	f->off = (uint32_t)at;
	f->name = name_at(g, (int32_t)pt__rd32(fn));
	f->pcsp = pt__rd32(fn + 12);
	f->pcfile = pt__rd32(fn + 16);
	f->pcln = pt__rd32(fn + 20);
	f->npcdata = pt__rd32(fn + 24);
	f->cuoff = pt__rd32(fn + 28);
	f->start_line = g->ver >= 120 ? (int32_t)pt__rd32(fn + 32) : 0;
	fn = g->img + at + g->func_size - 4;
	f->funcid = fn[0];
	f->flag = fn[1] & 7;   /* 1.16: padding, 0 */
	f->nfuncdata = fn[3];
	/* Its pcdata and funcdata follow it (1.16: the funcdata are pointers,
	 * 8-aligned; funcdata() checks their bounds itself). */
	if (!fits(g->pcln_end, at + g->func_size,
		  (uint64_t)f->npcdata * 4 + (g->ver >= 118 ? (uint64_t)f->nfuncdata * 4 : 0)))
		return -EBADMSG;
	return 0;
}

/* An unsigned varint of at most 32 bits at img[*p..end). */
static int uvarint(const struct pt_gotab *g, size_t *p, size_t end, uint32_t *v)
{
	uint32_t r = 0;

	for (unsigned int shift = 0; shift < 35; shift += 7) {
		uint8_t b;

		if (*p >= end)
			return -EBADMSG;
		b = g->img[(*p)++];
		r |= (uint32_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return *v = r, 0;
	}
	return -EBADMSG;
}

/* The value of pc-value program `off` (of pctab) at pc, in f (Go's
 * pcvalue): the value of the pair whose PC range holds pc. */
static int pcvalue(const struct pt_gotab *g, const struct pt_gofunc *f, uint32_t off, uint64_t pc,
		   int32_t *out)
{
	size_t p, end = g->pctab_end;
	uint64_t at = f->entry, steps = (f->end - f->entry) / g->quantum + 16;
	int32_t val = -1;

	if (!off)
		return -ENOENT;
	if (off >= end - g->pctab)
		return -EBADMSG;
	p = g->pctab + off;
	/* Each pair but the first moves the PC on by at least one instruction
	 * in the tables the linker writes: more pairs than the function has
	 * bytes (with some slack) is a lie, as is a program past the cap. */
	if (steps > PT_GOTAB_MAX_STEPS)
		steps = PT_GOTAB_MAX_STEPS;
	for (uint32_t step = 0; step < steps; step++) {
		uint32_t dv, dpc;

		if (uvarint(g, &p, end, &dv))
			return -EBADMSG;
		if (dv == 0 && step)
			return -ENOENT;            /* the program ended before pc */
		if (uvarint(g, &p, end, &dpc))
			return -EBADMSG;
		/* Go adds in int32 and wraps: so do we, without overflow. */
		val = (int32_t)((uint32_t)val + ((dv >> 1) ^ (0u - (dv & 1))));
		at += (uint64_t)dpc * g->quantum;
		if (pc < at)
			return *out = val, 0;
		if (at >= f->end)
			return -ENOENT;
	}
	return -E2BIG;
}

int pt_gotab_find(const struct pt_gotab *g, const char *name, struct pt_gofunc *f)
{
	uint64_t entry, funcoff;

	for (uint32_t i = 0; i < g->nfunc; i++) {
		const char *n;
		size_t at;

		ftab_entry(g, i, &entry, &funcoff);
		if (funcoff > g->pcln_end - g->pcln || !fits(g->pcln_end, g->pcln + funcoff, g->func_size))
			continue;
		at = g->pcln + (size_t)funcoff + (g->ver >= 118 ? 4 : 8);
		n = name_at(g, (int32_t)pt__rd32(g->img + at));
		if (n && !strcmp(n, name))
			return pt_gotab_lookup(g, entry, f);
	}
	return -ENOENT;
}

int pt_gotab_spdelta(const struct pt_gotab *g, const struct pt_gofunc *f, uint64_t pc,
		     int32_t *delta)
{
	if (pc < f->entry || pc >= f->end)
		return -ENOENT;
	return pcvalue(g, f, f->pcsp, pc, delta);
}

/* f's pcdata table i, or 0. */
static uint32_t pcdata_off(const struct pt_gotab *g, const struct pt_gofunc *f, uint32_t i)
{
	return i < f->npcdata ? pt__rd32(g->img + f->off + g->func_size + 4 * i) : 0;
}

/* The vaddr of f's funcdata i, or 0. */
static uint64_t funcdata(const struct pt_gotab *g, const struct pt_gofunc *f, uint32_t i)
{
	size_t p = f->off + g->func_size + 4 * (size_t)f->npcdata;
	uint32_t o;

	if (i >= f->nfuncdata)
		return 0;
	if (g->ver < 118) {
		/* Pointer-aligned in memory (the table itself is 8-aligned). */
		if ((g->vaddr + p) & 4)
			p += 4;
		if (!fits(g->pcln_end, p, 8 * (uint64_t)(i + 1)))
			return 0;
		return pt__rd64(g->img + p + 8 * i);
	}
	o = pt__rd32(g->img + p + 4 * i);
	return o == UINT32_MAX || !g->gofunc ? 0 : g->gofunc + o;
}

/* The inline tree at pc in f: out[k] names the function inlined at level k
 * (innermost first) and its first line (Go 1.20+, else 0); pcs[k] is the PC
 * whose line is out[k]'s (pc, then each call site), pcs[n] f's own.
 * Returns n. */
static int inline_walk(const struct pt_gotab *g, const struct pt_gofunc *f, uint64_t pc,
		       struct pt_goline *out, uint64_t *pcs, int max)
{
	uint32_t prog;
	uint64_t tree;
	int n = 0;

	pcs[0] = pc;
	if (!g->inline_ok || pc < f->entry || pc >= f->end)
		return 0;
	prog = pcdata_off(g, f, PCDATA_INLTREE);
	tree = funcdata(g, f, FUNCDATA_INLTREE);
	if (!prog || tree < g->vaddr || tree - g->vaddr >= g->len)
		return 0;
	if (max > PT_GOTAB_MAX_INLINE)
		max = PT_GOTAB_MAX_INLINE;
	/* Each entry of the tree names the function inlined at this PC and a
	 * PC of the call site, whose own index says what that call was
	 * inlined into: -1 when it is f's own code. Every layout has the
	 * parent PC, so one walk serves all. */
	while (n < max) {
		int32_t ix;
		uint64_t at;
		uint32_t ppc;
		const char *name;

		if (pcvalue(g, f, prog, pc, &ix) || ix < 0)
			break;
		at = tree - g->vaddr + (uint64_t)ix * g->inl_size;
		if (!fits(g->len, at, g->inl_size))
			break;
		name = name_at(g, (int32_t)pt__rd32(g->img + at + g->inl_name));
		ppc = pt__rd32(g->img + at + g->inl_parentpc);
		if (!name || ppc >= f->end - f->entry)
			break;
		out[n].name = name;
		out[n].start = g->inl_start ? (int32_t)pt__rd32(g->img + at + g->inl_start) : 0;
		pc = f->entry + ppc;
		pcs[++n] = pc;
	}
	return n;
}

/* The file and line of pc in f (Go's funcline1), or -1 and NULL. */
static int32_t line_at(const struct pt_gotab *g, const struct pt_gofunc *f, uint64_t pc,
		       const char **file)
{
	int32_t fileno, line;
	uint64_t at;
	uint32_t off;

	*file = NULL;
	if (pcvalue(g, f, f->pcfile, pc, &fileno) || fileno < 0 ||
	    pcvalue(g, f, f->pcln, pc, &line) || line < 0)
		return -1;
	at = g->cutab + 4 * ((uint64_t)f->cuoff + (uint32_t)fileno);
	if (!fits(g->cutab_end, at, 4) || (off = pt__rd32(g->img + at)) == UINT32_MAX ||
	    off >= g->filetab_end - g->filetab)
		return -1;
	*file = (const char *)g->img + g->filetab + off;
	if (!**file || !memchr(*file, '\0', g->filetab_end - g->filetab - off)) {
		*file = NULL;
		return -1;
	}
	return line;
}

int pt_gotab_frames(const struct pt_gotab *g, const struct pt_gofunc *f, uint64_t pc,
		    struct pt_goline *out, int max)
{
	uint64_t pcs[PT_GOTAB_MAX_INLINE + 1];
	int n;

	if (max <= 0 || !f->name || pc < f->entry || pc >= f->end)
		return 0;
	n = inline_walk(g, f, pc, out, pcs, max - 1);
	out[n].name = f->name;
	out[n].start = f->start_line;
	for (int k = 0; k <= n; k++) {
		struct pt_goline *o = &out[k];

		o->entry = f->entry;
		o->line = line_at(g, f, pcs[k], &o->file);
		if (o->line < 0)
			o->line = 0;
	}
	return n + 1;
}
