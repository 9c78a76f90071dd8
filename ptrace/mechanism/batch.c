/* A batch of captures, once every thread of it runs again: unwound
 * offline (libunwind over the stack copies, ptrace/space/unwinder.c), then each
 * reported to whoever chose the threads, through its ops. Sampler thread
 * only. */
#include "ptrace/mechanism/batch.h"

#include <string.h>
#include <sys/syscall.h>
#include <sys/user.h>

#include "ptrace/space/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/proc/proc.h"
#include "ptrace/mechanism/mechanism.h"
#include "ptrace/runtimes/runtimes.h"
#include "ptrace/space/space.h"
#include "ptrace/space/unwinder.h"

#ifndef SYS_clone3
#define SYS_clone3 435
#endif

/* An address outside every mapping means the maps may be stale (a library
 * loaded since they were read, e.g. by the dynamic loader right after an
 * exec): read them again and redo the batch. If that did not place the
 * address (junk at the end of a frame-pointer chain), the least time
 * between such reads doubles, up to a second. */
int pt__batch_unwind_clone_leaf(struct pt_tracee *t, struct pt_capture *cap, uint64_t *f, int max, int n)
{
	struct user_regs_struct regs = cap->regs;
	size_t len = cap->stack_len, limit = cap->stack_limit;
	const struct pt_map *m;
	uint64_t ret;
	int complete;

	if (n > 1 || max < 2 || cap->stack_len < 16)
		return n;
	memcpy(&ret, cap->stack, sizeof(ret));
	if (!(m = pt_maps_find(pt_space_maps(t->as), ret)) || !(m->flags & PT_MAP_X))
		return n;
	cap->regs.rip = ret;
	cap->regs.rsp += 8;
	cap->stack += 8;
	cap->stack_len -= 8;
	if (cap->stack_limit > 8)
		cap->stack_limit -= 8;
	n = 1 + pt_unwind(pt_space_unwinder(t->as), cap, f + 1, max - 1, &complete);
	f[1] = ret - 1;   /* a return address: the call is the instruction before */
	if (cap->jit_at >= 0)
		cap->jit_at++;   /* JIT code reached: its frame's index in f */
	cap->stack -= 8;
	cap->stack_used += 8;
	cap->regs = regs;
	cap->stack_len = len;
	cap->stack_limit = limit;
	return n;
}

int pt__batch_clone_tail(const uint8_t *code)
{
	/* syscall; test %rax,%rax; jl rel8; je rel8; ret: where each
	 * instruction after the syscall begins */
	static const uint8_t at[] = { 0, 3, 5, 7 };

	for (size_t i = 0; i < sizeof(at); i++) {
		const uint8_t *c = code + PT_CLONE_TAIL_BACK - at[i] - 2;

		if (c[0] == 0x0f && c[1] == 0x05 && c[2] == 0x48 && c[3] == 0x85 && c[4] == 0xc0 &&
		    c[5] == 0x7c && c[7] == 0x74 && c[9] == 0xc3)
			return 1;
	}
	return 0;
}

int pt__batch_in_clone(const struct user_regs_struct *regs)
{
	return regs->orig_rax == SYS_clone || regs->orig_rax == SYS_clone3;
}

int pt__batch_clone_parent_regs(const struct user_regs_struct *regs)
{
	return pt__batch_in_clone(regs) && regs->rax != 0;
}

/* A tick's capture of a thread back from clone or clone3, or stopped in
 * it: the parent (pt__batch_clone_parent_regs). A sample the kernel took
 * (perf_event) has no system call number: one right after a syscall
 * instruction (0f 05) whose unwind went no further is taken for the same
 * (a thread in clone's kernel part, its registers those it entered with:
 * glibc's clone3 marks the end of the stack there, for the child's sake),
 * when the word at its SP is a return address (a child's new stack holds
 * none). A parent stopped on the instructions after the syscall, in user
 * mode (no system call number then), is told by its code
 * (pt__batch_clone_tail) and by rax, still its child's tid. */
static int clone_parent(struct pt_tracee *t, const struct pt_capture *cap)
{
	uint8_t insn[2], code[PT_CLONE_TAIL_SPAN];
	uint64_t rip = cap->regs.rip;

	if (cap->read_beyond ? rip >= 2 && !pt_space_read(t->as, rip - 2, insn, 2) && insn[0] == 0x0f &&
				       insn[1] == 0x05
			     : pt__batch_clone_parent_regs(&cap->regs))
		return 1;
	return (int64_t)cap->regs.rax > 0 && rip >= PT_CLONE_TAIL_BACK &&
	       !pt_space_read(t->as, rip - PT_CLONE_TAIL_BACK, code, sizeof(code)) && pt__batch_clone_tail(code);
}

void pt__batch_unwind(struct pt_tracee *t, int ncap)
{
	for (int pass = 0; pass < 2; pass++) {
		uint64_t miss, incomplete = 0;

		for (int k = 0; k < ncap; k++) {
			uint64_t t0 = pt__now_ns();
			int complete;

			t->nframes[k] = pt_unwind(pt_space_unwinder(t->as), &t->caps[k],
						  t->frames[k],
						  t->o.max_frames, &complete);
			if (t->nframes[k] <= 1 && clone_parent(t, &t->caps[k]))
				t->nframes[k] = pt__batch_unwind_clone_leaf(
					t, &t->caps[k], t->frames[k],
					t->o.max_frames, t->nframes[k]);
			t->unwind_ns[k] = pt__now_ns() - t0;
			incomplete += !complete;
		}
		miss = pt_unwinder_take_miss(pt_space_unwinder(t->as));
		if (pass == 0 && miss && pt_space_refresh_for(t->as, miss))
			continue;   /* the maps were stale: again, with the new ones */
		t->st.incomplete_stacks += incomplete;
		return;
	}
}

/* Sizes a thread's next stack copy from what its last unwind read. A
 * stop's copy (ptrace): twice that plus a page, in pages; an unwind that
 * ran out of copy makes the next one whole (that sample's stack ends where
 * the copy did: counted, and incomplete). The kernel's copy (perf_event):
 * what was read and a quarter more, in 512-byte steps; the kernel copies
 * that much at every sample, on the target's time, and what an unwind
 * lacks is read from memory right after (read_beyond: counted in `used`),
 * so a sample that went deeper loses nothing, and the copy grows when two
 * in a row needed more. A stop's grows at once. Either shrinks by an
 * eighth at most per sample (a thread that goes deeper now and then keeps
 * its room). The two are kept apart: a stop's copy (a thread dump's,
 * under perf_event) is not cut to the kernel's tight one. */
static void learn_stack(struct pt_tracee *t, struct pt_thread *th, const struct pt_capture *cap)
{
	size_t cur = th->stack_want ? th->stack_want : t->o.stack_bytes;
	size_t need, used = cap->stack_used;

	if (cap->stack_short)
		t->st.short_copies++;
	if (cap->read_beyond) {
		size_t both, floor;

		cur = th->kstack_want ? th->kstack_want : (cap->stack_len + 511) & ~(size_t)511;
		need = (used + used / 4 + 512 + 511) & ~(size_t)511;
		/* Grown to what two samples in a row needed: one unwind that
		 * strayed (read far past the stack) does not make every later
		 * copy large; one that went deeper lost nothing. */
		both = need < th->kstack_last ? need : th->kstack_last;
		th->kstack_last = need;
		floor = (cur - cur / 8) & ~(size_t)511;
		if (both > cur)
			need = both;              /* grown */
		else if (need > cur)
			need = cur;               /* one deeper sample: held */
		else if (need < floor)
			need = floor;             /* shrunk by an eighth at most */
		th->kstack_want = need < t->o.stack_bytes ? need : t->o.stack_bytes;
		return;
	}
	if (cap->stack_short) {
		th->stack_want = 0;
		return;
	}
	need = (2 * used + 2 * 4096 - 1) & ~(size_t)4095;
	if (need < ((cur - cur / 8) & ~(size_t)4095))
		need = (cur - cur / 8) & ~(size_t)4095;
	th->stack_want = need >= t->o.stack_bytes ? 0 : need;
}

void pt__batch_report(struct pt_tracee *t, int ncap, const struct pt_stop_ops *ops)
{
	for (int k = 0; k < ncap; k++) {
		struct pt_thread *th = t->slot_th[k];
		struct pt_capture *cap = &t->caps[k];
		uint64_t dt = t->unwind_ns[k];
		struct pt_sample smp;

		if (pt_runtimes_active(t->rts)) {
			uint64_t t0 = pt__now_ns();

			t->nframes[k] = pt_runtimes_merge(t->rts, k, cap, t->frames[k],
							  t->nframes[k], t->o.max_frames);
			dt += pt__now_ns() - t0;
		}
		smp = (struct pt_sample){
			.pid = t->pid, .tid = th->tid, .comm = th->comm, .state = th->state,
			.syscall = (long)cap->regs.orig_rax >= 0 ? (int)cap->regs.orig_rax : -1,
			.frames = t->frames[k], .n = t->nframes[k],
			.sp = cap->regs.rsp, .pc = cap->regs.rip,
		};
		learn_stack(t, th, cap);
		if (cap->sig_uc) {
			th->sig_uc = cap->sig_uc;
			th->sig_lo = cap->sig_lo;
			th->sig_hi = cap->sig_hi;
		}
		t->st.thread_samples++;
		t->st.unwind_ns_total += dt;
		t->st.pause_ns_total += t->slot_pause[k];
		t->st.frames_total += (uint64_t)smp.n;
		if (ops->timing)
			ops->timing(ops->arg, t->slot_pause[k], dt);
		if (ops->sample)
			ops->sample(ops->arg, th, &smp);
	}
}
