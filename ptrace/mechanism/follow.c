/* New threads followed with a birth stop or without (see follow.h). */
#include "ptrace/mechanism/follow.h"

#include <errno.h>
#include <sys/ptrace.h>

#include "ptrace/core/internal.h"
#include "ptrace/mechanism/mechanism.h"
#include "ptrace/mechanism/threads.h"

#define BASE_OPTS (PTRACE_O_TRACEEXEC | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK)

long pt__follow_opts(const struct pt_tracee *t)
{
	/* Clone events stay while clone stacks are asked for (the threadcreate
	 * profile's: the parent's stack is copied in its clone event). */
	return BASE_OPTS | (t->no_clone_stops && !t->clone_stacks ? 0 : PTRACE_O_TRACECLONE);
}

void pt__follow_fix(struct pt_tracee *t, struct pt_thread *th)
{
	long want = pt__follow_opts(t);

	if (th->opts == want || ptrace(PTRACE_SETOPTIONS, th->tid, 0, want))
		return;
	th->opts = want;
	t->st.options_set++;
}

void pt__follow_fix_tid(struct pt_tracee *t, pid_t tid, long parent_opts)
{
	long want = pt__follow_opts(t);

	if (parent_opts != want && !ptrace(PTRACE_SETOPTIONS, tid, 0, want))
		t->st.options_set++;
}

/* 1 if th is to be interrupted for its clone events: it lacks them, and
 * they are wanted (without them it changes at its next stop of any kind,
 * its first clone event included: see follow.h). */
static int stale(long want, const struct pt_thread *th)
{
	return (want & PTRACE_O_TRACECLONE) && th->opts != want && !(th->flags & PT_TH_GONE);
}

/* How long an interrupt may go unanswered before the next thread is
 * interrupted anyway: a thread that never stops for it (a leader that
 * ended before its threads, a long uninterruptible sleep) must not keep
 * the others from their clone events. */
#define REOPT_WAIT_NS 50000000ull

void pt__follow_interrupt_stale(struct pt_tracee *t)
{
	long want = pt__follow_opts(t);
	struct pt_thread *next = NULL;
	uint64_t now = 0;

	if (!t->reopt)
		return;
	if (t->detaching) {
		t->reopt = 0;
		return;
	}
	for (size_t i = 0; i < t->n; i++) {
		struct pt_thread *th = t->th[i];

		if (!stale(want, th))
			continue;
		if (th->flags & PT_TH_INTERRUPTING) {
			if (!now)
				now = pt__now_ns();
			if (now - th->t_interrupt < REOPT_WAIT_NS)
				return;   /* one at a time: its stop comes first */
			continue;   /* overdue: given its options when it stops */
		}
		if (!next)
			next = th;
	}
	if (!next) {
		t->reopt = 0;
		return;
	}
	if (!ptrace(PTRACE_INTERRUPT, next->tid, 0, 0)) {
		next->flags |= PT_TH_INTERRUPTING;
		next->t_interrupt = now ? now : pt__now_ns();
	} else {
		next->opts = want;   /* gone (its end comes): not waited for */
	}
}

int pt__follow_seize(struct pt_tracee *t, pid_t tid, int born)
{
	long opts = pt__follow_opts(t);
	struct pt_thread *th;
	int err;

	/* (over the cap, before the seize: a running thread cannot be
	 * detached without a stop) */
	if (t->n >= (size_t)t->o.max_threads)
		return -E2BIG;
	if (ptrace(PTRACE_SEIZE, tid, 0, opts) < 0)
		return -errno;
	if ((err = pt__threads_add(t, tid, born))) {
		/* (no memory: it goes on traced, unknown, until its first
		 * stop lets it go: tracer.c) */
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return err;
	}
	if ((th = pt_threads_find(t, tid)))
		th->opts = opts;
	return 0;
}
