#include "ptrace/unwind.h"

#include <dlfcn.h>
#include <errno.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ptrace/mem.h"
#include "ptrace/module.h"
#include "ptrace/proc.h"

/* Exported by libunwind-x86_64 but declared in no public header (1.6.2):
 * binary-searches an .eh_frame_hdr table described by `di` and parses the
 * FDE, reading through the address space's accessors. */
extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
					      unw_dyn_info_t *di, unw_proc_info_t *pi,
					      int need_unwind_info, void *arg);

/* libunwind as Debian builds it (no per-thread cache) guards its cache of
 * register states with a global lock and blocks every signal around it with
 * sigprocmask(): two system calls per step, most of an unwind's time. No
 * signal handler of ours unwinds, so while this thread unwinds those calls
 * are answered without the kernel; every other call goes to libc's. The
 * mask of the unwinding thread (the sampler's) does not change meanwhile. */
static __thread int unwinding;
static __thread int have_mask;
static __thread sigset_t thread_mask;

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	static int (*real)(int, const sigset_t *, sigset_t *);

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "sigprocmask");
	if (unwinding && have_mask) {
		if (old)
			*old = thread_mask;
		return 0;
	}
	return real ? real(how, set, old) : (int)syscall(SYS_rt_sigprocmask, how, set, old, 8);
}

struct pt_unwinder {
	unw_addr_space_t as;
	struct pt_mem *mem;
	struct pt_modules *mods;
	const struct pt_maps *maps;
	uint64_t miss;           /* an address outside every mapping, 0 if none */
};

/* What the accessors see through their `arg`. */
struct ctx {
	struct pt_unwinder *u;
	const struct pt_capture *cap;
	size_t used;     /* end of the furthest word read from the copy */
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
		return -UNW_EINVAL;
	}
	return pt_mem_read(c->u->mem, addr, val, sizeof(*val)) ? -UNW_EINVAL : 0;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	const struct user_regs_struct *r = &((struct ctx *)arg)->cap->regs;

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
	struct pt_unwinder *u = calloc(1, sizeof(*u));

	*out = NULL;
	if (!u)
		return -ENOMEM;
	u->as = unw_create_addr_space(&accessors, 0);
	if (!u->as) {
		free(u);
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
	free(u);
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

/* Steps from the captured registers to the outermost frame (see pt_unwind). */
static int walk(struct pt_unwinder *u, struct ctx *c, uint64_t *frames, int n, int max,
		int *complete)
{
	unw_cursor_t cur;
	int prev_adjusted = 0, from_signal, rc;
	unw_word_t sp = c->cap->regs.rsp;

	if (unw_init_remote(&cur, u->as, c) < 0)
		return n;
	while (n < max) {
		unw_word_t ip, next_sp;

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
	}
	return n;
}

int pt_unwind(struct pt_unwinder *u, struct pt_capture *cap, uint64_t *frames, int max,
	      int *complete)
{
	struct ctx c = { u, cap, 0, 0 };
	int n;

	*complete = 0;
	frames[0] = cap->regs.rip;
	if (!have_mask)
		have_mask = pthread_sigmask(SIG_BLOCK, NULL, &thread_mask) == 0;
	unwinding = 1;
	n = walk(u, &c, frames, 1, max, complete);
	unwinding = 0;
	cap->stack_used = c.used;
	cap->stack_short = c.short_copy;
	return n;
}
