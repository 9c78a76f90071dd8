/* The stop cycle (ptrace/mechanism/stop.h) on a real child of ours (kid.h):
 * a stop's capture holds the child's own registers and the words it wrote
 * on its stack, unwound through its own functions, and the child runs
 * again at once; a tick's stop that comes after the tick is captured when
 * it comes and reported with the next, through the tick's ops, even if a
 * batch looked at the leader's events meanwhile; copies of a
 * running thread's stack (perf_event's) are unwound as one batch, what
 * lies beyond a short copy read from the thread's memory. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/user.h>

#include "ptrace/mechanism/batch.h"
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

TEST(stop_a_late_stop_of_the_leader_outlives_a_batch_that_looks_for_an_exec)
{
	struct kid k;
	struct rec r;
	struct pt_stop_ops ops;
	struct pt_thread *th;
	uint64_t stops;

	kid_pin();
	kid_start(&k, KID_SPIN);
	KID_UNTIL(k.tr, k.pg->spins > 0);
	th = kid_thread(&k);   /* the leader */
	ops = rec_ops(&r, k.t, k.pg);
	ASSERT_EQ(kid_tick_late(&k, th, &ops), 0);
	memset(&r, 0, sizeof(r));
	r.t = k.t;
	r.pg = k.pg;
	stops = stats(&k).stops;
	/* The stop is there (we slept, the kid ran into it), not yet polled... */
	KID_UNTIL(NULL, kid_state(k.pid, k.pid) == 't');
	/* ...when a batch (perf_event copies, none here) ends with its check
	 * for an exec, which looks at the leader's events. */
	ASSERT_EQ(pt_stop_report_copies(k.t, 0, &ops), 0);
	/* The stop is still ours to capture, not let go without its sample
	 * (its CPU would pile onto the next). */
	KID_UNTIL(k.tr, stats(&k).stops == stops + 1);
	pt_stop_report_late(k.t);
	ASSERT_EQ(r.n, 1);
	assert_kid_kid_in_loop(&k, &r, 0);
	kid_end(&k);
}

/* Starts a KID_SPIN kid, stops it once in its loop (recorded in r) and
 * copies its stack there into stack (size bytes): what the kernel would
 * copy at a sample, the kid running on in the same frame. Returns the
 * copy's length; *th is the kid's thread. */
static ssize_t kid_loop_copy(struct kid *k, struct rec *r, struct pt_thread **th, uint8_t *stack, size_t size)
{
	struct pt_stop_ops ops;
	struct pt_thread *sel[1];
	ssize_t len;

	kid_start(k, KID_SPIN);
	ops = rec_ops(r, k->t, k->pg);
	KID_UNTIL(k->tr, k->pg->spins > 0);
	*th = sel[0] = kid_thread(k);
	ASSERT_EQ(pt_stop_collect(k->t, sel, 1, 1000000000ull, 1, &ops), 1);
	assert_kid_kid_in_loop(k, r, 0);
	len = pt_mem_read_partial(k->pid, r->regs[0].rsp, stack, size);
	ASSERT(len >= 256);
	return len;
}

TEST(stop_copies_of_a_running_stack_unwind_as_the_stop_did)
{
	struct kid k;
	struct rec r, c;
	struct pt_stop_ops cops;
	struct pt_thread *th;
	struct user_regs_struct regs;
	static uint8_t stack[16384];
	ssize_t len = kid_loop_copy(&k, &r, &th, stack, sizeof(stack));

	regs = r.regs[0];
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

/* glibc's clone and clone3 after their system call (clone.S, clone3.S),
 * never run: as there, no unwind info covers it. */
__asm__(".text\n"
	"test_clone_tail:\n\t"
	"syscall\n\t"
	"test %rax, %rax\n\t"
	"jl 1f\n\t"
	"je 1f\n\t"
	"ret\n"
	"1:\thlt\n");
extern const char test_clone_tail[];

TEST(stop_clone_tail_is_known_at_each_of_its_instructions)
{
	uint8_t code[64] = { 0 };
	const size_t at[] = { 0, 3, 5, 7 };

	memcpy(code + 16, test_clone_tail, 11);
	ASSERT_EQ(memcmp(code + 16, "\x0f\x05\x48\x85\xc0\x7c\x03\x74\x01\xc3", 10), 0);   /* glibc's bytes */
	for (size_t pc = 16; pc < 16 + 12; pc++) {
		int want = 0;

		for (size_t i = 0; i < 4; i++)
			want |= pc == 16 + 2 + at[i];
		ASSERT_EQ(pt__batch_clone_tail(code + pc - PT_CLONE_TAIL_BACK), want);
	}
	code[16 + 9] = 0x90;   /* no ret: some other code */
	ASSERT_EQ(pt__batch_clone_tail(code + 16 + 2 + 3 - PT_CLONE_TAIL_BACK), 0);
}

/* A thread stopped by ptrace in clone or clone3 or back from it: the
 * parent whatever the call's state (its child's tid, -ENOSYS at the clone
 * event, -ERESTARTNOINTR where a tick's interrupt aborted the call to be
 * made again, -EAGAIN where it failed: each unwinds through its caller),
 * not the child (0), nor a thread in another call or none. */
TEST(stop_a_parent_in_clone_is_told_from_its_child_by_rax)
{
	const long long rax[] = { 4242, -38, -513, -11, 0 };
	const long long orig[] = { SYS_clone3, SYS_clone, SYS_read, -1 };

	for (size_t i = 0; i < sizeof(orig) / sizeof(orig[0]); i++) {
		for (size_t j = 0; j < sizeof(rax) / sizeof(rax[0]); j++) {
			struct user_regs_struct regs = { 0 };

			regs.orig_rax = (unsigned long long)orig[i];
			regs.rax = (unsigned long long)rax[j];
			ASSERT_EQ(pt__batch_clone_parent_regs(&regs), i < 2 && rax[j] != 0);
		}
	}
}

/* A thread stopped on the instructions after clone's system call, in user
 * mode: the parent (rax its child's tid) unwinds through the word at its
 * stack pointer to its callers; the child (rax 0) has none. Here the kid's
 * stack at its loop, cut at its loop frame's return address, stands for
 * the parent's: below that word lie kid_main's and kid_fork's frames.
 * Without unwind info there, libunwind falls back on the frame-pointer
 * chain, which a child's rbp (0 here) does not give. */
TEST(stop_a_parent_on_its_way_out_of_clone_unwinds_to_its_callers)
{
	struct kid k;
	struct rec r, c;
	struct pt_stop_ops cops;
	struct pt_thread *th;
	struct user_regs_struct regs;
	static uint8_t stack[16384];
	const size_t at[] = { 0, 3, 5, 7 };
	ssize_t len = kid_loop_copy(&k, &r, &th, stack, sizeof(stack));
	size_t ret = 0;
	int fp;

	ASSERT(r.smp[0].n >= 3);
	regs = r.regs[0];
	while (ret + 8 <= (size_t)len && memcmp(stack + ret, (const void *)&k.pg->ret_at, 8))
		ret += 8;
	ASSERT(ret + 8 <= (size_t)len);
	/* The parent's rbp is its caller's: the kid's own where its loop's
	 * frame keeps none. Where it keeps one (a build with frame pointers:
	 * rbp at the word below its return address), the callers' chain
	 * would answer before the clone rule and their unwind info reads
	 * their CFA from rbp: the parent's stack is then checked up to its
	 * caller's frame only, with rbp 0 (glibc keeps no frame pointer). */
	fp = ret >= 8 && regs.rbp == regs.rsp + ret - 8;
	for (int child = 0; child < 2; child++) {
		for (size_t i = 0; i < 4; i++) {
			struct user_regs_struct at_tail = regs;

			at_tail.rip = (uint64_t)(uintptr_t)test_clone_tail + 2 + at[i];
			at_tail.rsp = regs.rsp + ret;
			at_tail.rax = child ? 0 : 4242;
			at_tail.orig_rax = (uint64_t)-1;   /* in user mode: no system call */
			at_tail.rbp = child || fp ? 0 : regs.rbp;
			cops = rec_ops(&c, k.t, k.pg);
			ASSERT_OK(pt_stop_put_copy(k.t, 0, th, &at_tail, stack + ret, (size_t)len - ret, 1));
			ASSERT_EQ(pt_stop_report_copies(k.t, 1, &cops), 1);
			ASSERT_EQ(c.n, 1);
			ASSERT_U64_EQ(c.frames[0][0], at_tail.rip);
			if (child) {
				/* (at the return itself a kernel's sample, its
				 * registers those the thread entered with, is told
				 * by the word at its SP: a child's new stack holds
				 * no return address, this copy does; a child never
				 * reaches the ret, which the unwinder reads as a
				 * leaf's) */
				if (at[i] == 3 || at[i] == 5)
					ASSERT_EQ(c.smp[0].n, 1);
				continue;
			}
			ASSERT(c.smp[0].n >= 2);
			ASSERT_U64_EQ(c.frames[0][1], k.pg->ret_at - 1);
			if (fp)
				continue;
			ASSERT_EQ(c.smp[0].n, r.smp[0].n);
			for (int f = 1; f < c.smp[0].n; f++)
				ASSERT_U64_EQ(c.frames[0][f], r.frames[0][f]);
		}
	}
	kid_end(&k);
}
