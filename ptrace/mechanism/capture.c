/* Capturing a thread we stopped: its registers and a copy of its stack
 * (as much as its last unwind needed, with room to spare), the stack a Go
 * signal handler interrupted, and a Python thread's frame chain. Whatever
 * changes as soon as the thread runs is read here, inside the pause; the
 * rest waits until it runs again (batch.c). Sampler thread only. */
#include "ptrace/mechanism/capture.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "base/mem.h"
#include "ptrace/space/mem.h"
#include "ptrace/proc/proc.h"
#include "ptrace/core/internal.h"
#include "ptrace/mechanism/mechanism.h"
#include "ptrace/runtimes/runtimes.h"
#include "ptrace/space/space.h"
#include "ptrace/space/gowalk.h"
#include "ptrace/space/unwinder.h"

/* A Go thread stopped in its signal handler (its SP on the signal stack
 * where an earlier unwind found Go's handler): the interrupted goroutine's
 * stack, from the SP in the kernel's signal frame, is copied in the same
 * stop, since the thread overwrites it as soon as the handler returns. A
 * frame that is not where it was last time (a nested signal) gives an SP
 * the unwind does not meet: the copy then goes unused. */
static void capture_interrupted(struct pt_tracee *t, struct pt_thread *th, struct pt_capture *cap)
{
	uint64_t sp, pc;
	ssize_t n;

	if (!pt_capture_signal(cap, th->sig_uc, &sp, &pc) || (sp >= th->sig_lo && sp < th->sig_hi))
		return;
	if (!cap->sig_stack && !(cap->sig_stack = base_malloc(t->o.stack_bytes)))
		return;
	n = pt_mem_read_partial(t->pid, sp, cap->sig_stack, t->o.stack_bytes);
	if (n < 16)
		return;
	cap->sig_sp = sp;
	cap->sig_len = (size_t)n;
	cap->sig_limit = cap->sig_len == t->o.stack_bytes ? ((size_t)1 << 30) : 0;
	t->st.signal_copies++;
}

int pt__capture_room(struct pt_capture *cap, size_t len)
{
	size_t want = (len + 4095) & ~(size_t)4095;
	uint8_t *p;

	if (cap->stack && cap->stack_room >= len)
		return 0;
	if (!(p = base_realloc(cap->stack, want ? want : 4096)))
		return -ENOMEM;
	cap->stack = p;
	cap->stack_room = want ? want : 4096;
	return 0;
}

int pt__slot_ready(struct pt_tracee *t, int slot, size_t len)
{
	if (!t->frames[slot] &&
	    !(t->frames[slot] = base_malloc((size_t)t->o.max_frames * sizeof(*t->frames[slot]))))
		return -ENOMEM;
	return pt__capture_room(&t->caps[slot], len);
}

/* Copying costs the stopped thread about a microsecond per page: as much
 * stack as its last unwind needed, with room to spare (batch.c sizes it). */
int pt__capture(struct pt_tracee *t, struct pt_thread *th, struct pt_capture *cap, int slot)
{
	size_t want = th->stack_want ? th->stack_want : t->o.stack_bytes;
	uint64_t t0;
	ssize_t n;

	if (want > t->o.stack_bytes)
		want = t->o.stack_bytes;
	if (slot >= 0)
		pt_runtimes_clear(t->rts, slot);
	if (slot >= 0 && slot < t->o.max_per_tick ? pt__slot_ready(t, slot, want) : pt__capture_room(cap, want))
		return -ENOMEM;
	if (ptrace(PTRACE_GETREGS, th->tid, 0, &cap->regs) < 0)
		return -errno;
	th->last_sp = cap->regs.rsp;
	n = pt_mem_read_partial(t->pid, cap->regs.rsp, cap->stack, want);
	cap->stack_len = n > 0 ? (size_t)n : 0;
	cap->stack_limit = cap->stack_len == want ? t->o.stack_bytes : 0;
	cap->sig_len = 0;
	cap->read_beyond = 0;   /* stopped: its stack past the copy is not read */
	if (th->sig_uc && cap->regs.rsp >= th->sig_lo && cap->regs.rsp < th->sig_uc)
		capture_interrupted(t, th, cap);
	/* A Python thread's frame chain changes as soon as it runs: read now,
	 * in the same stop (ptrace/runtimes/python/python.h). */
	t0 = pt__now_ns();
	if (slot >= 0 && pt_runtimes_capture(t->rts, slot, &th->rt, cap)) {
		t->st.py_capture_ns += pt__now_ns() - t0;
		t->st.py_captures++;
	}
	return 0;
}

/* The tid the target knows th by (PyThreadState.native_thread_id). */
static pid_t thread_nstid(struct pt_tracee *t, const struct pt_thread *th)
{
	char path[96], buf[4096];
	pid_t ns;

	if (pt_space_nspid(t->as) == t->pid)
		return th->tid;   /* our PID namespace is the target's */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)t->pid, (int)th->tid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) < 0 || pt_proc_parse_nspid(buf, &ns))
		return th->tid;
	return ns;
}

pid_t pt__capture_nstid(struct pt_tracee *t, struct pt_thread *th)
{
	if (!th->rt.nstid)
		th->rt.nstid = thread_nstid(t, th);
	return th->rt.nstid;
}

void pt__capture_prepare(struct pt_tracee *t, struct pt_thread *const *sel, int nsel)
{
	struct pt_rt_thread *rt[64];
	int k = 0;

	if (!pt_runtimes_active(t->rts))
		return;
	for (int i = 0; i < nsel && k < 64; i++) {
		struct pt_thread *th = sel[i];

		if (!th)
			continue;
		pt__capture_nstid(t, th);
		rt[k++] = &th->rt;
	}
	pt_runtimes_prepare(t->rts, rt, k);
}
