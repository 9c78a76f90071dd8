/* A thread stopped by the CPU it uses (ptrace/perf/cpuwake.h), on a traced
 * busy child of ours: it stops where it runs after each period of its own
 * CPU, its signal told apart from one anybody sends it, and a signal left
 * behind untraced does it no harm. Skipped where perf_event_open is
 * refused. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ptrace/perf/cpuwake.h"
#include "ptrace/perf/perfev.h"
#include "tests/harness.h"
#include "tests/unit/kid.h"

#define MS 1000000ull

static void on_urg(int sig)
{
	(void)sig;
}

/* A spinning kid (tests/unit/kid.h), untraced yet: its pid. */
static pid_t spinner(struct kid *k)
{
	kid_fork(k, KID_SPIN);
	return k->pid;
}

/* Kills and reaps it, in whatever stop of ours it may be. */
static void end(struct kid *k)
{
	kill(k->pid, SIGKILL);
	kid_end(k);
}

/* pid's CPU so far (schedstat's first field), in ns. */
static uint64_t cpu_of(pid_t pid)
{
	char path[64];
	unsigned long long ns = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	if ((f = fopen(path, "r"))) {
		if (fscanf(f, "%llu", &ns) != 1)
			ns = 0;
		fclose(f);
	}
	return ns;
}

/* Whether this process may open such events at all (and with kernel
 * time or without). */
static int allowed(pid_t pid, int *exclude_kernel)
{
	struct pt_perfev_cfg cfg = { .period_ns = 10 * MS, .stack_bytes = 8 };
	char why[320];

	if (pt_perfev_probe(pid, &cfg, why, sizeof(why)))
		return 0;
	*exclude_kernel = cfg.exclude_kernel;
	return 1;
}

/* Waits for pid's next stop; returns its signal at a signal-delivery stop
 * (0 for any other stop or an end), its siginfo in *si. */
static int next_signal_stop(pid_t pid, siginfo_t *si)
{
	int status;

	if (waitpid(pid, &status, __WALL) != pid || !WIFSTOPPED(status) || (status >> 16))
		return 0;
	memset(si, 0, sizeof(*si));
	if (ptrace(PTRACE_GETSIGINFO, pid, 0, si))
		return 0;
	return WSTOPSIG(status);
}

TEST(cpuwake_stops_a_traced_thread_after_each_period_of_its_cpu)
{
	struct kid k;
	pid_t pid = spinner(&k);
	int ek = 0, fd, sig = SIGURG;
	uint64_t at[4], cpu0, cpu0_after, count = 0;
	siginfo_t si;

	if (!allowed(pid, &ek)) {
		end(&k);
		SKIP("perf_event_open refused here");
	}
	ASSERT(ptrace(PTRACE_SEIZE, pid, 0, 0) == 0);
	/* (the child spins meanwhile: the open is between these two) */
	cpu0 = cpu_of(pid);
	fd = pt_cpuwake_open(pid, sig, 5 * MS, ek);
	cpu0_after = cpu_of(pid);
	ASSERT(fd >= 0);
	for (int n = 0; n < 4; n++) {
		ASSERT_EQ(next_signal_stop(pid, &si), sig);
		ASSERT(pt_cpuwake_ours(&si, sig, fd));
		at[n] = cpu_of(pid) - cpu0;
		/* Armed in the stop, before it runs again (armed after, its
		 * first moments would go uncounted), and resumed with its
		 * signal suppressed: the child never sees it. */
		ASSERT_OK(pt_cpuwake_arm(fd, 10 * MS));
		ASSERT(ptrace(PTRACE_CONT, pid, 0, 0) == 0);
	}
	ASSERT_OK(pt_cpuwake_count(fd, &count));
	fprintf(stderr, "  stops at %.2f %.2f %.2f %.2f ms of its CPU; counted %.2f ms\n",
		(double)at[0] / 1e6, (double)at[1] / 1e6, (double)at[2] / 1e6, (double)at[3] / 1e6,
		(double)count / 1e6);
	/* At 5, 15, 25, 35 ms of the CPU it used, whatever the wall clock
	 * did (a loaded machine keeps it off its core: no matter). */
	for (int n = 0; n < 4; n++) {
		uint64_t want = 5 * MS + (uint64_t)n * 10 * MS;

		ASSERT(at[n] + MS / 2 >= want);
		ASSERT(at[n] <= want + (cpu0_after - cpu0) + 2 * MS);
	}
	/* The event counted from its open, somewhere between the two
	 * readings of its CPU before and after, and not from each overflow
	 * (it disables itself) to its stop: at[3] less the gap, less up to
	 * 500 us a stop (0.55-1.03 ms for the four beside two busy loops,
	 * ASan). A period not counted would be 10 ms. */
	ASSERT(count + (cpu0_after - cpu0) + 2 * MS >= at[3] && count <= at[3] + 2 * MS);
	close(fd);
	end(&k);
}

TEST(cpuwake_signal_is_told_from_one_anybody_sends)
{
	struct kid k;
	pid_t pid = spinner(&k);
	int ek = 0, fd, sig = SIGURG, status;
	siginfo_t si;

	if (!allowed(pid, &ek)) {
		end(&k);
		SKIP("perf_event_open refused here");
	}
	ASSERT(ptrace(PTRACE_SEIZE, pid, 0, 0) == 0);
	fd = pt_cpuwake_open(pid, sig, 60000 * MS, ek);   /* not within this test */
	ASSERT(fd >= 0);
	ASSERT(kill(pid, SIGURG) == 0);
	ASSERT_EQ(next_signal_stop(pid, &si), SIGURG);
	ASSERT(!pt_cpuwake_ours(&si, sig, fd));
	ASSERT_EQ(si.si_code, SI_USER);
	/* A signal of the target's own is delivered (SIGURG's default: ignored). */
	ASSERT(ptrace(PTRACE_CONT, pid, 0, SIGURG) == 0);
	ASSERT_EQ(waitpid(pid, &status, __WALL | WNOHANG), 0);   /* still running */
	close(fd);
	end(&k);
}

TEST(cpuwake_left_armed_untraced_does_the_target_no_harm)
{
	struct kid k;
	pid_t pid = spinner(&k);
	int ek = 0, fd, status, stopped = 0;
	uint64_t count = 0;
	struct timespec pause = { 0, 1000000 };

	if (!allowed(pid, &ek)) {
		end(&k);
		SKIP("perf_event_open refused here");
	}
	/* As if podprof died with the event armed: nobody traces the child,
	 * its signal is SIGURG, ignored by default. */
	fd = pt_cpuwake_open(pid, SIGURG, 2 * MS, ek);
	ASSERT(fd >= 0);
	/* Until the count stands still while the child runs: the event
	 * overflowed, signalled and disabled itself. */
	for (int i = 0; i < 5000 && !stopped; i++) {
		uint64_t c0 = 0, run0 = cpu_of(pid);

		ASSERT_OK(pt_cpuwake_count(fd, &c0));
		nanosleep(&pause, NULL);
		ASSERT_OK(pt_cpuwake_count(fd, &count));
		stopped = count == c0 && cpu_of(pid) > run0 + MS / 4;
	}
	ASSERT(stopped);
	ASSERT(count >= 2 * MS - MS / 10 && count < 4 * MS);
	ASSERT_EQ(waitpid(pid, &status, WNOHANG), 0);   /* it runs on */
	close(fd);
	end(&k);
}

TEST(cpuwake_signal_avoids_one_the_target_catches)
{
	struct kid k;
	pid_t plain = spinner(&k);
	char why[160];

	ASSERT_EQ(pt_cpuwake_signal(plain, why, sizeof(why)), SIGURG);
	ASSERT_STR_EQ(why, "SIGURG");
	/* this test's own process, catching SIGURG from now */
	signal(SIGURG, on_urg);
	ASSERT_EQ(pt_cpuwake_signal(getpid(), why, sizeof(why)), SIGWINCH);
	ASSERT(strstr(why, "catches SIGURG") != NULL);
	ASSERT_EQ(pt_cpuwake_open(plain, SIGURG, 1000, 0), -EINVAL);   /* under the kernel's least */
	ASSERT_EQ(pt_cpuwake_arm(-1, 10 * MS), -EBADF);
	end(&k);
}
