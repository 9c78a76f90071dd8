/* The stop cycle (ptrace/mechanism/stop.h) on a real child of ours (kid.h):
 * a stop's capture holds the child's own registers and the words it wrote
 * on its stack, unwound through its own functions, and the child runs
 * again at once; a tick's stop that comes after the tick is captured when
 * it comes and reported with the next, through the tick's ops; copies of a
 * running thread's stack (perf_event's) are unwound as one batch, what
 * lies beyond a short copy read from the thread's memory. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/user.h>

#include "ptrace/mechanism/mechanism.h"
#include "ptrace/mechanism/stop.h"
#include "ptrace/mechanism/tracee.h"
#include "ptrace/space/mem.h"
#include "ptrace/space/space.h"
#include "tests/harness.h"
#include "tests/unit/kid.h"

static const char *name_of(struct kid *k, uint64_t pc)
{
	const struct pt_module *mod;
	const char *name;

	pt_space_name(pt_tracee_space(k->t), pc, &name, &mod);
	return name ? name : "(none)";
}

static struct pt_tracee_stats stats(struct kid *k)
{
	struct pt_tracee_stats st;

	pt_tracee_stats(k->t, &st);
	return st;
}

/* Sample i of r is the kid in its loop, as it was: its registers, its
 * marks in the copy, its frames from its loop through kid_main and
 * kid_fork (which forked it). */
static void assert_kid_kid_in_loop(struct kid *k, const struct rec *r, int i)
{
	ASSERT_EQ(r->smp[i].pid, k->pid);
	ASSERT_EQ(r->smp[i].tid, k->pid);
	ASSERT(kid_in_loop(r->smp[i].pc));
	ASSERT_U64_EQ(r->smp[i].pc, r->regs[i].rip);
	ASSERT_U64_EQ(r->smp[i].sp, r->regs[i].rsp);
	ASSERT_U64_EQ(r->regs[i].r12, KID_R12);
	ASSERT_U64_EQ(r->regs[i].r13, KID_R13);
	ASSERT_EQ(r->marks[i], KID_NMARK);
	ASSERT(r->smp[i].n >= 3);
	ASSERT_U64_EQ(r->frames[i][0], r->smp[i].pc);
	ASSERT_U64_EQ(r->frames[i][1], k->pg->ret_at - 1);
	ASSERT_STR_EQ(name_of(k, r->frames[i][0]), "kid_spin");
	ASSERT_STR_EQ(name_of(k, r->frames[i][1]), "kid_main");
	ASSERT_STR_EQ(name_of(k, r->frames[i][2]), "kid_fork");
}

/* The kid turns its loop again (1000 turns more than now) with no more
 * done by its tracer: it was resumed. */
static void assert_kid_runs(struct kid *k)
{
	uint64_t spins = k->pg->spins;

	KID_UNTIL(NULL, k->pg->spins > spins + 1000);
}

TEST(stop_snapshot_captures_the_childs_registers_and_stack_and_resumes_it)
{
	struct kid k;
	struct rec r;
	struct pt_stop_ops ops;
	struct pt_thread *sel[1];

	kid_start(&k, KID_SPIN);
	ops = rec_ops(&r, k.t, k.pg);
	KID_UNTIL(k.tr, k.pg->spins > 0);   /* in its loop */
	sel[0] = kid_thread(&k);
	r.watch = &k.pg->spins;
	ASSERT_EQ(pt_stop_collect(k.t, sel, 1, 1000000000ull, 1, &ops), 1);
	ASSERT_EQ(r.n, 1);
	ASSERT_EQ(r.nkeep, 0);   /* a snapshot's stop is no tick's: nothing to judge */
	assert_kid_kid_in_loop(&k, &r, 0);
	ASSERT(r.ran[0]);        /* resumed before its stack was unwound and reported */
	ASSERT_EQ(r.ntiming, 1);
	ASSERT(r.pause_ns[0] > 0 && r.pause_ns[0] < 1000000000ull);
	assert_kid_runs(&k);
	ASSERT_EQ(stats(&k).stops, 1);
	ASSERT_EQ(stats(&k).thread_samples, 1);
	ASSERT_EQ(stats(&k).late_stops, 0);
	kid_end(&k);
}

TEST(stop_tick_captures_a_late_stop_when_it_comes_and_reports_it_next)
{
	struct kid k;
	struct rec r;
	struct pt_stop_ops ops;
	struct pt_thread *th;
	struct user_regs_struct regs = { 0 };
	uint8_t word[8] = { 0 };
	uint64_t stops;

	kid_pin();
	kid_start(&k, KID_SPIN);
	KID_UNTIL(k.tr, k.pg->spins > 0);
	th = kid_thread(&k);
	ops = rec_ops(&r, k.t, k.pg);
	/* The kid shares our core: it reaches the tick's interrupt after the tick. */
	ASSERT_EQ(kid_tick_late(&k, th, &ops), 0);
	memset(&r, 0, sizeof(r));   /* what earlier ticks took in time */
	r.t = k.t;
	r.pg = k.pg;
	r.watch = &k.pg->spins;
	stops = stats(&k).stops;
	/* It comes when the kid runs (we sleep), and a poll captures it... */
	KID_UNTIL(k.tr, stats(&k).stops == stops + 1);
	/* ...and resumes it at once; its sample waits for the next report. */
	ASSERT_EQ(r.n, 0);
	assert_kid_runs(&k);
	/* Meanwhile the slots are the late capture's: a perf_event sample
	 * waits rather than overwrite it. */
	ASSERT_EQ(pt_stop_put_copy(k.t, 0, th, &regs, word, sizeof(word), 1), -EBUSY);
	ASSERT_EQ(pt_stop_report_copies(k.t, 1, &ops), 0);
	ASSERT_EQ(r.n, 0);
	/* Reported through the tick's ops, judged by its keep as a tick's stop. */
	pt_stop_report_late(k.t);
	ASSERT_EQ(r.n, 1);
	ASSERT_EQ(r.nkeep, 1);
	assert_kid_kid_in_loop(&k, &r, 0);
	ASSERT(r.ran[0]);
	ASSERT(r.pause_ns[0] < 1000000000ull);
	pt_stop_report_late(k.t);   /* once */
	ASSERT_EQ(r.n, 1);
	ASSERT_EQ(stats(&k).thread_samples, 1);
	kid_end(&k);
}

TEST(stop_copies_of_a_running_stack_unwind_as_the_stop_did)
{
	struct kid k;
	struct rec r, c;
	struct pt_stop_ops ops, cops;
	struct pt_thread *sel[1], *th;
	struct user_regs_struct regs;
	static uint8_t stack[16384];
	ssize_t len;

	kid_start(&k, KID_SPIN);
	ops = rec_ops(&r, k.t, k.pg);
	KID_UNTIL(k.tr, k.pg->spins > 0);
	th = sel[0] = kid_thread(&k);
	ASSERT_EQ(pt_stop_collect(k.t, sel, 1, 1000000000ull, 1, &ops), 1);
	assert_kid_kid_in_loop(&k, &r, 0);
	/* The kid runs on in the same frame: what the kernel would copy at a
	 * sample there is these registers and the stack above them. */
	regs = r.regs[0];
	len = pt_mem_read_partial(k.pid, regs.rsp, stack, sizeof(stack));
	ASSERT(len >= 256);
	cops = rec_ops(&c, k.t, k.pg);
	/* Slot 0: the whole stack. Slot 1: its first 16 bytes, the rest read
	 * from the kid's memory as the unwind needs it. */
	ASSERT_OK(pt_stop_put_copy(k.t, 0, th, &regs, stack, (size_t)len, 1));
	ASSERT_OK(pt_stop_put_copy(k.t, 1, th, &regs, stack, 16, 0));
	ASSERT_EQ(pt_stop_report_copies(k.t, 2, &cops), 2);
	ASSERT_EQ(c.n, 2);
	for (int i = 0; i < 2; i++) {
		ASSERT_U64_EQ(c.smp[i].pc, regs.rip);
		ASSERT_U64_EQ(c.smp[i].sp, regs.rsp);
		ASSERT_EQ(c.smp[i].n, r.smp[0].n);
		for (int f = 0; f < c.smp[i].n; f++)
			ASSERT_U64_EQ(c.frames[i][f], r.frames[0][f]);
	}
	/* No stop: no pause. */
	ASSERT_EQ(c.ntiming, 2);
	ASSERT_EQ(c.pause_ns[0] + c.pause_ns[1], 0);
	ASSERT_EQ(stats(&k).stops, 1);   /* the snapshot's only */
	kid_end(&k);
}
