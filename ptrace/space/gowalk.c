/* Go's frames, stepped as Go's own traceback does (see gowalk.h): each
 * function's pcsp table gives its caller (Go writes no CFI for Go code),
 * and the walk follows Go's stack switches (cgo calls and callbacks,
 * systemstack, morestack, its signal handler). Sampler thread only. */
#include "ptrace/space/gowalk.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "ptrace/space/gopclntab.h"
#include "ptrace/space/mem.h"
#include "ptrace/space/module.h"

struct pt_module *pt__gowalk_func(struct pt__walk *c, uint64_t addr, int force, struct pt_gofunc *f)
{
	struct pt_module *mod;

	if (!force && !pt_modules_go_count(c->mods))
		return NULL;
	mod = pt_modules_find(c->mods, c->maps, addr);
	return mod && !pt_module_go_func(mod, addr, f) ? mod : NULL;
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
static int go_asmcgocall(struct pt__walk *c, struct pt__walk_state *st, uint64_t *sp_out)
{
	uint64_t g, depth, hi;

	if (st->exact || pt__stackmem_word(c, st->sp + 48, &g) || pt__stackmem_word(c, st->sp + 40, &depth))
		return -ENOENT;
	if (!g) {
		*sp_out = depth;
		return 0;
	}
	if (pt__stackmem_word(c, g + 8, &hi) || depth > hi)
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
static uint64_t go_g(struct pt__walk *c, uint64_t sp)
{
	uint64_t cand[2] = { c->cap->regs.r14, 0 }, lo, hi;

	if (c->cap->regs.fs_base > 8)
		pt__stackmem_word(c, c->cap->regs.fs_base - 8, &cand[1]);
	for (int i = 0; i < 2; i++)
		if (cand[i] && !pt__stackmem_word(c, cand[i] + G_STACK_LO, &lo) &&
		    !pt__stackmem_word(c, cand[i] + G_STACK_HI, &hi) && lo < hi && sp >= lo && sp < hi &&
		    hi - lo <= (1ull << 30))
			return cand[i];
	return 0;
}

/* The goroutine an m runs (m.curg), given its system goroutine g0: the
 * first g among m's words that belongs to m, is not g0 and was switched
 * away from at a sane SP of its stack, with its PC in Go code (m.gsignal,
 * the other g of m, has never been switched from). The offset is kept. */
static uint64_t go_curg(struct pt__walk *c, uint64_t g0, uint64_t m)
{
	unsigned int from = *c->m_curg ? *c->m_curg : 8, to = *c->m_curg ? *c->m_curg : M_CURG_MAX;

	for (unsigned int off = from; off <= to; off += 8) {
		uint64_t p, pm, lo, hi, sp, pc;
		struct pt_gofunc f;

		if (pt__stackmem_word(c, m + off, &p) || !p || p == g0 || (p & 7) ||
		    pt__stackmem_word(c, p + G_M, &pm) || pm != m || pt__stackmem_word(c, p + G_STACK_LO, &lo) ||
		    pt__stackmem_word(c, p + G_STACK_HI, &hi) || pt__stackmem_word(c, p + G_SCHED_SP, &sp) ||
		    pt__stackmem_word(c, p + G_SCHED_PC, &pc) || sp < lo || sp >= hi || hi - lo > (1ull << 30) ||
		    !pt__gowalk_func(c, pc, 1, &f))
			continue;
		*c->m_curg = off;
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

static int signal_regs(struct pt__walk *c, uint64_t uc, struct user_regs_struct *r)
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
		if (pt__stackmem_word(c, uc + UC_GREGS + 8 * i, &w[order[i]]))
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
static void note_signal_stack(struct pt__walk *c, uint64_t sp, uint64_t uc)
{
	struct pt_capture *cap = c->cap;
	uint64_t g = go_g(c, sp), lo = 0, hi = 0;

	if (!g || pt__stackmem_word(c, g + G_STACK_LO, &lo) || pt__stackmem_word(c, g + G_STACK_HI, &hi) ||
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
static int go_switch(struct pt__walk *c, struct pt_module *mod, const struct pt_gofunc *f, enum gokind kind, uint64_t at, struct pt__walk_state *st,
		     uint64_t *ra_out)
{
	uint64_t g, m, g0, gm, curg, sp, pc, ra, bp = st->bp;
	struct pt_module *m2;
	struct pt_gofunc f2;
	int32_t delta;

	if (!(g = go_g(c, st->sp)) || pt__stackmem_word(c, g + G_M, &m) || !m || pt__stackmem_word(c, m + M_G0, &g0))
		return -ENOENT;
	if (kind == GO_CGOCALLBACK) {
		/* g is the goroutine; its m's g0 holds the C side's SP. */
		if (g0 == g || pt__stackmem_word(c, g0 + G_M, &gm) || gm != m ||
		    pt__stackmem_word(c, g0 + G_SCHED_SP, &sp) ||
		    pt_gotab_spdelta(mod->go, f, at - mod->bias, &delta) || delta < 0)
			return -ENOENT;
		sp += (uint64_t)delta + 8;
		if (pt__stackmem_word(c, sp - 8, &ra) || !ra || !pt__stackmem_is_code(c, ra - 1))
			return -ENOENT;
		if (delta > 0)
			pt__stackmem_word(c, sp - 16, &bp);
		goto out;
	}
	/* systemstack, morestack: g is g0; the goroutine is m.curg. */
	if (g != g0 || !(curg = go_curg(c, g0, m)) || pt__stackmem_word(c, curg + G_SCHED_SP, &sp) ||
	    pt__stackmem_word(c, curg + G_SCHED_PC, &pc))
		return -ENOENT;
	if (kind == GO_SYSTEMSTACK) {
		if (pt__stackmem_word(c, sp, &ra) || !ra || !pt__stackmem_is_code(c, ra - 1))
			return -ENOENT;
		sp += 8;
		goto out;
	}
	/* morestack: f's frame at sched.pc (a return address) and sched.sp;
	 * its caller by f's own pcsp. */
	if (!(m2 = pt__gowalk_func(c, pc - 1, 1, &f2)) ||
	    pt_gotab_spdelta(m2->go, &f2, pc - 1 - m2->bias, &delta) || delta < 0 ||
	    pt__stackmem_word(c, sp + (uint64_t)delta, &ra) || !ra || !pt__stackmem_is_code(c, ra - 1))
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
static int c_pops_then_ret(struct pt__walk *c, struct pt__walk_state *st)
{
	uint8_t code[24];
	uint64_t bp = st->bp, ra;
	int k = 0;

	if (pt_mem_read(c->mem, st->pc, code, sizeof(code)))
		return -ENOENT;
	for (size_t i = 0; i < sizeof(code); i++) {
		int rex = code[i] == 0x41;

		if (rex)
			i++;
		if (i < sizeof(code) && code[i] >= 0x58 && code[i] <= 0x5f) {
			if (!rex && code[i] == 0x5d && pt__stackmem_word(c, st->sp + 8 * (uint64_t)k, &bp))
				return -ENOENT;
			k++;
			continue;
		}
		if (rex || i >= sizeof(code) || code[i] != 0xc3 || !k)
			return -ENOENT;
		break;
	}
	if (pt__stackmem_word(c, st->sp + 8 * (uint64_t)k, &ra) || !ra || !pt__stackmem_is_code(c, ra - 1))
		return -ENOENT;
	*st = (struct pt__walk_state){ ra, st->sp + 8 * (uint64_t)k + 8, bp, 0 };
	return 0;
}

/* Steps Go frames from st with each function's pcsp table, as Go's own
 * traceback does: at a PC of f, the return address lies at SP + spdelta +
 * 0 and the caller's SP just above it. Stops at the top of a goroutine or
 * system stack, crosses from a cgo call's C frames back to the goroutine
 * stack, from Go's signal handler to the frame the signal interrupted, and
 * hands over to libunwind at a caller that is not Go code. */
enum pt__hand pt__gowalk(struct pt__walk *c, uint64_t *frames, int *np, int max, int *complete,
			 struct pt__walk_state *st, int *crossings)
{
	int n = *np;
	enum pt__hand h = PT__HAND_DONE;
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

		if (!(mod = pt__gowalk_func(c, at, 1, &f))) {
			h = PT__HAND_C;          /* a C frame (the caller of a Go one) */
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
			if (++*crossings > PT__MAX_CROSSINGS || go_switch(c, mod, &f, kind, at, st, &ra))
				break;
			if (kind == GO_MORESTACK) {
				/* Go shows the function that needed more stack
				 * in morestack's place. */
				frames[n - 1] = ra - 1;
			} else {
				frames[n++] = ra - 1;
			}
			*st = (struct pt__walk_state){ ra, st->sp, st->bp, 0 };
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
			if (++*crossings > PT__MAX_CROSSINGS || go_asmcgocall(c, st, &sp2) ||
			    pt__stackmem_word(c, sp2, &ra) || !ra)
				break;
			cfa = sp2 + 8;
			bp = st->bp;
			goto caller;
		}
		if (pt_gotab_spdelta(mod->go, &f, at - mod->bias, &delta) || delta < 0)
			break;
		cfa = st->sp + (uint64_t)delta + 8;
		if (pt__stackmem_word(c, cfa - 8, &ra) || !ra)
			break;
		/* Go saves the caller's BP just below the return address in
		 * every function with a frame (and holds it in BP until then). */
		bp = st->bp;
		if (delta > 0 && pt__stackmem_word(c, cfa - 16, &bp))
			bp = st->bp;
		if (kind == GO_SIGTRAMP) {
			struct user_regs_struct r = c->regs;

			/* The handler returns to the restorer, whose SP is the
			 * kernel's signal frame: the interrupted registers. */
			if (++*crossings > PT__MAX_CROSSINGS || signal_regs(c, cfa, &r) || !r.rip ||
			    !pt__stackmem_is_code(c, ra) || !pt__stackmem_is_code(c, r.rip))
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
			*st = (struct pt__walk_state){ r.rip, r.rsp, r.rbp, 1 };
			continue;
		}
		if (kind == GO_TOP) {
			/* Go's traceback ends here. Under a C caller (a cgo
			 * program's threads start in C: start_thread, then
			 * crosscall_amd64; its main thread in libc) the stack
			 * goes on in C frames. */
			*complete = 1;
			if (pt__gowalk_func(c, ra - 1, 1, &f) || !pt__stackmem_is_code(c, ra - 1))
				break;
			frames[n++] = ra - 1;
			*st = (struct pt__walk_state){ ra, cfa, bp, 0 };
			if (n < max && !c_pops_then_ret(c, st))
				frames[n++] = st->pc - 1;
			h = PT__HAND_C;
			break;
		}
		/* Each caller's frame lies above its callee's. */
		if (cfa <= st->sp)
			break;
caller:
		if (!pt__stackmem_is_code(c, ra - 1))
			break;
		frames[n++] = ra - 1;
		*st = (struct pt__walk_state){ ra, cfa, bp, 0 };
	}
	*np = n;
	return h;
}
