/* The unwinder (see unwind.h): libunwind's remote API over accessors that
 * read the capture a stop took, the page cache and each module's
 * .eh_frame_hdr, and Go's own tables (.gopclntab's pcsp) for Go frames,
 * which carry no CFI. Owns the libunwind address space (and its cache of
 * parsed FDEs). Sampler thread only: the captures, the page cache and the
 * address space it reads are the sampler's (STYLE H12). */
#include "ptrace/unwind.h"

#include <errno.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/mem.h"
#include "ptrace/gopclntab.h"
#include "ptrace/mem.h"
#include "ptrace/module.h"
#include "ptrace/proc.h"
#include "ptrace/sigmask_override.h"

/* Exported by libunwind-x86_64 but declared in no public header (1.6.2):
 * binary-searches an .eh_frame_hdr table described by `di` and parses the
 * FDE, reading through the address space's accessors. */
extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
					      unw_dyn_info_t *di, unw_proc_info_t *pi,
					      int need_unwind_info, void *arg);

struct pt_unwinder {
	unw_addr_space_t as;
	struct pt_mem *mem;
	struct pt_modules *mods;
	const struct pt_maps *maps;
	uint64_t miss;           /* an address outside every mapping, 0 if none */
	unsigned int m_curg;     /* Go: offset of m.curg, once found (0: not yet) */
};

/* The most a kernel's stack copy can hold (perf_event's sample_stack_user
 * is 16-bit): reads past a copy further than that cannot size the next. */
#define KERNEL_COPY_MAX 65536u

/* What the accessors see through their `arg`. */
struct ctx {
	struct pt_unwinder *u;
	struct pt_capture *cap;
	/* The registers libunwind starts from: the capture's, or those of the
	 * frame where a walk crossed from Go code into C code. */
	struct user_regs_struct regs;
	size_t used;     /* end of the furthest word of the stack read (from the
			  * copy, or past it from memory: read_beyond) */
	int short_copy;  /* a read fell in the uncopied part of the stack */
};

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
			  int need_unwind_info, void *arg)
{
	struct ctx *c = arg;
	struct pt_module *mod = pt_modules_find(c->u->mods, c->u->maps, ip);
	unw_dyn_info_t di;

	if (!mod && c->u->maps && !c->u->miss && !pt_maps_find(c->u->maps, ip))
		c->u->miss = ip;
	if (!mod || !mod->eh_hdr || ip < mod->text_lo || ip >= mod->text_hi)
		return -UNW_ENOINFO;
	memset(&di, 0, sizeof(di));
	di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di.start_ip = mod->text_lo;
	di.end_ip = mod->text_hi;
	di.u.rti.segbase = mod->eh_hdr;
	di.u.rti.table_data = mod->eh_table;
	/* In unw_word_t units: each table entry is two int32. */
	di.u.rti.table_len = mod->eh_count * 8 / sizeof(unw_word_t);
	return _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	/* libunwind frees the FDE info it parsed from a table itself (its
	 * parser's put_unwind_info for UNW_INFO_FORMAT_TABLE); nothing of ours. */
	(void)as;
	(void)pi;
	(void)arg;
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *addr, void *arg)
{
	(void)as;
	(void)addr;
	(void)arg;
	return -UNW_ENOINFO;
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	struct ctx *c = arg;
	const struct pt_capture *cap = c->cap;
	uint64_t sp = cap->regs.rsp;

	(void)as;
	if (write)
		return -UNW_EINVAL;
	if (addr >= sp && addr - sp + sizeof(*val) <= cap->stack_len) {
		memcpy(val, cap->stack + (addr - sp), sizeof(*val));
		if (addr - sp + sizeof(*val) > c->used)
			c->used = addr - sp + sizeof(*val);
		return 0;
	}
	if (addr >= sp && addr - sp < cap->stack_limit) {
		c->short_copy = 1;
		if (!cap->read_beyond)
			return -UNW_EINVAL;
		/* read from memory after the sample: how much the copy lacked
		 * (as far as a kernel's copy can reach) */
		if (addr - sp + sizeof(*val) > c->used && addr - sp < KERNEL_COPY_MAX)
			c->used = addr - sp + sizeof(*val);
	}
	if (cap->sig_len && addr >= cap->sig_sp) {
		/* The stack a Go signal interrupted, copied in the same stop. */
		if (addr - cap->sig_sp + sizeof(*val) <= cap->sig_len) {
			memcpy(val, cap->sig_stack + (addr - cap->sig_sp), sizeof(*val));
			return 0;
		}
		if (addr - cap->sig_sp < cap->sig_limit)
			return -UNW_EINVAL;
	}
	return pt_mem_read(c->u->mem, addr, val, sizeof(*val)) ? -UNW_EINVAL : 0;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	const struct user_regs_struct *r = &((struct ctx *)arg)->regs;

	(void)as;
	if (write)
		return -UNW_EREADONLYREG;
	switch (reg) {
	case UNW_X86_64_RAX: *val = r->rax; break;
	case UNW_X86_64_RDX: *val = r->rdx; break;
	case UNW_X86_64_RCX: *val = r->rcx; break;
	case UNW_X86_64_RBX: *val = r->rbx; break;
	case UNW_X86_64_RSI: *val = r->rsi; break;
	case UNW_X86_64_RDI: *val = r->rdi; break;
	case UNW_X86_64_RBP: *val = r->rbp; break;
	case UNW_X86_64_RSP: *val = r->rsp; break;
	case UNW_X86_64_R8: *val = r->r8; break;
	case UNW_X86_64_R9: *val = r->r9; break;
	case UNW_X86_64_R10: *val = r->r10; break;
	case UNW_X86_64_R11: *val = r->r11; break;
	case UNW_X86_64_R12: *val = r->r12; break;
	case UNW_X86_64_R13: *val = r->r13; break;
	case UNW_X86_64_R14: *val = r->r14; break;
	case UNW_X86_64_R15: *val = r->r15; break;
	case UNW_X86_64_RIP: *val = r->rip; break;
	default: return -UNW_EBADREG;
	}
	return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg)
{
	(void)as;
	(void)reg;
	(void)val;
	(void)write;
	(void)arg;
	return -UNW_EBADREG;
}

static int resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	(void)as;
	(void)c;
	(void)arg;
	return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len,
			 unw_word_t *off, void *arg)
{
	/* We symbolize ourselves, later, with sizes respected. */
	(void)as;
	(void)addr;
	(void)buf;
	(void)len;
	(void)off;
	(void)arg;
	return -UNW_ENOINFO;
}

static unw_accessors_t accessors = {
	.find_proc_info = find_proc_info,
	.put_unwind_info = put_unwind_info,
	.get_dyn_info_list_addr = get_dyn_info_list_addr,
	.access_mem = access_mem,
	.access_reg = access_reg,
	.access_fpreg = access_fpreg,
	.resume = resume,
	.get_proc_name = get_proc_name,
};

int pt_unwinder_new(struct pt_unwinder **out, struct pt_mem *mem, struct pt_modules *mods)
{
	struct pt_unwinder *u = base_calloc(1, sizeof(*u));

	*out = NULL;
	if (!u)
		return -ENOMEM;
	u->as = unw_create_addr_space(&accessors, 0);
	if (!u->as) {
		base_free(u);
		return -ENOMEM;
	}
	/* Remote address spaces start with caching off: every step would redo
	 * the table search and FDE parse. */
	unw_set_caching_policy(u->as, UNW_CACHE_GLOBAL);
	u->mem = mem;
	u->mods = mods;
	*out = u;
	return 0;
}

void pt_unwinder_free(struct pt_unwinder *u)
{
	if (!u)
		return;
	unw_destroy_addr_space(u->as);
	base_free(u);
}

void pt_unwinder_set_maps(struct pt_unwinder *u, const struct pt_maps *maps)
{
	u->maps = maps;
}

void pt_unwinder_flush(struct pt_unwinder *u)
{
	unw_flush_cache(u->as, 0, 0);
}

static int is_code(struct pt_unwinder *u, uint64_t addr)
{
	const struct pt_map *m = pt_maps_find(u->maps, addr);

	if (!m && !u->miss)
		u->miss = addr;
	return m && (m->flags & PT_MAP_X);
}

uint64_t pt_unwinder_take_miss(struct pt_unwinder *u)
{
	uint64_t a = u->miss;

	u->miss = 0;
	return a;
}

/* Where a walk stands between frames: the frame whose caller is next, as
 * the address it executes (pc: exact for the leaf and for a frame a signal
 * interrupted, else a return address) and its SP and BP. */
struct state {
	uint64_t pc, sp, bp;
	int exact;
};

/* Why a part of the walk (Go or C frames) handed over. */
enum hand {
	HAND_DONE,       /* the walk is over (*complete says how) */
	HAND_GO,         /* the next frame to step from is Go code */
	HAND_C,          /* ... is code libunwind steps (C, assembly with CFI) */
};

/* One word of target memory as access_mem reads it (the stack copy first). */
static int read_word(struct ctx *c, uint64_t addr, uint64_t *val)
{
	unw_word_t w;

	if (access_mem(NULL, addr, &w, 0, c) < 0)
		return -EFAULT;
	*val = w;
	return 0;
}

/* The Go function whose code holds addr, if its module has a Go table.
 * Unless `force`, looks only once some module has one: C programs pay
 * nothing per frame. */
static struct pt_module *go_func(struct pt_unwinder *u, uint64_t addr, int force,
				 struct pt_gofunc *f)
{
	struct pt_module *mod;

	if (!force && !pt_modules_go_count(u->mods))
		return NULL;
	mod = pt_modules_find(u->mods, u->maps, addr);
	if (!mod || !mod->go || addr < mod->go_lo || addr >= mod->go_hi ||
	    pt_gotab_lookup(mod->go, addr - mod->bias, f))
		return NULL;
	return mod;
}

/* Go 1.18 and 1.19's funcID values (cmd/internal/objabi/funcid.go). */
#define GO118_FUNCID_GOPANIC 9
#define GO118_FUNCID_PANICWRAP 14
#define GO118_FUNCID_SIGPANIC 18
#define GO118_FUNCID_WRAPPER 21

/* Go functions the walk treats apart from the pcsp rule, by name (funcID
 * values change between releases; names have not). */
enum gokind {
	GO_PLAIN,
	GO_GOEXIT,       /* the top of every goroutine stack */
	GO_TOP,          /* mstart, rt0_go: the top of a system stack, maybe called by C */
	GO_SIGTRAMP,     /* Go's signal handler entry: returns to the restorer */
	GO_ASMCGOCALL,   /* switched to the system stack to call C */
	GO_CGOCALLBACK,  /* C called Go: switched from the system stack to a goroutine's */
	GO_CGOCALLBACKG, /* what cgocallback calls on the goroutine stack */
	GO_SYSTEMSTACK,  /* switched from a goroutine's stack to the system stack */
	GO_MORESTACK,    /* ditto, to grow the goroutine's stack */
	GO_SPWRITE,      /* writes SP in a way pcsp does not describe: Go stops there */
};

static enum gokind go_kind(const struct pt_gofunc *f)
{
	const char *n = f->name;

	if (n && !strncmp(n, "runtime.", 8)) {
		n += 8;
		if (!strcmp(n, "goexit"))
			return GO_GOEXIT;
		if (!strcmp(n, "mstart") || !strcmp(n, "rt0_go"))
			return GO_TOP;
		if (!strcmp(n, "sigtramp") || !strcmp(n, "cgoSigtramp"))
			return GO_SIGTRAMP;
		if (!strcmp(n, "asmcgocall") || !strcmp(n, "asmcgocall_no_g"))
			return GO_ASMCGOCALL;
		if (!strcmp(n, "cgocallback"))
			return GO_CGOCALLBACK;
		if (!strcmp(n, "cgocallbackg"))
			return GO_CGOCALLBACKG;
		if (!strcmp(n, "systemstack"))
			return GO_SYSTEMSTACK;
		if (!strcmp(n, "morestack"))
			return GO_MORESTACK;
	}
	if (f->flag & PT_GOFUNC_TOPFRAME)
		return GO_TOP;
	if (f->flag & PT_GOFUNC_SPWRITE)
		return GO_SPWRITE;
	return GO_PLAIN;
}

/* asmcgocall called a C function on the system stack, which returned (or
 * will) to `st->pc`: the goroutine's SP is where asmcgocall saved it. On
 * the system stack at the call: 40(SP) = the goroutine stack's depth
 * (stack.hi - SP) and 48(SP) = g, whose first words are stack.lo and
 * stack.hi; with g = 0 (already on a system stack) 40(SP) is the SP itself
 * (runtime/asm_amd64.s). At that SP, asmcgocall (a frame of 0 bytes)
 * holds its return address. That stack is not in the copy: it is read
 * after the thread resumed, which is right while the C call runs (the
 * goroutine waits for it) and may not be if the call returned since. */
static int go_asmcgocall(struct ctx *c, struct state *st, uint64_t *sp_out)
{
	uint64_t g, depth, hi;

	if (st->exact || read_word(c, st->sp + 48, &g) || read_word(c, st->sp + 40, &depth))
		return -ENOENT;
	if (!g) {
		*sp_out = depth;
		return 0;
	}
	if (read_word(c, g + 8, &hi) || depth > hi)
		return -ENOENT;
	*sp_out = hi - depth;
	return 0;
}

/* Go's runtime structures, as far as the walk reads them: a g starts with
 * its stack bounds (lo, hi), then stackguard0/1, _panic, _defer, m, sched
 * (a gobuf: sp, pc, ...); an m starts with g0. These have not moved since
 * Go 1.5. m.curg has, and is found by looking (see go_curg). */
#define G_STACK_LO 0
#define G_STACK_HI 8
#define G_M 48
#define G_SCHED_SP 56
#define G_SCHED_PC 64
#define M_G0 0
#define M_CURG_MAX 1024

/* The g that runs on the stack holding sp: the thread's g as the capture
 * has it (R14 in Go code since Go 1.17), else in its TLS (the executable's
 * only TLS word, at fs_base - 8), checked against its stack bounds. */
static uint64_t go_g(struct ctx *c, uint64_t sp)
{
	uint64_t cand[2] = { c->cap->regs.r14, 0 }, lo, hi;

	if (c->cap->regs.fs_base > 8)
		read_word(c, c->cap->regs.fs_base - 8, &cand[1]);
	for (int i = 0; i < 2; i++)
		if (cand[i] && !read_word(c, cand[i] + G_STACK_LO, &lo) &&
		    !read_word(c, cand[i] + G_STACK_HI, &hi) && lo < hi && sp >= lo && sp < hi &&
		    hi - lo <= (1ull << 30))
			return cand[i];
	return 0;
}

/* The goroutine an m runs (m.curg), given its system goroutine g0: the
 * first g among m's words that belongs to m, is not g0 and was switched
 * away from at a sane SP of its stack, with its PC in Go code (m.gsignal,
 * the other g of m, has never been switched from). The offset is kept. */
static uint64_t go_curg(struct pt_unwinder *u, struct ctx *c, uint64_t g0, uint64_t m)
{
	unsigned int from = u->m_curg ? u->m_curg : 8, to = u->m_curg ? u->m_curg : M_CURG_MAX;

	for (unsigned int off = from; off <= to; off += 8) {
		uint64_t p, pm, lo, hi, sp, pc;
		struct pt_gofunc f;

		if (read_word(c, m + off, &p) || !p || p == g0 || (p & 7) ||
		    read_word(c, p + G_M, &pm) || pm != m || read_word(c, p + G_STACK_LO, &lo) ||
		    read_word(c, p + G_STACK_HI, &hi) || read_word(c, p + G_SCHED_SP, &sp) ||
		    read_word(c, p + G_SCHED_PC, &pc) || sp < lo || sp >= hi || hi - lo > (1ull << 30) ||
		    !go_func(u, pc, 1, &f))
			continue;
		u->m_curg = off;
		return p;
	}
	return 0;
}

/* The registers the kernel saved for a signal, in the ucontext at uc (the
 * SP of the restorer the handler returned to: struct rt_sigframe without
 * its return address): uc_mcontext.gregs follow uc_flags, uc_link and
 * uc_stack (40 bytes); Linux's REG_* order. */
#define UC_GREGS 40
#define UC_REG_RSP 15   /* index of rsp, then rip, in the order below */
#define UC_REG_RIP 16

static int signal_regs(struct ctx *c, uint64_t uc, struct user_regs_struct *r)
{
	static const uint8_t order[] = {
		offsetof(struct user_regs_struct, r8) / 8, offsetof(struct user_regs_struct, r9) / 8,
		offsetof(struct user_regs_struct, r10) / 8, offsetof(struct user_regs_struct, r11) / 8,
		offsetof(struct user_regs_struct, r12) / 8, offsetof(struct user_regs_struct, r13) / 8,
		offsetof(struct user_regs_struct, r14) / 8, offsetof(struct user_regs_struct, r15) / 8,
		offsetof(struct user_regs_struct, rdi) / 8, offsetof(struct user_regs_struct, rsi) / 8,
		offsetof(struct user_regs_struct, rbp) / 8, offsetof(struct user_regs_struct, rbx) / 8,
		offsetof(struct user_regs_struct, rdx) / 8, offsetof(struct user_regs_struct, rax) / 8,
		offsetof(struct user_regs_struct, rcx) / 8, offsetof(struct user_regs_struct, rsp) / 8,
		offsetof(struct user_regs_struct, rip) / 8,
	};
	uint64_t *w = (uint64_t *)r;

	for (size_t i = 0; i < sizeof(order); i++)
		if (read_word(c, uc + UC_GREGS + 8 * i, &w[order[i]]))
			return -EFAULT;
	return 0;
}

int pt_capture_signal(const struct pt_capture *cap, uint64_t uc, uint64_t *sp, uint64_t *pc)
{
	uint64_t at = uc + UC_GREGS + 8 * UC_REG_RSP;

	if (at < cap->regs.rsp || at - cap->regs.rsp + 16 > cap->stack_len)
		return 0;
	memcpy(sp, cap->stack + (at - cap->regs.rsp), 8);
	memcpy(pc, cap->stack + (at - cap->regs.rsp) + 8, 8);
	return *sp && *pc;
}

/* Records in the capture where the kernel's signal frame lay (uc) and the
 * bounds of the signal stack holding it: the stack of the g running the
 * handler (m.gsignal) where it can be read, else Go's 32 KiB below uc. */
static void note_signal_stack(struct ctx *c, uint64_t sp, uint64_t uc)
{
	struct pt_capture *cap = c->cap;
	uint64_t g = go_g(c, sp), lo = 0, hi = 0;

	if (!g || read_word(c, g + G_STACK_LO, &lo) || read_word(c, g + G_STACK_HI, &hi) ||
	    uc < lo || uc >= hi) {
		lo = uc > 32768 ? uc - 32768 : 0;
		hi = uc + 4096;
	}
	cap->sig_uc = uc;
	cap->sig_lo = lo;
	cap->sig_hi = hi;
}

/* Go code that switched stacks, reached from the frame it called on the
 * other stack (st: at pc `at` of f, not the leaf). Follows the switch as
 * Go's traceback does, and steps f's frame there: on return *st holds f's
 * caller's SP and BP, *ra_out its return address.
 *   cgocallback: C called Go. Its frame on the goroutine stack mirrors the
 *     one on the system stack (g0), whose SP is g0.sched.sp while the
 *     callback runs; above that frame are crosscall2 and the C caller.
 *   systemstack: a goroutine called fn on g0; the goroutine's SP is in
 *     m.curg.sched.sp, pointing at systemstack's return address.
 *   morestack: f ran out of stack; m.curg.sched holds f's PC and SP (Go
 *     shows f instead of morestack).
 * Each other stack is read after the thread resumed: right while the
 * switch lasts. Returns 0 or -ENOENT. */
static int go_switch(struct pt_unwinder *u, struct ctx *c, struct pt_module *mod,
		     const struct pt_gofunc *f, enum gokind kind, uint64_t at, struct state *st,
		     uint64_t *ra_out)
{
	uint64_t g, m, g0, gm, curg, sp, pc, ra, bp = st->bp;
	struct pt_module *m2;
	struct pt_gofunc f2;
	int32_t delta;

	if (!(g = go_g(c, st->sp)) || read_word(c, g + G_M, &m) || !m || read_word(c, m + M_G0, &g0))
		return -ENOENT;
	if (kind == GO_CGOCALLBACK) {
		/* g is the goroutine; its m's g0 holds the C side's SP. */
		if (g0 == g || read_word(c, g0 + G_M, &gm) || gm != m ||
		    read_word(c, g0 + G_SCHED_SP, &sp) ||
		    pt_gotab_spdelta(mod->go, f, at - mod->bias, &delta) || delta < 0)
			return -ENOENT;
		sp += (uint64_t)delta + 8;
		if (read_word(c, sp - 8, &ra) || !ra || !is_code(u, ra - 1))
			return -ENOENT;
		if (delta > 0)
			read_word(c, sp - 16, &bp);
		goto out;
	}
	/* systemstack, morestack: g is g0; the goroutine is m.curg. */
	if (g != g0 || !(curg = go_curg(u, c, g0, m)) || read_word(c, curg + G_SCHED_SP, &sp) ||
	    read_word(c, curg + G_SCHED_PC, &pc))
		return -ENOENT;
	if (kind == GO_SYSTEMSTACK) {
		if (read_word(c, sp, &ra) || !ra || !is_code(u, ra - 1))
			return -ENOENT;
		sp += 8;
		goto out;
	}
	/* morestack: f's frame at sched.pc (a return address) and sched.sp;
	 * its caller by f's own pcsp. */
	if (!(m2 = go_func(u, pc - 1, 1, &f2)) ||
	    pt_gotab_spdelta(m2->go, &f2, pc - 1 - m2->bias, &delta) || delta < 0 ||
	    read_word(c, sp + (uint64_t)delta, &ra) || !ra || !is_code(u, ra - 1))
		return -ENOENT;
	/* The frame shown is f's (at pc), then its caller's. */
	*ra_out = pc;
	st->sp = sp;
	return 0;
out:
	*ra_out = ra;
	st->sp = sp;
	st->bp = bp;
	return 0;
}

/* A frame of assembly without CFI whose code after the call at st->pc only
 * pops what it pushed and returns: cgo's crosscall_amd64 (runtime/cgo/
 * gcc_amd64.S), which C's threadentry calls and which calls mstart. Its
 * caller's return address lies above the saved registers. Steps st to the
 * caller and returns 0, or -ENOENT for any other code. */
static int c_pops_then_ret(struct pt_unwinder *u, struct ctx *c, struct state *st)
{
	uint8_t code[24];
	uint64_t bp = st->bp, ra;
	int k = 0;

	if (pt_mem_read(u->mem, st->pc, code, sizeof(code)))
		return -ENOENT;
	for (size_t i = 0; i < sizeof(code); i++) {
		int rex = code[i] == 0x41;

		if (rex)
			i++;
		if (i < sizeof(code) && code[i] >= 0x58 && code[i] <= 0x5f) {
			if (!rex && code[i] == 0x5d && read_word(c, st->sp + 8 * (uint64_t)k, &bp))
				return -ENOENT;
			k++;
			continue;
		}
		if (rex || i >= sizeof(code) || code[i] != 0xc3 || !k)
			return -ENOENT;
		break;
	}
	if (read_word(c, st->sp + 8 * (uint64_t)k, &ra) || !ra || !is_code(u, ra - 1))
		return -ENOENT;
	*st = (struct state){ ra, st->sp + 8 * (uint64_t)k + 8, bp, 0 };
	return 0;
}

/* At most this many switches between Go and C frames, and stack switches
 * (cgo calls, signal frames), in one walk: a lying stack cannot make the
 * walk bounce for ever. */
#define MAX_CROSSINGS 16

/* Steps Go frames from st with each function's pcsp table, as Go's own
 * traceback does: at a PC of f, the return address lies at SP + spdelta +
 * 0 and the caller's SP just above it. Stops at the top of a goroutine or
 * system stack, crosses from a cgo call's C frames back to the goroutine
 * stack, from Go's signal handler to the frame the signal interrupted, and
 * hands over to libunwind at a caller that is not Go code. */
static enum hand walk_go(struct pt_unwinder *u, struct ctx *c, uint64_t *frames, int *np, int max,
			 int *complete, struct state *st, int *crossings)
{
	int n = *np;
	enum hand h = HAND_DONE;
	enum gokind prev = GO_PLAIN;
	const char *prev_name = NULL;
	uint64_t prev_entry = 0;
	int prev_id = -1, ver = 0;

	while (n < max) {
		uint64_t at = st->exact ? st->pc : st->pc - 1, cfa, ra, bp, sp2;
		struct pt_module *mod;
		struct pt_gofunc f;
		enum gokind kind;
		int32_t delta;

		if (!(mod = go_func(u, at, 1, &f))) {
			h = HAND_C;          /* a C frame (the caller of a Go one) */
			break;
		}
		kind = go_kind(&f);
		ver = pt_gotab_version(mod->go);
		/* Go leaves wrappers out of its stacks (gentraceback): ABI
		 * wrappers, named as the function they call (another entry:
		 * not recursion), and (the funcID
		 * is known for Go 1.18 and 1.19 only) the other generated
		 * ones, unless they called a panic. Stepped, not shown. */
		if (!st->exact && n > 1 && f.name && prev_name &&
		    ((f.entry != prev_entry && !strcmp(f.name, prev_name)) ||
		     (ver == 118 && f.funcid == GO118_FUNCID_WRAPPER && prev_id != GO118_FUNCID_GOPANIC &&
		      prev_id != GO118_FUNCID_SIGPANIC && prev_id != GO118_FUNCID_PANICWRAP)))
			n--;
		prev_name = f.name;
		prev_entry = f.entry;
		prev_id = f.funcid;
		if (!st->exact && ((kind == GO_CGOCALLBACK && prev == GO_CGOCALLBACKG) ||
				   kind == GO_SYSTEMSTACK || kind == GO_MORESTACK)) {
			if (++*crossings > MAX_CROSSINGS || go_switch(u, c, mod, &f, kind, at, st, &ra))
				break;
			if (kind == GO_MORESTACK) {
				/* Go shows the function that needed more stack
				 * in morestack's place. */
				frames[n - 1] = ra - 1;
			} else {
				frames[n++] = ra - 1;
			}
			*st = (struct state){ ra, st->sp, st->bp, 0 };
			prev = kind;
			continue;
		}
		prev = kind;
		if (kind == GO_GOEXIT || kind == GO_SPWRITE) {
			/* goexit is the fake caller at the top of every
			 * goroutine: Go's profiles and tracebacks leave it out
			 * (runtime/pprof's allFrames), unless it is the leaf. */
			if (kind == GO_GOEXIT && n > 1 && !st->exact)
				n--;
			*complete = kind == GO_GOEXIT;
			break;
		}
		if (kind == GO_ASMCGOCALL && !st->exact) {
			/* Back from C frames on the system stack to the
			 * goroutine that made the cgo call. */
			if (++*crossings > MAX_CROSSINGS || go_asmcgocall(c, st, &sp2) ||
			    read_word(c, sp2, &ra) || !ra)
				break;
			cfa = sp2 + 8;
			bp = st->bp;
			goto caller;
		}
		if (pt_gotab_spdelta(mod->go, &f, at - mod->bias, &delta) || delta < 0)
			break;
		cfa = st->sp + (uint64_t)delta + 8;
		if (read_word(c, cfa - 8, &ra) || !ra)
			break;
		/* Go saves the caller's BP just below the return address in
		 * every function with a frame (and holds it in BP until then). */
		bp = st->bp;
		if (delta > 0 && read_word(c, cfa - 16, &bp))
			bp = st->bp;
		if (kind == GO_SIGTRAMP) {
			struct user_regs_struct r = c->regs;

			/* The handler returns to the restorer, whose SP is the
			 * kernel's signal frame: the interrupted registers. */
			if (++*crossings > MAX_CROSSINGS || signal_regs(c, cfa, &r) || !r.rip ||
			    !is_code(u, ra) || !is_code(u, r.rip))
				break;
			frames[n++] = ra;            /* the restorer, as the kernel put it */
			if (n >= max)
				break;
			frames[n++] = r.rip;         /* the interrupted PC itself */
			note_signal_stack(c, st->sp, cfa);
			/* Go handles signals on the thread's signal stack: the
			 * interrupted stack is not in the copy, and the thread
			 * has run on since it was taken (its handler returns
			 * within microseconds and the interrupted code then
			 * overwrites what a read would find). Its callers are
			 * known where the copy holds them, or the stop also
			 * copied the interrupted stack (a thread seen in its
			 * handler before: see pt_capture_signal). */
			if ((r.rsp < c->cap->regs.rsp || r.rsp - c->cap->regs.rsp >= c->cap->stack_len) &&
			    (!c->cap->sig_len || r.rsp != c->cap->sig_sp))
				break;
			c->regs = r;
			*st = (struct state){ r.rip, r.rsp, r.rbp, 1 };
			continue;
		}
		if (kind == GO_TOP) {
			/* Go's traceback ends here. Under a C caller (a cgo
			 * program's threads start in C: start_thread, then
			 * crosscall_amd64; its main thread in libc) the stack
			 * goes on in C frames. */
			*complete = 1;
			if (go_func(u, ra - 1, 1, &f) || !is_code(u, ra - 1))
				break;
			frames[n++] = ra - 1;
			*st = (struct state){ ra, cfa, bp, 0 };
			if (n < max && !c_pops_then_ret(u, c, st))
				frames[n++] = st->pc - 1;
			h = HAND_C;
			break;
		}
		/* Each caller's frame lies above its callee's. */
		if (cfa <= st->sp)
			break;
caller:
		if (!is_code(u, ra - 1))
			break;
		frames[n++] = ra - 1;
		*st = (struct state){ ra, cfa, bp, 0 };
	}
	*np = n;
	return h;
}

/* Steps C frames with libunwind from c->regs to the outermost frame, or to
 * the first Go frame (then hands over with its state in *st). */
static enum hand walk_c(struct pt_unwinder *u, struct ctx *c, uint64_t *frames, int *np, int max,
			int *complete, struct state *st, int prev_adjusted)
{
	unw_cursor_t cur;
	int n = *np, from_signal, rc;
	unw_word_t sp = c->regs.rsp;
	enum hand h = HAND_DONE;

	if (unw_init_remote(&cur, u->as, c) < 0)
		return HAND_DONE;
	while (n < max) {
		unw_word_t ip, next_sp, bp;
		struct pt_gofunc f;

		rc = unw_step(&cur);
		if (rc == 0) {
			*complete = 1;
			break;
		}
		if (rc < 0 || unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 ||
		    unw_get_reg(&cur, UNW_REG_SP, &next_sp) < 0)
			break;
		/* Each caller's frame lies above its callee's (x86-64 stacks grow
		 * down). A step that does not move up is garbage: a thread caught
		 * right after clone, still under its parent's CFI, loops on one
		 * address until the frame cap otherwise. */
		if (next_sp <= sp)
			break;
		sp = next_sp;
		if (ip == 0) {
			*complete = 1;
			break;
		}
		/* libunwind decides during a step, from the CFI of the frame it
		 * steps *from*, whether that frame is a signal trampoline; so
		 * unw_is_signal_frame() now describes frames[n - 1]. A
		 * trampoline's address was put there by the kernel, not by a
		 * call: keep it exact. The frame it interrupted is a PC, not a
		 * return address: keep it exact too. Every other return address
		 * steps back into its call instruction. */
		from_signal = unw_is_signal_frame(&cur) > 0;
		/* Code lives in executable mappings. Past the last frame with
		 * unwind info libunwind falls back to the frame-pointer chain (it
		 * walks JIT code so), and at a chain's end that yields junk. */
		if (u->maps && !is_code(u, from_signal ? ip : ip - 1))
			break;
		if (from_signal && prev_adjusted)
			frames[n - 1] += 1;
		frames[n++] = from_signal ? ip : ip - 1;
		prev_adjusted = !from_signal;
		/* Go code has no CFI (Go 1.19 writes none): its own tables
		 * step it, from here on. */
		if (go_func(u, from_signal ? ip : ip - 1, 0, &f)) {
			if (unw_get_reg(&cur, UNW_X86_64_RBP, &bp) < 0)
				bp = 0;
			*st = (struct state){ ip, next_sp, bp, from_signal };
			h = HAND_GO;
			break;
		}
	}
	*np = n;
	return h;
}

/* Steps from the captured registers to the outermost frame (see pt_unwind),
 * each frame with the tables of its code: Go's pcsp for Go code, libunwind
 * (CFI, else frame pointers) for the rest, crossing between them where C
 * calls Go and Go calls C. */
static int walk(struct pt_unwinder *u, struct ctx *c, uint64_t *frames, int n, int max,
		int *complete)
{
	struct state st = { c->regs.rip, c->regs.rsp, c->regs.rbp, 1 };
	struct pt_gofunc f;
	int crossings = 0;
	enum hand h = go_func(u, st.pc, 1, &f) ? HAND_GO : HAND_C;

	while (h != HAND_DONE && n < max) {
		if (h == HAND_GO) {
			int top;

			h = walk_go(u, c, frames, &n, max, complete, &st, &crossings);
			if (h != HAND_C || n >= max)
				break;
			/* libunwind goes on from the Go frame's caller. A
			 * stack Go calls complete (its top, under C) stays so
			 * whatever its C part gives. */
			top = *complete;
			*complete = 0;
			if (++crossings > MAX_CROSSINGS)
				break;
			c->regs.rip = st.pc;
			c->regs.rsp = st.sp;
			c->regs.rbp = st.bp;
			h = walk_c(u, c, frames, &n, max, complete, &st, !st.exact);
			*complete |= top && h == HAND_DONE;
		} else {
			h = walk_c(u, c, frames, &n, max, complete, &st, 0);
		}
		if (h == HAND_GO && ++crossings > MAX_CROSSINGS)
			break;
	}
	return n;
}

int pt_unwind(struct pt_unwinder *u, struct pt_capture *cap, uint64_t *frames, int max,
	      int *complete)
{
	struct ctx c = { u, cap, cap->regs, 0, 0 };
	int n;

	*complete = 0;
	frames[0] = cap->regs.rip;
	cap->sig_uc = cap->sig_lo = cap->sig_hi = 0;
	pt__sigmask_fast_begin();   /* libunwind's lock: see sigmask_override.c */
	n = walk(u, &c, frames, 1, max, complete);
	pt__sigmask_fast_end();
	cap->stack_used = c.used;
	cap->stack_short = c.short_copy;
	return n;
}
