/* The agent's fast stack walk (see unwind.h).
 *
 * GCC's unwinder costs ~130 ns a frame: for each one it finds the object,
 * searches its FDE table, parses the CIE and runs the CFA program, for
 * every register. A sample's stack is mostly frames seen before, and on
 * x86-64 the rule of nearly every frame is three numbers: the CFA is rsp
 * or rbp plus n, the return address lies at CFA + r (-8), and the caller's
 * rbp at CFA + b or is still in rbp. Those are cached per return address;
 * a hit costs a few loads.
 *
 * The cache. A fixed table of slots (direct-mapped by the return
 * address's hash), each under a sequence count: a writer makes it odd,
 * writes, makes it even again; a reader that saw it change, or odd, takes
 * it for a miss. No thread ever waits: a writer that finds a slot being
 * written leaves it. An object unloaded and another loaded at the same
 * address would leave the old rules in the table: the agent's dlclose
 * (hooks.c, ppa_unwind_dlclose) counts the dlcloses under way, and after
 * glibc's, if the loader's count of unloaded objects moved, one more
 * unload. Each slot keeps the unloads counted when its rule was read;
 * while a dlclose is under way every lookup is a miss and no rule is
 * kept, and after it a rule read before it is a miss. The same code at
 * the call (two builds of one function with frames of other sizes) cannot
 * fool that. Each slot also keeps the eight bytes of code that hold the
 * call's last byte, compared at each hit: code replaced with no dlclose
 * the agent saw (glibc's own unloading of its modules, a dlclose reached
 * through dlvsym at GLIBC_2.34) is told apart by them where those bytes
 * differ (the read is safe: a return address met on a walk whose rules
 * were right is code that will run again).
 *
 * A miss reads the rule from the object's .eh_frame: GCC's unwinder's
 * _Unwind_Find_FDE (linked into the agent, finding objects through
 * agent/findobj.c) gives the FDE, and the CIE's and FDE's programs are run
 * up to the call, tracking only the CFA, rbp and the return address.
 * Anything outside the simple rule (an expression, another register, a
 * signal frame, a state stack deeper than we keep) is cached as complex,
 * and a walk that meets it gives up: GCC's unwinder then walks the whole
 * stack, as it did before this cache. No FDE ends the walk, as it ends
 * GCC's. */
#include "agent/unwind.h"

#include "agent/findobj.h"

#include <stddef.h>
#include <string.h>

#if defined(__x86_64__)

/* libgcc's lookup of the FDE covering pc (unwind-dw2-fde.h): the FDE, and
 * the bases its pointer encodings are relative to (func: the function's
 * first address). */
struct dwarf_eh_bases {
	void *tbase;
	void *dbase;
	void *func;
};
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

#define REG_RBP 6
#define REG_RSP 7
#define SLOTS 4096u                     /* 128 KiB of .bss, touched as used */
#define STATES 8                        /* DW_CFA_remember_state depth kept */
#define MAX_FRAME (64ull << 20)         /* a CFA further up ends the walk */

enum { K_EMPTY, K_FRAME, K_END, K_COMPLEX };

/* A rule, packed in one word for the slot. */
struct rule {
	int32_t cfa_off;
	int16_t ra_off;
	int8_t bp_off8;                 /* caller's rbp at CFA + 8 * this; 0: rbp unchanged */
	uint8_t kind : 2, on_rbp : 1;
};
_Static_assert(sizeof(struct rule) == 8, "a rule is one word");

struct slot {
	uint32_t seq;                   /* odd: being written */
	uint32_t unloads;               /* `unloads` when its rule was read */
	uint64_t key;                   /* the return address; 0: empty */
	uint64_t code;                  /* the aligned word holding the call's last byte */
	uint64_t rule;
};

_Static_assert(sizeof(struct slot) == 32, "two slots a cache line");

static struct slot cache[SLOTS] __attribute__((aligned(64)));
static struct ppa_unwind_stats stats;
/* On a line of their own (every hit reads them; the stats are written). */
static struct {
	uint32_t unloads;       /* dlcloses that unloaded something: a rule read
				 * at another count may be an unloaded object's
				 * (32 bits: a slot untouched through 2^32 such
				 * dlcloses could be taken for current again) */
	uint32_t closing;       /* dlcloses under way: every lookup a miss */
	char pad[56];
} U __attribute__((aligned(64)));

static uint64_t rule_word(struct rule r)
{
	uint64_t w;

	memcpy(&w, &r, sizeof(w));
	return w;
}

static struct rule word_rule(uint64_t w)
{
	struct rule r;

	memcpy(&r, &w, sizeof(r));
	return r;
}

static struct slot *slot_of(uint64_t key)
{
	return &cache[(key * 0x9e3779b97f4a7c15ull) >> 52];
}

static uint64_t code_at(uint64_t ra)
{
	return *(const uint64_t *)(uintptr_t)((ra - 1) & ~7ull);
}

/* The cached rule of ra, checked against the code there; 0 on a miss. */
static int cache_get(uint64_t ra, struct rule *r)
{
	struct slot *s = slot_of(ra);
	uint32_t now, q, u;
	uint64_t key, code, w;

	if (__atomic_load_n(&U.closing, __ATOMIC_ACQUIRE))
		return 0;
	now = __atomic_load_n(&U.unloads, __ATOMIC_ACQUIRE);
	q = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
	if (q & 1)
		return 0;
	u = __atomic_load_n(&s->unloads, __ATOMIC_RELAXED);
	key = __atomic_load_n(&s->key, __ATOMIC_RELAXED);
	code = __atomic_load_n(&s->code, __ATOMIC_RELAXED);
	w = __atomic_load_n(&s->rule, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) != q || key != ra)
		return 0;
	if (u != now) {
		__atomic_fetch_add(&stats.unloaded, 1, __ATOMIC_RELAXED);
		return 0;
	}
	if (code != code_at(ra)) {
		__atomic_fetch_add(&stats.stale, 1, __ATOMIC_RELAXED);
		return 0;
	}
	*r = word_rule(w);
	return 1;
}

/* at: `unloads` before the rule was read. */
static void cache_put(uint64_t ra, struct rule r, uint32_t at)
{
	struct slot *s = slot_of(ra);
	uint32_t q = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);

	if ((q & 1) || !__atomic_compare_exchange_n(&s->seq, &q, q + 1, 0, __ATOMIC_ACQUIRE,
						    __ATOMIC_RELAXED))
		return;   /* another writer has it: this rule waits for the next miss */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&s->unloads, at, __ATOMIC_RELAXED);
	__atomic_store_n(&s->key, ra, __ATOMIC_RELAXED);
	__atomic_store_n(&s->code, code_at(ra), __ATOMIC_RELAXED);
	__atomic_store_n(&s->rule, rule_word(r), __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, q + 2, __ATOMIC_RELEASE);
}

/* ---- reading .eh_frame ---------------------------------------------------- */

struct rd {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t rd_bytes(struct rd *d, size_t n)
{
	uint64_t v = 0;

	if (d->bad || (size_t)(d->end - d->p) < n) {
		d->bad = 1;
		return 0;
	}
	memcpy(&v, d->p, n);            /* little-endian */
	d->p += n;
	return v;
}

static uint64_t rd_uleb(struct rd *d)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		uint8_t b = (uint8_t)rd_bytes(d, 1);

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	d->bad = 1;
	return 0;
}

static int64_t rd_sleb(struct rd *d)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (shift >= 64) {
			d->bad = 1;
			return 0;
		}
		b = (uint8_t)rd_bytes(d, 1);
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~0ull << shift;
	return (int64_t)v;
}

/* A pointer in encoding enc (DW_EH_PE_*), relative to its base; skip: only
 * stepped over. Aligned ones are refused (bad) either way, indirect ones
 * unless skipped: nothing the walk reads uses them (the personality
 * routine's may be indirect, and is skipped). */
static uint64_t rd_enc(struct rd *d, uint8_t enc, const struct dwarf_eh_bases *b, int skip)
{
	const uint8_t *at = d->p;
	uint64_t v, base = 0;

	if (enc == 0xff)
		return 0;
	if ((enc & 0x70) == 0x50) {
		d->bad = 1;
		return 0;
	}
	switch (enc & 0x0f) {
	case 0x00: v = rd_bytes(d, 8); break;
	case 0x01: v = rd_uleb(d); break;
	case 0x02: v = rd_bytes(d, 2); break;
	case 0x03: v = rd_bytes(d, 4); break;
	case 0x04: v = rd_bytes(d, 8); break;
	case 0x09: v = (uint64_t)rd_sleb(d); break;
	case 0x0a: v = (uint64_t)(int64_t)(int16_t)rd_bytes(d, 2); break;
	case 0x0b: v = (uint64_t)(int64_t)(int32_t)rd_bytes(d, 4); break;
	case 0x0c: v = rd_bytes(d, 8); break;
	default: d->bad = 1; return 0;
	}
	if (skip)
		return 0;
	switch (enc & 0x70) {
	case 0x00: break;
	case 0x10: base = (uint64_t)(uintptr_t)at; break;
	case 0x20: base = (uint64_t)(uintptr_t)b->tbase; break;
	case 0x30: base = (uint64_t)(uintptr_t)b->dbase; break;
	case 0x40: base = (uint64_t)(uintptr_t)b->func; break;
	default: d->bad = 1; return 0;
	}
	if (enc & 0x80)
		d->bad = 1;
	return v + base;
}

enum { R_SAME, R_OFFSET, R_UNDEF, R_OTHER };

struct reg {
	uint8_t how;
	int64_t off;
};

struct cfa_state {
	uint64_t cfa_reg;
	int64_t cfa_off;
	int cfa_expr;
	int sp_rule;            /* a rule for rsp itself: not a simple frame */
	struct reg bp, ra;
};

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	int signal, z;
	struct rd insns;
};

static int cie_read(const uint8_t *c, struct cie *out)
{
	struct rd d = { c, c + 8, 0 };
	uint32_t len = (uint32_t)rd_bytes(&d, 4);
	const char *aug;
	uint8_t version;

	if (!len || len == 0xffffffffu)
		return -1;
	d.end = c + 4 + len;
	if (rd_bytes(&d, 4) != 0)
		return -1;   /* not a CIE */
	version = (uint8_t)rd_bytes(&d, 1);
	if (version != 1 && version != 3)
		return -1;
	aug = (const char *)d.p;
	while (d.p < d.end && *d.p)
		d.p++;
	if (d.p++ >= d.end)
		return -1;
	memset(out, 0, sizeof(*out));
	out->code_align = rd_uleb(&d);
	out->data_align = rd_sleb(&d);
	out->ra_reg = version == 1 ? rd_bytes(&d, 1) : rd_uleb(&d);
	if (aug[0] == 'z') {
		uint64_t n = rd_uleb(&d);
		struct rd a = { d.p, d.p + n, 0 };

		if (d.bad || n > (uint64_t)(d.end - d.p))
			return -1;
		for (const char *s = aug + 1; *s && !a.bad; s++) {
			if (*s == 'R')
				out->fde_enc = (uint8_t)rd_bytes(&a, 1);
			else if (*s == 'L')
				rd_bytes(&a, 1);
			else if (*s == 'P')
				rd_enc(&a, (uint8_t)rd_bytes(&a, 1), NULL, 1);
			else if (*s == 'S')
				out->signal = 1;
			else if (*s != 'B')
				break;   /* unknown: the length lets us skip the rest */
		}
		out->z = 1;
		d.p += n;
	} else if (aug[0]) {
		return -1;
	}
	if (d.bad)
		return -1;
	out->insns = d;
	return 0;
}

static void reg_set(const struct cie *c, struct cfa_state *st, uint64_t reg, uint8_t how, int64_t off)
{
	struct reg *r = reg == REG_RBP ? &st->bp : reg == c->ra_reg ? &st->ra : NULL;

	if (reg == REG_RSP)
		st->sp_rule = 1;   /* the caller's rsp is the CFA, unless a rule says otherwise */
	if (r) {
		r->how = how;
		r->off = off;
	}
}

/* DW_CFA_restore: reg's rule as the CIE left it. */
static void reg_restore(const struct cie *c, struct cfa_state *st, const struct cfa_state *init,
			uint64_t reg)
{
	if (reg == REG_RBP)
		st->bp = init->bp;
	else if (reg == c->ra_reg)
		st->ra = init->ra;
}

/* Steps over a DWARF expression (its length first). */
static void skip_block(struct rd *d)
{
	uint64_t n = rd_uleb(d);

	if (!d->bad && n > (uint64_t)(d->end - d->p))
		d->bad = 1;
	if (!d->bad)
		d->p += n;
}

/* Runs a CFA program while its location is at most pc (init: the CIE's
 * state, for DW_CFA_restore). 0, or -1 on what we do not follow. */
static int run(const struct cie *c, struct rd d, uint64_t loc, uint64_t pc,
	       const struct dwarf_eh_bases *b, struct cfa_state *st, const struct cfa_state *init)
{
	struct cfa_state saved[STATES];
	unsigned depth = 0;

	while (d.p < d.end && !d.bad) {
		uint8_t op = (uint8_t)rd_bytes(&d, 1);
		uint64_t reg, delta = 0;

		switch (op >> 6) {
		case 1:
			delta = op & 0x3f;
			goto advance;
		case 2:
			reg_set(c, st, op & 0x3f, R_OFFSET, (int64_t)rd_uleb(&d) * c->data_align);
			continue;
		case 3:
			reg_restore(c, st, init, op & 0x3f);
			continue;
		}
		switch (op) {
		case 0x00:   /* nop */
			break;
		case 0x01:   /* set_loc */
			loc = rd_enc(&d, c->fde_enc, b, 0);
			if (loc > pc)
				return 0;
			break;
		case 0x02: delta = rd_bytes(&d, 1); goto advance;
		case 0x03: delta = rd_bytes(&d, 2); goto advance;
		case 0x04: delta = rd_bytes(&d, 4); goto advance;
		case 0x05:   /* offset_extended */
			reg = rd_uleb(&d);
			reg_set(c, st, reg, R_OFFSET, (int64_t)rd_uleb(&d) * c->data_align);
			break;
		case 0x06:   /* restore_extended */
			reg_restore(c, st, init, rd_uleb(&d));
			break;
		case 0x07:   /* undefined */
			reg_set(c, st, rd_uleb(&d), R_UNDEF, 0);
			break;
		case 0x08:   /* same_value */
			reg_set(c, st, rd_uleb(&d), R_SAME, 0);
			break;
		case 0x09:   /* register */
			reg = rd_uleb(&d);
			rd_uleb(&d);
			reg_set(c, st, reg, R_OTHER, 0);
			break;
		case 0x0a:   /* remember_state */
			if (depth == STATES)
				return -1;
			saved[depth++] = *st;
			break;
		case 0x0b:   /* restore_state */
			if (!depth)
				return -1;
			*st = saved[--depth];
			break;
		case 0x0c:   /* def_cfa */
			st->cfa_reg = rd_uleb(&d);
			st->cfa_off = (int64_t)rd_uleb(&d);
			st->cfa_expr = 0;
			break;
		case 0x0d:   /* def_cfa_register */
			st->cfa_reg = rd_uleb(&d);
			st->cfa_expr = 0;
			break;
		case 0x0e:   /* def_cfa_offset */
			st->cfa_off = (int64_t)rd_uleb(&d);
			break;
		case 0x0f:   /* def_cfa_expression */
			skip_block(&d);
			st->cfa_expr = 1;
			break;
		case 0x10:   /* expression */
		case 0x16:   /* val_expression */
			reg = rd_uleb(&d);
			skip_block(&d);
			reg_set(c, st, reg, R_OTHER, 0);
			break;
		case 0x11:   /* offset_extended_sf */
			reg = rd_uleb(&d);
			reg_set(c, st, reg, R_OFFSET, rd_sleb(&d) * c->data_align);
			break;
		case 0x12:   /* def_cfa_sf */
			st->cfa_reg = rd_uleb(&d);
			st->cfa_off = rd_sleb(&d) * c->data_align;
			st->cfa_expr = 0;
			break;
		case 0x13:   /* def_cfa_offset_sf */
			st->cfa_off = rd_sleb(&d) * c->data_align;
			break;
		case 0x14:   /* val_offset */
			reg = rd_uleb(&d);
			rd_uleb(&d);
			reg_set(c, st, reg, R_OTHER, 0);
			break;
		case 0x15:   /* val_offset_sf */
			reg = rd_uleb(&d);
			rd_sleb(&d);
			reg_set(c, st, reg, R_OTHER, 0);
			break;
		case 0x2e:   /* GNU_args_size */
			rd_uleb(&d);
			break;
		case 0x2f:   /* GNU_negative_offset_extended */
			reg = rd_uleb(&d);
			reg_set(c, st, reg, R_OFFSET, -(int64_t)rd_uleb(&d) * c->data_align);
			break;
		default:
			return -1;
		}
		continue;
advance:
		loc += delta * c->code_align;
		if (loc > pc)
			return 0;
	}
	return d.bad ? -1 : 0;
}

/* The rule at return address ra, read from .eh_frame: K_FRAME with *r,
 * K_END (the stack's outermost frame), K_COMPLEX; K_EMPTY when no FDE
 * covers it (nothing to cache). */
static int rule_read(uint64_t ra, struct rule *r)
{
	uint64_t pc = ra - 1;
	struct dwarf_eh_bases b;
	const uint8_t *fde = _Unwind_Find_FDE((void *)(uintptr_t)pc, &b);
	struct cfa_state init = { 0 }, st;
	struct cie c;
	struct rd d;
	uint32_t len;
	int32_t cie_off;

	if (!fde)
		return K_EMPTY;
	__atomic_fetch_add(&stats.misses, 1, __ATOMIC_RELAXED);
	memset(r, 0, sizeof(*r));
	memcpy(&len, fde, 4);
	memcpy(&cie_off, fde + 4, 4);
	if (!len || len == 0xffffffffu || cie_read(fde + 4 - cie_off, &c) < 0 || c.signal)
		return K_COMPLEX;
	d = (struct rd){ fde + 8, fde + 4 + len, 0 };
	rd_enc(&d, c.fde_enc, &b, 1);           /* pc_begin: b.func has it */
	rd_enc(&d, c.fde_enc & 0x0f, &b, 1);    /* pc_range */
	if (c.z) {
		uint64_t n = rd_uleb(&d);

		if (d.bad || n > (uint64_t)(d.end - d.p))
			return K_COMPLEX;
		d.p += n;
	}
	if (d.bad)
		return K_COMPLEX;
	init.bp.how = init.ra.how = R_SAME;
	if (run(&c, c.insns, 0, UINT64_MAX, &b, &init, &init) < 0)
		return K_COMPLEX;
	st = init;
	if (run(&c, d, (uint64_t)(uintptr_t)b.func, pc, &b, &st, &init) < 0)
		return K_COMPLEX;
	if (st.ra.how == R_UNDEF) {
		r->kind = K_END;
		return K_END;
	}
	if (st.cfa_expr || st.sp_rule || (st.cfa_reg != REG_RSP && st.cfa_reg != REG_RBP) ||
	    st.cfa_off < INT32_MIN || st.cfa_off > INT32_MAX ||
	    st.ra.how != R_OFFSET || st.ra.off < INT16_MIN || st.ra.off > INT16_MAX)
		return K_COMPLEX;
	if (st.bp.how == R_OFFSET) {
		if (!st.bp.off || st.bp.off % 8 || st.bp.off / 8 < INT8_MIN || st.bp.off / 8 > INT8_MAX)
			return K_COMPLEX;
		r->bp_off8 = (int8_t)(st.bp.off / 8);
	} else if (st.bp.how != R_SAME) {
		return K_COMPLEX;
	}
	r->cfa_off = (int32_t)st.cfa_off;
	r->ra_off = (int16_t)st.ra.off;
	r->on_rbp = st.cfa_reg == REG_RBP;
	r->kind = K_FRAME;
	return K_FRAME;
}

static int rule_of(uint64_t ra, struct rule *r)
{
	uint32_t closing, at;
	int k;

	if (cache_get(ra, r))
		return r->kind;
	closing = __atomic_load_n(&U.closing, __ATOMIC_ACQUIRE);
	at = __atomic_load_n(&U.unloads, __ATOMIC_ACQUIRE);
	k = rule_read(ra, r);
	if (k == K_EMPTY)
		return K_END;
	if (k == K_COMPLEX) {
		__atomic_fetch_add(&stats.complex, 1, __ATOMIC_RELAXED);
		memset(r, 0, sizeof(*r));
		r->kind = K_COMPLEX;
	}
	if (!closing)
		cache_put(ra, *r, at);
	return k;
}

int ppa_unwind_dlclose(void *handle, int (*real)(void *))
{
	unsigned long long before = ppa_find_object_unloads(), after;
	int rc;

	/* Under way: no hit, no rule kept (the object's destructors may
	 * allocate, the object goes, another may be mapped there before the
	 * count below moves). After: a rule read before is a miss, if an
	 * object went (a handle still open elsewhere unloads nothing). */
	__atomic_fetch_add(&U.closing, 1, __ATOMIC_SEQ_CST);
	rc = real(handle);
	after = ppa_find_object_unloads();
	if (before == PPA_UNLOADS_UNKNOWN || after != before)
		__atomic_fetch_add(&U.unloads, 1, __ATOMIC_SEQ_CST);
	__atomic_fetch_sub(&U.closing, 1, __ATOMIC_SEQ_CST);
	return rc;
}

/* Built with frame pointers (the agent's flags): this function's caller
 * is where the walk starts, from the return address and rbp it saved. */
__attribute__((noinline)) int ppa_unwind(uint64_t *f, uint32_t max, uint64_t skip_lo, uint64_t skip_hi)
{
	const uint64_t *fp = __builtin_frame_address(0);
	uint64_t ip = fp[1], sp = (uint64_t)(uintptr_t)(fp + 2), bp = fp[0];
	uint32_t n = 0;

	while (ip && n < max) {
		struct rule r;
		uint64_t cfa;
		int k = rule_of(ip, &r);

		if (k == K_COMPLEX)
			return -1;
		if (n || ip < skip_lo || ip >= skip_hi)
			f[n++] = ip;
		if (k == K_END)
			break;
		cfa = (r.on_rbp ? bp : sp) + (uint64_t)(int64_t)r.cfa_off;
		if (cfa <= sp || cfa - sp > MAX_FRAME || (cfa & 7))
			return -1;   /* another stack (a fiber's, a signal's)? GCC's unwinder decides */
		ip = *(const uint64_t *)(uintptr_t)(cfa + (uint64_t)(int64_t)r.ra_off);
		if (r.bp_off8)
			bp = *(const uint64_t *)(uintptr_t)(cfa + (uint64_t)(int64_t)r.bp_off8 * 8);
		sp = cfa;
	}
	return (int)n;
}

void ppa_unwind_fork_child(void)
{
	/* A dlclose another thread had under way is not in the child: it may
	 * have unloaded its object, and will not count it. */
	__atomic_store_n(&U.closing, 0, __ATOMIC_RELAXED);
	__atomic_fetch_add(&U.unloads, 1, __ATOMIC_RELEASE);
	/* A slot another thread was writing at the fork stays odd for good in
	 * the child: it is only a miss, but a miss every time. */
	for (unsigned i = 0; i < SLOTS; i++) {
		uint32_t q = __atomic_load_n(&cache[i].seq, __ATOMIC_RELAXED);

		if (q & 1) {
			__atomic_store_n(&cache[i].key, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&cache[i].seq, q + 1, __ATOMIC_RELEASE);
		}
	}
}

void ppa_unwind_stats(struct ppa_unwind_stats *out)
{
	out->misses = __atomic_load_n(&stats.misses, __ATOMIC_RELAXED);
	out->complex = __atomic_load_n(&stats.complex, __ATOMIC_RELAXED);
	out->stale = __atomic_load_n(&stats.stale, __ATOMIC_RELAXED);
	out->unloaded = __atomic_load_n(&stats.unloaded, __ATOMIC_RELAXED);
}

#else

int ppa_unwind(uint64_t *f, uint32_t max, uint64_t skip_lo, uint64_t skip_hi)
{
	(void)f;
	(void)max;
	(void)skip_lo;
	(void)skip_hi;
	return -1;   /* GCC's unwinder walks every stack */
}

int ppa_unwind_dlclose(void *handle, int (*real)(void *))
{
	return real(handle);
}

void ppa_unwind_fork_child(void)
{
}

void ppa_unwind_stats(struct ppa_unwind_stats *out)
{
	memset(out, 0, sizeof(*out));
}

#endif
