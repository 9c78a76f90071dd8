/* The sampling rule driven with synthetic thread states: a tracee whose
 * threads are not real, their /proc files (schedstat, syscall, stat) memfds
 * the test writes before each tick, and the mechanism's stop cycle stood in
 * for by a recorder (struct pt__rule_io), so that what the rule decides
 * (which threads a tick stops, with what weight, which stops it keeps,
 * what a state report or a thread dump answers from its cache) is seen
 * without a target or a ptrace call. */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>

#include "ptrace/core/internal.h"
#include "ptrace/sampler/rate.h"
#include "ptrace/rule/rule.h"
#include "ptrace/rule/snapshot.h"
#include "ptrace/mechanism/threads.h"
#include "tests/harness.h"
#include "tests/unit/fake.h"

#define PERIOD FAKE_PERIOD
#define TID0 FAKE_TID0

static int tick(void)
{
	struct pt_tick_cbs cbs = { .sample = fake_on_sample };

	F.nsel = F.nsampled = 0;
	return pt_rule_tick(F.r, PERIOD, &cbs);
}

static int selected(int i)
{
	for (int k = 0; k < F.nsel; k++)
		if (F.sel[k] == TID0 + i)
			return 1;
	return 0;
}

static uint64_t weight_of(int i)
{
	for (int k = 0; k < F.nsampled; k++)
		if (F.sampled[k] == TID0 + i)
			return F.weight[k];
	return 0;
}

TEST(rule_tick_stops_only_running_threads_that_used_a_period)
{
	fake_setup(3, 16);
	/* Thread 0 burns steadily and runs; 1 is blocked and idle; 2 runs a
	 * little. A thread never looked at is sampled at its first look if it
	 * runs, whatever its CPU (a short-lived worker is caught). */
	fake_running(0);
	fake_running(2);
	fake_burn(0, 2 * PERIOD, 0);
	fake_burn(2, PERIOD / 10, 0);
	ASSERT_EQ(tick(), 2);
	ASSERT(selected(0) && !selected(1) && selected(2));
	ASSERT_U64_EQ(weight_of(0), 2 * PERIOD);
	ASSERT_U64_EQ(weight_of(2), PERIOD / 10);
	/* Then each is due once it used a period since its last sample. */
	fake_burn(0, PERIOD, 0);
	fake_burn(2, PERIOD * 3 / 10, 0);
	ASSERT_EQ(tick(), 1);
	ASSERT(selected(0) && !selected(2));
	ASSERT_U64_EQ(weight_of(0), PERIOD);
	fake_burn(2, PERIOD * 8 / 10, 0);   /* 1.1 periods since its sample */
	ASSERT_EQ(tick(), 1);
	ASSERT(selected(2));
	ASSERT_U64_EQ(weight_of(2), PERIOD * 11 / 10);   /* all its CPU since, counted */
	/* A thread that used its period but is not running now waits. */
	fake_blocked(0, SYS_futex, 0x7000, 0x401234);
	fake_burn(0, 5 * PERIOD, 0);
	ASSERT_EQ(tick(), 0);
	fake_running(0);
	fake_burn(0, PERIOD / 2, 0);
	ASSERT_EQ(tick(), 1);
	ASSERT_U64_EQ(weight_of(0), 5 * PERIOD + PERIOD / 2);
	/* Its credit is kept to four periods: the next tick finds it due
	 * again, but not for the whole burst. */
	fake_teardown();
}

TEST(rule_credit_is_kept_to_four_periods)
{
	int samples = 0;

	fake_setup(1, 16);
	fake_running(0);
	fake_burn(0, PERIOD, 0);
	ASSERT_EQ(tick(), 1);   /* first look */
	/* 20 periods of CPU while blocked, then it runs again, a little. */
	fake_blocked(0, SYS_read, 0x7000, 0x401234);
	fake_burn(0, 20 * PERIOD, 0);
	ASSERT_EQ(tick(), 0);
	fake_running(0);
	for (int k = 0; k < 10; k++) {
		fake_burn(0, PERIOD / 100, 0);
		samples += tick();
	}
	/* one sample pays a period, then at most four more from the credit */
	ASSERT_EQ(samples, 5);
	fake_teardown();
}

TEST(rule_cpu_of_a_stop_that_gave_no_sample_goes_with_the_next)
{
	fake_setup(1, 16);
	fake_running(0);
	fake_burn(0, PERIOD, 0);
	ASSERT_EQ(tick(), 1);
	/* Selected, stopped, but its capture failed (or its batch was dropped,
	 * or its late stop found no room): no sample carried that period. */
	fake_burn(0, 2 * PERIOD, 0);
	F.lose = 1;
	ASSERT_EQ(tick(), 0);
	ASSERT(selected(0));
	fake_burn(0, PERIOD, 0);
	ASSERT_EQ(tick(), 1);
	ASSERT_U64_EQ(weight_of(0), 3 * PERIOD);   /* was PERIOD: two periods lost */
	fake_teardown();
}

TEST(rule_tick_takes_max_per_tick_and_rotates)
{
	int seen[5] = { 0 };

	fake_setup(5, 2);
	for (int i = 0; i < 5; i++)
		fake_running(i);
	for (int k = 0; k < 5; k++) {
		for (int i = 0; i < 5; i++)
			fake_burn(i, 2 * PERIOD, 0);
		ASSERT_EQ(tick(), 2);
		for (int i = 0; i < 5; i++)
			seen[i] += selected(i);
	}
	/* 10 stops over 5 threads: the start rotates, everyone gets a turn */
	for (int i = 0; i < 5; i++)
		ASSERT(seen[i] >= 1);
	fake_teardown();
}

/* A thread whose CPU did not move at its looks for a while (kept off its
 * core by a loaded machine) is "quiet": read after the others, only if
 * they leave room. With more running threads than max_per_tick the others
 * always fill the tick, so it was never looked at again and never sampled
 * while it ran (CI: one of four busy threads at --max-stopped 1 had no
 * sample in a 3 s profile). Its turn in the rotation now reads it. */
TEST(rule_a_quiet_thread_still_gets_its_turn_when_others_fill_the_tick)
{
	int turns = 0;

	fake_setup(4, 1);
	for (int i = 0; i < 4; i++)
		fake_running(i);
	for (int k = 0; k < 4; k++) {
		for (int i = 0; i < 4; i++)
			fake_burn(i, 2 * PERIOD, 0);
		ASSERT_EQ(tick(), 1);
	}
	/* Thread 1 last moved longer ago than the quiet threshold (20 ms). */
	pt__rt(F.th[1])->moved_at -= 1000000000ull;
	for (int k = 0; k < 16; k++) {
		for (int i = 0; i < 4; i++)
			fake_burn(i, 2 * PERIOD, 0);
		ASSERT_EQ(tick(), 1);
		turns += selected(1);
	}
	/* 16 stops over 4 equal threads: thread 1 gets its share. */
	ASSERT(turns >= 3);
	fake_teardown();
}

TEST(rule_skips_group_stopped_and_interrupted_threads)
{
	fake_setup(3, 16);
	for (int i = 0; i < 3; i++) {
		fake_running(i);
		fake_burn(i, 2 * PERIOD, 0);
	}
	F.th[0]->flags |= PT_TH_GROUPSTOP;
	F.th[1]->flags |= PT_TH_INTERRUPTING;   /* a stop of ours still pending */
	ASSERT_EQ(tick(), 1);
	ASSERT(!selected(0) && !selected(1) && selected(2));
	/* Back from the group-stop: sampled, with the CPU it used meanwhile. */
	F.th[0]->flags &= ~PT_TH_GROUPSTOP;
	F.th[1]->flags &= ~PT_TH_INTERRUPTING;
	fake_burn(0, PERIOD, 0);
	fake_burn(1, PERIOD, 0);
	ASSERT_EQ(tick(), 2);
	ASSERT(selected(0) && selected(1));
	/* Neither was sampled; the CPU each used is counted at its next look. */
	ASSERT_U64_EQ(weight_of(0), 3 * PERIOD);
	ASSERT_U64_EQ(weight_of(1), 3 * PERIOD);
	fake_teardown();
}

TEST(rule_signalled_thread_waits_until_it_had_a_core)
{
	fake_setup(1, 16);
	fake_running(0);
	fake_burn(0, PERIOD, 0);
	ASSERT_EQ(tick(), 1);
	/* Resumed with a signal (events.c), not on a core since: its
	 * schedstat's count of slices has not moved. */
	pt_thread_note_signal(F.th[0]);
	ASSERT(F.th[0]->flags & PT_TH_SIGNALLED);
	F.run[0] += 2 * PERIOD;   /* CPU moved, slices did not */
	fake_burn(0, 0, 0);
	ASSERT_EQ(tick(), 0);
	fake_burn(0, PERIOD, 0);       /* now it had a core */
	ASSERT_EQ(tick(), 1);
	ASSERT(!(F.th[0]->flags & PT_TH_SIGNALLED));
	ASSERT_U64_EQ(weight_of(0), 3 * PERIOD);   /* its CPU waited in its credit */
	fake_teardown();
}

TEST(rule_drops_a_stop_at_a_syscall_exit_after_a_wait_for_a_core)
{
	struct pt_rule_stats st;

	fake_setup(1, 16);
	fake_running(0);
	fake_burn(0, PERIOD, 0);
	ASSERT_EQ(tick(), 1);
	/* Stopped at the exit of getpid (completed: rax 1234) after waiting
	 * for a core: where the scheduler parked it, not where it runs.
	 * The stop is dropped, the thread stays due, its CPU kept. */
	F.regs.orig_rax = SYS_getpid;
	F.regs.rax = 1234;
	F.wait_at_stop = 50 * PERIOD;   /* the wait the stop's read sees */
	for (int k = 1; k <= 16; k++) {
		fake_burn(0, PERIOD, 0);
		tick();
		ASSERT_EQ(F.nsampled, 0);
		ASSERT(selected(0));
		pt_rule_stats(F.r, &st);
		ASSERT_EQ(st.preempted_stops, k);
	}
	/* At most 16 in a row: the next is kept, its place biased, so with
	 * only the period its selection paid for. */
	fake_burn(0, PERIOD, 0);
	tick();
	ASSERT_EQ(F.nsampled, 1);
	ASSERT_U64_EQ(weight_of(0), PERIOD);
	/* A stop in user code, or one our interrupt cut short (-EINTR), is
	 * always kept: the first carries what the biased one left. */
	F.regs.orig_rax = (uint64_t)-1;
	fake_burn(0, PERIOD, 0);
	tick();
	ASSERT_EQ(F.nsampled, 1);
	ASSERT_U64_EQ(weight_of(0), 17 * PERIOD);
	F.regs.orig_rax = SYS_nanosleep;
	F.regs.rax = (uint64_t)-EINTR;
	fake_burn(0, PERIOD, 0);
	tick();
	ASSERT_EQ(F.nsampled, 1);
	/* A stop after no wait (it was on a core) is kept too, while the
	 * thread's kernel time pays for it: the 17th stop above carried a
	 * period to getpid's exit, so with this one's, two periods in the
	 * kernel are needed (clock ticks of 10 ms, a period each; within
	 * half a sample). */
	F.regs.orig_rax = SYS_getpid;
	F.regs.rax = 1234;
	F.wait_at_stop = 0;
	fake_kernel_time(0, 2);
	fake_burn(0, PERIOD, 0);
	tick();
	ASSERT_EQ(F.nsampled, 1);
	pt_rule_stats(F.r, &st);
	ASSERT_EQ(st.preempted_stops, 16);
	ASSERT_EQ(st.unpaid_stops, 0);
	fake_teardown();
}

TEST(rule_syscall_exit_samples_carry_no_more_than_the_kernel_time)
{
	struct pt_rule_stats st;
	uint64_t at_exit = 0, total = 0;

	/* A thread on a core (no wait) whose every stop lands at the exit of
	 * clock_gettime, a call it makes after our interrupt (a slow one):
	 * with no kernel time since its first stop, those stops are dropped,
	 * up to 16 in a row, and the one after is kept with a period; the
	 * next in user code carries the rest. */
	fake_setup(1, 16);
	fake_running(0);
	F.regs.orig_rax = SYS_clock_gettime;
	F.regs.rax = 0;
	for (int k = 0; k < 17; k++) {
		fake_burn(0, PERIOD, 0);
		tick();
	}
	ASSERT_EQ(F.nsampled, 1);
	ASSERT_U64_EQ(weight_of(0), PERIOD);
	pt_rule_stats(F.r, &st);
	ASSERT_EQ(st.unpaid_stops, 16);
	ASSERT_EQ(st.preempted_stops, 0);
	/* Stops in user code are kept whatever the kernel time. */
	F.regs.orig_rax = (uint64_t)-1;
	fake_burn(0, PERIOD, 0);
	ASSERT_EQ(tick(), 1);
	ASSERT_U64_EQ(weight_of(0), 17 * PERIOD);
	fake_teardown();

	/* A thread that spends half its CPU in the kernel, three of whose
	 * four stops land at write's exit: those exits are kept as its
	 * kernel time pays for them, so they carry half its CPU, not three
	 * quarters. */
	fake_setup(1, 16);
	fake_running(0);
	for (int k = 0; k < 400; k++) {
		int sys = k % 4 != 0;

		F.regs.orig_rax = sys ? SYS_write : (uint64_t)-1;
		F.regs.rax = 4096;
		fake_burn(0, PERIOD, 0);
		if (k % 2)
			fake_kernel_time(0, 1);
		tick();
		for (int j = 0; j < F.nsampled; j++) {
			at_exit += sys ? F.weight[j] : 0;
			total += F.weight[j];
		}
	}
	ASSERT(total >= 390 * PERIOD);
	ASSERT(at_exit >= total * 45 / 100 && at_exit <= total * 55 / 100);
	pt_rule_stats(F.r, &st);
	ASSERT(st.unpaid_stops > 50);
	fake_teardown();
}

TEST(rule_drops_a_stop_at_a_signal_handlers_first_instruction)
{
	struct pt_rule_stats st;

	/* The registers the kernel enters a handler with: rsp at the frame,
	 * rdx the ucontext after the restorer's address, rsi the siginfo
	 * after it, rdi the signal, rax 0. The thread has not run the
	 * handler: its stop is dropped, it stays due. */
	fake_setup(1, 16);
	fake_running(0);
	F.regs.rsp = 0x7fff0000;
	F.regs.rdx = 0x7fff0008;
	F.regs.rsi = 0x7fff0008 + 304;
	F.regs.rdi = 27;
	F.regs.rax = 0;
	fake_burn(0, PERIOD, 0);
	tick();
	ASSERT(selected(0));
	ASSERT_EQ(F.nsampled, 0);
	pt_rule_stats(F.r, &st);
	ASSERT_EQ(st.handler_stops, 1);
	/* One instruction in (a push moved rsp): where it runs, kept, with
	 * the CPU of the dropped stop. */
	F.regs.rsp -= 8;
	fake_burn(0, PERIOD, 0);
	tick();
	ASSERT_EQ(F.nsampled, 1);
	ASSERT_U64_EQ(weight_of(0), 2 * PERIOD);
	fake_teardown();
}

TEST(rule_exec_starts_the_thread_over)
{
	fake_setup(1, 16);
	fake_running(0);
	fake_burn(0, PERIOD, 0);
	ASSERT_EQ(tick(), 1);
	fake_burn(0, PERIOD / 2, 0);   /* half a period of credit */
	ASSERT_EQ(tick(), 0);
	ASSERT(F.th[0]->rule->seen && F.th[0]->rule->credit_ns != PT_NEW_CREDIT);
	/* The thread exec'd: the mechanism drops the rule's part (its files
	 * are reopened: ours again, for the test). */
	{
		int fds[3] = { F.th[0]->sys_fd, F.th[0]->sched_fd, F.th[0]->stat_fd };

		F.th[0]->sys_fd = F.th[0]->sched_fd = F.th[0]->stat_fd = -1;
		pt__threads_reset(F.t, F.th[0]);
		pt_thread_close(F.th[0]);
		F.th[0]->sys_fd = fds[0];
		F.th[0]->sched_fd = fds[1];
		F.th[0]->stat_fd = fds[2];
	}
	ASSERT(!F.th[0]->rule->seen);
	/* A new program's thread: sampled at its first look if it runs. */
	fake_burn(0, PERIOD / 100, 0);
	ASSERT_EQ(tick(), 1);
	ASSERT(F.th[0]->rule->seen);
	fake_teardown();
}

TEST(rule_quiet_threads_are_read_only_until_the_cpu_adds_up)
{
	fake_setup(4, 16);
	fake_running(0);
	fake_burn(0, PERIOD, 0);
	ASSERT_EQ(tick(), 1);
	/* Threads 1-3 went quiet long ago; a full look happened just now. */
	for (int i = 1; i < 4; i++)
		F.th[i]->rule->moved_at = pt__now_ns() - 1000000000ull;
	F.r->full_at = pt__now_ns();
	/* Thread 3 burnt CPU and runs, but the process clock says only thread
	 * 0 ran: the quiet ones are not read, thread 3 waits for the next
	 * full look (its CPU is not lost, only counted later). */
	fake_burn(0, PERIOD, 0);
	fake_running(3);
	F.run[3] += PERIOD;
	fake_burn(3, 0, 0);
	ASSERT_EQ(tick(), 1);
	ASSERT(selected(0) && !selected(3));
	/* Once the clock shows more CPU than the busy threads account for,
	 * the quiet ones are read until it adds up. */
	fake_burn(0, PERIOD, 0);
	F.pcpu += PERIOD;   /* thread 3's, now seen by the clock */
	ASSERT_EQ(tick(), 2);
	ASSERT(selected(0) && selected(3));
	ASSERT_U64_EQ(weight_of(3), PERIOD);
	fake_teardown();
}

TEST(rule_state_report_stops_a_blocked_thread_once_per_wait)
{
	struct pt_tick_cbs cbs = { .state = fake_on_state };
	struct pt_rule_stats st;

	fake_setup(2, 16);
	F.regs.orig_rax = SYS_futex;
	F.regs.rsp = 0x7000;
	F.regs.rip = 0x401234;
	/* First sight blocked: stopped once (a snapshot's stop), its stack
	 * cached and reported. */
	F.nsel = F.nstates = 0;
	pt_rule_tick(F.r, PERIOD, &cbs);
	ASSERT_EQ(F.nsel, 2);
	ASSERT(F.snap);
	ASSERT_EQ(F.nstates, 2);
	ASSERT_EQ(F.states[0].state, 'S');
	ASSERT_EQ(F.states[0].syscall, SYS_futex);
	ASSERT(F.states[0].stack && F.states[0].n == 2);
	/* Still blocked, did not run: no stop, the cached stack. */
	F.nsel = F.nstates = 0;
	pt_rule_tick(F.r, PERIOD, &cbs);
	ASSERT_EQ(F.nsel, 0);
	ASSERT(F.states[1].stack);
	/* Thread 0 ran and blocked again in the same place: taken as cached,
	 * without a stop; thread 1 ran and blocked elsewhere: stopped. */
	fake_burn(0, PERIOD / 10, 0);
	fake_burn(1, PERIOD / 10, 0);
	fake_blocked(1, SYS_read, 0x6000, 0x405000);
	F.nsel = F.nstates = 0;
	pt_rule_tick(F.r, PERIOD, &cbs);
	ASSERT_EQ(F.nsel, 1);
	ASSERT(selected(1));
	pt_rule_stats(F.r, &st);
	ASSERT_EQ(st.snapshot_reused, 1);
	ASSERT_EQ(st.snapshot_stops, 3);
	ASSERT_EQ(F.states[0].ran, 1);
	ASSERT_EQ(F.states[1].syscall, SYS_read);
	fake_teardown();
}

/* A timed futex wait (pthread_mutex_timedlock) cut by our stop goes on as
 * restart_syscall. When the stop came too late to be kept (its thread
 * waited past the tick for a core), the next stop finds only the restart:
 * the thread still waits in futex, and says so. */
TEST(rule_state_report_names_the_call_a_late_stop_cut)
{
	struct pt_tick_cbs cbs = { .state = fake_on_state };

	fake_setup(1, 16);
	F.regs.rsp = 0x7000;
	F.regs.rip = 0x401234;
	F.lose = 1;   /* the stop is late: nothing captured */
	F.nsel = F.nstates = 0;
	pt_rule_tick(F.r, PERIOD, &cbs);
	ASSERT_EQ(F.nsel, 1);
	ASSERT_EQ(F.states[0].syscall, SYS_futex);
	ASSERT(!F.states[0].stack);
	/* It came later, and the wait went on as restart_syscall; this tick's
	 * stop captures it there. */
	fake_burn(0, 20000, 0);
	fake_blocked(0, SYS_restart_syscall, 0x7000, 0x401234);
	F.regs.orig_rax = SYS_restart_syscall;
	F.nsel = F.nstates = 0;
	pt_rule_tick(F.r, PERIOD, &cbs);
	ASSERT_EQ(F.nsel, 1);
	ASSERT_EQ(F.states[0].syscall, SYS_futex);
	ASSERT(F.states[0].stack);
	/* Still there, no stop: still futex, from the cache. */
	F.nsel = F.nstates = 0;
	pt_rule_tick(F.r, PERIOD, &cbs);
	ASSERT_EQ(F.nsel, 0);
	ASSERT_EQ(F.states[0].syscall, SYS_futex);
	/* It ran, and a signal not ours cut a wait of another place: that
	 * restart is not taken for the futex. */
	fake_burn(0, PERIOD / 10, 0);
	fake_running(0);
	F.nsel = F.nstates = 0;
	pt_rule_tick(F.r, PERIOD, &cbs);
	ASSERT_EQ(F.states[0].state, 'R');
	fake_burn(0, PERIOD / 10, 0);
	fake_blocked(0, SYS_restart_syscall, 0x6000, 0x405000);
	F.regs.rsp = 0x6000;
	F.regs.rip = 0x405000;
	F.nsel = F.nstates = 0;
	pt_rule_tick(F.r, PERIOD, &cbs);
	ASSERT_EQ(F.nsel, 1);
	ASSERT_EQ(F.states[0].syscall, SYS_restart_syscall);
	/* It sleeps anew in a call of its own: that call. */
	fake_burn(0, PERIOD / 10, 0);
	fake_blocked(0, SYS_nanosleep, 0x6000, 0x405000);
	F.regs.orig_rax = SYS_nanosleep;
	F.nsel = F.nstates = 0;
	pt_rule_tick(F.r, PERIOD, &cbs);
	ASSERT_EQ(F.states[0].syscall, SYS_nanosleep);
	fake_teardown();
}

static int dumped, dumped_cached;

static void on_dump(void *arg, const struct pt_sample *s)
{
	(void)arg;
	dumped++;
	dumped_cached += s->cached;
}

TEST(rule_thread_dump_answers_idle_threads_from_the_cache)
{
	int stopped, n;

	fake_setup(3, 16);
	F.regs.orig_rax = SYS_futex;
	fake_running(2);
	n = pt_snapshot_take(F.r, 1000000, on_dump, NULL, &stopped);
	ASSERT_EQ(n, 3);
	ASSERT_EQ(stopped, 3);
	ASSERT_EQ(dumped_cached, 0);
	/* Again: the two idle threads did not run, their stacks hold; the
	 * running one is stopped again; a group-stopped one answers 'T'. */
	dumped = dumped_cached = 0;
	fake_burn(2, PERIOD, 0);
	n = pt_snapshot_take(F.r, 1000000, on_dump, NULL, &stopped);
	ASSERT_EQ(n, 3);
	ASSERT_EQ(stopped, 1);
	ASSERT_EQ(dumped_cached, 2);
	F.th[0]->flags |= PT_TH_GROUPSTOP;
	dumped = dumped_cached = 0;
	fake_burn(2, PERIOD, 0);
	n = pt_snapshot_take(F.r, 1000000, on_dump, NULL, &stopped);
	ASSERT_EQ(n, 3);
	ASSERT_EQ(dumped_cached, 2);
	fake_teardown();
}

TEST(rule_budget_lowers_the_rate_and_restores_it)
{
	struct pt_rate r;
	uint64_t now = 1000000000ull, period = 1000000ull;   /* 1 kHz */
	int up = 0, down = 0;

	pt_rate_init(&r, 0.15);
	/* Ticks costing 40 % of a core: the rate halves until under 15 %. */
	for (int k = 0; k < 600; k++) {
		now += period * (uint64_t)r.div;
		up += pt_rate_account(&r, now, period, 400000ull * (uint64_t)r.div / (uint64_t)r.div) > 0;
	}
	ASSERT(up >= 1);
	ASSERT_EQ(r.div, 4);   /* 40 % -> 20 % -> 10 % */
	/* Then cheap ticks (1 %): back up, a halving at a time. */
	for (int k = 0; k < 3000; k++) {
		now += period * (uint64_t)r.div;
		down += pt_rate_account(&r, now, period, 10000ull) < 0;
	}
	ASSERT_EQ(r.div, 1);
	ASSERT(down >= 2);
}

/* A tick's stop that comes late (after the next tick) is still that tick's
 * sample: it says so (the sampler gives it to the sessions that took that
 * tick), with all its weight, even when the next tick takes no CPU sample
 * (a thread-states session's alone). */
TEST(rule_late_stop_keeps_its_tick_and_weight_past_a_states_tick)
{
	struct pt_tick_cbs cpu = { .sample = fake_on_sample, .tick = 41 };
	struct pt_tick_cbs states = { .state = fake_on_state, .tick = 42 };

	fake_setup(2, 16);
	fake_running(0);
	fake_burn(0, 2 * PERIOD, 0);
	F.defer = 1;   /* its stop comes after the next tick */
	ASSERT_EQ(pt_rule_tick(F.r, PERIOD, &cpu), 0);
	ASSERT(selected(0));
	ASSERT_EQ(F.nsampled, 0);
	F.defer = 0;
	fake_burn(0, PERIOD / 2, 0);
	pt_rule_tick(F.r, PERIOD, &states);
	ASSERT_EQ(F.nsampled, 1);
	ASSERT_EQ(F.sampled[0], TID0);
	ASSERT_U64_EQ(F.tick[0], 41);
	ASSERT_U64_EQ(F.weight[0], 2 * PERIOD);
	fake_teardown();
}
