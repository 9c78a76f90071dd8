/* The unwinder (see unwinder.h): libunwind's remote API over accessors that
 * read the capture a stop took, the page cache and each module's
 * .eh_frame_hdr, and Go's own tables (.gopclntab's pcsp) for Go frames,
 * which carry no CFI. Owns the libunwind address space (and its cache of
 * parsed FDEs). Sampler thread only: the captures, the page cache and the
 * address space it reads are the sampler's (CONVENTIONS H12). */
#include "ptrace/space/unwinder.h"

#include <errno.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/mem.h"
#include "ptrace/space/gopclntab.h"
#include "ptrace/space/gowalk.h"
#include "ptrace/space/mem.h"
#include "ptrace/space/module.h"
#include "ptrace/proc/proc.h"
#include "ptrace/space/sigmask_override.h"

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
	uint64_t jit_lo, jit_hi; /* JIT code the walks stop at (none: equal) */
};

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
			  int need_unwind_info, void *arg)
{
	struct pt__walk *c = arg;
	struct pt_module *mod = pt_modules_find(c->mods, c->maps, ip);
	unw_dyn_info_t di;

	if (!mod && c->maps && !*c->miss && !pt_maps_find(c->maps, ip))
		*c->miss = ip;
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
	uint64_t v;

	(void)as;
	if (write || pt__stackmem_word(arg, addr, &v))
		return -UNW_EINVAL;
	*val = v;
	return 0;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	const struct user_regs_struct *r = &((struct pt__walk *)arg)->regs;

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

void pt_unwinder_set_jit(struct pt_unwinder *u, uint64_t lo, uint64_t hi)
{
	u->jit_lo = lo;
	u->jit_hi = hi > lo ? hi : lo;
}

/* The walk is at JIT code: frames[at] is that frame, at st. Returns 1 if
 * it is (the walk ends there), else 0. */
static int at_jit(struct pt__walk *c, int at, const struct pt__walk_state *st)
{
	struct pt_capture *cap = c->cap;

	if (st->pc < c->jit_lo || st->pc >= c->jit_hi)
		return 0;
	cap->jit_at = at;
	cap->jit_exact = st->exact;
	cap->jit_pc = st->pc;
	cap->jit_sp = st->sp;
	cap->jit_bp = st->bp;
	return 1;
}

void pt_unwinder_flush(struct pt_unwinder *u)
{
	unw_flush_cache(u->as, 0, 0);
}

uint64_t pt_unwinder_take_miss(struct pt_unwinder *u)
{
	uint64_t a = u->miss;

	u->miss = 0;
	return a;
}

/* Steps C frames with libunwind from c->regs to the outermost frame, or to
 * the first Go frame (then hands over with its state in *st). */
static enum pt__hand walk_c(struct pt_unwinder *u, struct pt__walk *c, uint64_t *frames, int *np, int max,
			    int *complete, struct pt__walk_state *st, int prev_adjusted)
{
	unw_cursor_t cur;
	int n = *np, from_signal, rc;
	unw_word_t sp = c->regs.rsp;
	enum pt__hand h = PT__HAND_DONE;

	if (unw_init_remote(&cur, u->as, c) < 0)
		return PT__HAND_DONE;
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
		if (c->maps && !pt__stackmem_is_code(c, from_signal ? ip : ip - 1))
			break;
		if (from_signal && prev_adjusted)
			frames[n - 1] += 1;
		frames[n++] = from_signal ? ip : ip - 1;
		prev_adjusted = !from_signal;
		/* JIT code: its runtime goes on from here (the fallback to
		 * frame pointers would read its frames wrong). */
		if (c->jit_lo < c->jit_hi && ip >= c->jit_lo && ip < c->jit_hi) {
			if (unw_get_reg(&cur, UNW_X86_64_RBP, &bp) < 0)
				bp = 0;
			at_jit(c, n - 1, &(struct pt__walk_state){ ip, next_sp, bp, from_signal });
			break;
		}
		/* Go code has no CFI (Go 1.19 writes none): its own tables
		 * step it, from here on. */
		if (pt__gowalk_func(c, from_signal ? ip : ip - 1, 0, &f)) {
			if (unw_get_reg(&cur, UNW_X86_64_RBP, &bp) < 0)
				bp = 0;
			*st = (struct pt__walk_state){ ip, next_sp, bp, from_signal };
			h = PT__HAND_GO;
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
static int walk(struct pt_unwinder *u, struct pt__walk *c, uint64_t *frames, int n, int max,
		int *complete)
{
	struct pt__walk_state st = { c->regs.rip, c->regs.rsp, c->regs.rbp, 1 };
	struct pt_gofunc f;
	int crossings = 0;
	enum pt__hand h;

	if (at_jit(c, n - 1, &st))
		return n;
	h = pt__gowalk_func(c, st.pc, 1, &f) ? PT__HAND_GO : PT__HAND_C;

	while (h != PT__HAND_DONE && n < max) {
		if (h == PT__HAND_GO) {
			int top;

			h = pt__gowalk(c, frames, &n, max, complete, &st, &crossings);
			if (h != PT__HAND_C || n >= max)
				break;
			/* libunwind goes on from the Go frame's caller. A
			 * stack Go calls complete (its top, under C) stays so
			 * whatever its C part gives. */
			top = *complete;
			*complete = 0;
			if (++crossings > PT__MAX_CROSSINGS)
				break;
			c->regs.rip = st.pc;
			c->regs.rsp = st.sp;
			c->regs.rbp = st.bp;
			h = walk_c(u, c, frames, &n, max, complete, &st, !st.exact);
			*complete |= top && h == PT__HAND_DONE;
		} else {
			h = walk_c(u, c, frames, &n, max, complete, &st, 0);
		}
		if (h == PT__HAND_GO && ++crossings > PT__MAX_CROSSINGS)
			break;
	}
	return n;
}

/* A C function stopped at its return (ret, or rep ret) has restored every
 * register it saved and popped its frame: its caller's state is the
 * return address on top of the stack, the stack pointer above it, the
 * registers as they are. Its unwind table may still name save slots below
 * the stack pointer (GCC's epilogue rows after pop %rbp), which the copy
 * does not hold and the running thread has overwritten: a caller whose
 * frame address is its %rbp (frame-pointer builds: CPython 3.14's eval
 * loop) then ended the walk, 0.2 % of 3.14's samples. Returns 1 with c's
 * registers moved to the caller and *ra its return address, else 0. */
static int leaf_returns(struct pt__walk *c, uint64_t *ra)
{
	uint8_t code[2] = { 0, 0 };
	struct pt_gofunc f;

	if (pt_mem_read(c->mem, c->regs.rip, code, 1) ||
	    (code[0] == 0xf3 && pt_mem_read(c->mem, c->regs.rip, code, 2)))
		return 0;
	if (!(code[0] == 0xc3 || (code[0] == 0xf3 && code[1] == 0xc3)) ||
	    (c->regs.rip >= c->jit_lo && c->regs.rip < c->jit_hi) ||   /* a JIT's: its runtime walks it */
	    pt__gowalk_func(c, c->regs.rip, 1, &f) ||   /* Go's own tables step Go code */
	    pt__stackmem_word(c, c->regs.rsp, ra) || !*ra || !pt__stackmem_is_code(c, *ra - 1) ||
	    pt__gowalk_func(c, *ra - 1, 0, &f) ||   /* a return into Go: Go's tables, from the leaf */
	    (*ra >= c->jit_lo && *ra < c->jit_hi))   /* into a JIT's code: its runtime walks from the leaf */
		return 0;
	c->regs.rip = *ra;
	c->regs.rsp += 8;
	return 1;
}

int pt_unwind(struct pt_unwinder *u, struct pt_capture *cap, uint64_t *frames, int max,
	      int *complete)
{
	struct pt__walk c = { .mem = u->mem, .mods = u->mods, .maps = u->maps, .miss = &u->miss,
			      .m_curg = &u->m_curg, .jit_lo = u->jit_lo, .jit_hi = u->jit_hi,
			      .cap = cap, .regs = cap->regs };
	int n;

	uint64_t ra;

	*complete = 0;
	frames[0] = cap->regs.rip;
	cap->sig_uc = cap->sig_lo = cap->sig_hi = 0;
	cap->jit_at = -1;
	n = 1;
	if (max > 1 && c.maps && leaf_returns(&c, &ra))
		frames[n++] = ra - 1;   /* in its call instruction, as every caller */
	pt__sigmask_fast_begin();   /* libunwind's lock: see sigmask_override.c */
	n = walk(u, &c, frames, n, max, complete);
	pt__sigmask_fast_end();
	cap->stack_used = c.used;
	cap->stack_short = c.short_copy;
	return n;
}
