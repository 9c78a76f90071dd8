/* The perf_event ring (ptrace/perf/perfev.h) on a busy child of ours: samples
 * come with its registers, its count and a copy of its stack that holds
 * what the child wrote there; a drain stopped by its callback leaves the
 * rest for the next. Skipped where perf_event_open is refused. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ptrace/perf/perfev.h"
#include "tests/harness.h"

#define MARK 0x5eed5eed0badcafeull
#define PERIOD_NS 200000ull

/* Spins with MARK in a local of this frame, on the sampled stack. */
static __attribute__((noinline, noreturn)) void spin(int fd)
{
	volatile uint64_t mark[4] = { MARK, MARK, MARK, MARK };
	volatile uint64_t n = 0;

	if (write(fd, "x", 1) != 1)
		_exit(1);
	for (;;)
		n += mark[n & 3] != 0;
}

static pid_t busy_child(void)
{
	int p[2];
	char c;
	pid_t pid;

	ASSERT(pipe(p) == 0);
	if ((pid = fork()) == 0) {
		/* dies with the test, whatever ends it (make torture's failed
		 * assertions exit without end_child) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		spin(p[1]);
	}
	close(p[1]);
	ASSERT(read(p[0], &c, 1) == 1);
	close(p[0]);
	return pid;
}

static void end_child(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Waits until the event has counted `ns` of the child's CPU (5 s at most). */
static void wait_count(struct pt_perfev *e, uint64_t ns)
{
	struct timespec ts = { 0, 1000000 };
	uint64_t c = 0;

	for (int i = 0; i < 5000 && c < ns; i++) {
		ASSERT_OK(pt_perfev_count(e, &c));
		nanosleep(&ts, NULL);
	}
	ASSERT(c >= ns);
}

struct seen {
	pid_t tid;
	int n, marked, stop_after;
	uint64_t last_count, max_len;
	int bad;
};

static int on_sample(void *arg, const struct pt_perfev_sample *smp)
{
	struct seen *s = arg;
	struct user_regs_struct regs;

	if (s->stop_after && s->n == s->stop_after)
		return 1;
	pt_perfev_regs(smp, &regs);
	if (smp->tid != s->tid || !smp->has_regs || !regs.rip || !regs.rsp || smp->count < s->last_count ||
	    !smp->stack_len || smp->stack_len > 8192)
		s->bad++;
	for (size_t off = 0; off + 8 <= smp->stack_len; off += 8) {
		uint64_t w;

		memcpy(&w, smp->stack + off, 8);
		if (w == MARK) {
			s->marked++;
			break;
		}
	}
	s->last_count = smp->count;
	if (smp->stack_len > s->max_len)
		s->max_len = smp->stack_len;
	s->n++;
	return 0;
}

static struct pt_perfev *open_on(pid_t pid)
{
	struct pt_perfev_cfg cfg = { .period_ns = PERIOD_NS, .stack_bytes = 8192 };
	struct pt_perfev *e = NULL;
	char why[320];

	if (pt_perfev_probe(pid, &cfg, why, sizeof(why))) {
		end_child(pid);
		SKIP("%s", why);
	}
	ASSERT_OK(pt_perfev_open(&e, pid, &cfg));
	return e;
}

TEST(perf_event_ring_holds_registers_count_and_stack)
{
	pid_t pid = busy_child();
	struct pt_perfev *e = open_on(pid);
	struct seen s = { .tid = pid };
	uint64_t lost = 0, count;
	int n;

	wait_count(e, 20 * PERIOD_NS);
	ASSERT_OK(pt_perfev_enable(e, 0));   /* nothing more while we read */
	ASSERT_OK(pt_perfev_count(e, &count));
	n = pt_perfev_drain(e, on_sample, &s, &lost);
	ASSERT_EQ(n, s.n);
	ASSERT(s.n >= 2);
	ASSERT(s.last_count <= count);
	/* The ring holds a few samples: the kernel counts the rest, and says
	 * how many once there is room again. */
	ASSERT_OK(pt_perfev_enable(e, 1));
	wait_count(e, count + 4 * PERIOD_NS);
	ASSERT_OK(pt_perfev_enable(e, 0));
	n = pt_perfev_drain(e, on_sample, &s, &lost);
	end_child(pid);
	ASSERT(n >= 1);
	ASSERT(lost >= count / PERIOD_NS / 2 - (uint64_t)s.n);
	ASSERT_EQ(s.bad, 0);
	/* Each copy starts at the SP of spin's frame, which holds the mark. */
	ASSERT_EQ(s.marked, s.n);
	ASSERT_EQ(pt_perfev_stack_bytes(e), 8192);
	pt_perfev_close(e);
}

TEST(perf_event_drain_stopped_leaves_the_rest)
{
	pid_t pid = busy_child();
	struct pt_perfev *e = open_on(pid);
	struct seen s = { .tid = pid, .stop_after = 1 };
	uint64_t lost = 0;
	int n;

	wait_count(e, 4 * PERIOD_NS);
	ASSERT_OK(pt_perfev_enable(e, 0));
	n = pt_perfev_drain(e, on_sample, &s, &lost);
	ASSERT_EQ(n, 1);
	s.stop_after = 0;
	n = pt_perfev_drain(e, on_sample, &s, &lost);
	ASSERT(n >= 1);
	ASSERT_EQ(s.n, 1 + n);
	ASSERT_EQ(pt_perfev_drain(e, on_sample, &s, &lost), 0);   /* emptied */
	end_child(pid);
	pt_perfev_close(e);
}

TEST(perf_event_open_refuses_bad_settings)
{
	struct pt_perfev_cfg cfg = { .period_ns = PERIOD_NS, .stack_bytes = 100 };
	struct pt_perfev *e = NULL;

	ASSERT_EQ(pt_perfev_open(&e, getpid(), &cfg), -EINVAL);   /* not a multiple of 8 */
	cfg.stack_bytes = 65536;
	ASSERT_EQ(pt_perfev_open(&e, getpid(), &cfg), -EINVAL);   /* over the kernel's u16 */
	cfg.stack_bytes = 8192;
	cfg.period_ns = 0;
	ASSERT_EQ(pt_perfev_open(&e, getpid(), &cfg), -EINVAL);
	ASSERT(e == NULL);
}

/* ---- threads followed without a stop -------------------------------------- */

struct forks {
	pid_t parent, child;
	uint64_t born_ns;
	int n;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_fork(void *arg, pid_t parent, pid_t child, uint64_t born_ns)
{
	struct forks *k = arg;

	k->parent = parent;
	k->child = child;
	k->born_ns = born_ns;
	k->n++;
}

static void *quick(void *arg)
{
	*(pid_t *)arg = gettid();
	return NULL;
}

TEST(perf_event_tells_the_threads_its_thread_creates)
{
	struct forks k = { 0 };
	struct pt_perfev_cfg cfg = { .period_ns = 100 * PERIOD_NS, .stack_bytes = 1024,
				     .on_fork = on_fork, .fork_arg = &k };
	struct pt_perfev *e = NULL;
	uint64_t lost = 0, t0, t1;
	pthread_t th;
	pid_t tid = 0;
	char why[320];

	if (pt_perfev_probe(gettid(), &cfg, why, sizeof(why)))
		SKIP("%s", why);
	ASSERT_OK(pt_perfev_open(&e, gettid(), &cfg));
	t0 = mono_ns();
	ASSERT_EQ(pthread_create(&th, NULL, quick, &tid), 0);
	t1 = mono_ns();
	ASSERT_EQ(pthread_join(th, NULL), 0);
	ASSERT(pt_perfev_drain(e, NULL, NULL, &lost) >= 0);
	ASSERT_EQ(k.n, 1);
	ASSERT_EQ(k.parent, gettid());
	ASSERT_EQ(k.child, tid);
	/* stamped at the birth (before pthread_create returned; the drain
	 * comes after), on the clock podprof reads */
	ASSERT(k.born_ns >= t0 && k.born_ns <= t1);
	pt_perfev_close(e);
}

/* A thread that stays until a byte comes on its pipe. */
static void *waits(void *arg)
{
	char c;

	return read(*(int *)arg, &c, 1) == 1 ? NULL : arg;
}

/* The wake event: its fd is readable as soon as its thread creates one (a
 * sampler asleep in poll is woken) while the new thread still runs (it
 * cannot end before the test lets it), and its drain tells parent and
 * child; nothing else wakes it. */
TEST(perf_event_wakes_at_each_thread_its_thread_creates)
{
	struct forks k = { 0 };
	struct pt_perfev_cfg cfg = { .period_ns = 100 * PERIOD_NS, .stack_bytes = 1024,
				     .on_fork = on_fork, .fork_arg = &k };
	struct pt_perfev *e = NULL;
	uint64_t lost = 0;
	struct pollfd p;
	char why[320];
	int pfd[2];

	if (pt_perfev_probe(gettid(), &cfg, why, sizeof(why)))
		SKIP("%s", why);
	ASSERT_OK(pt_perfev_open_forks(&e, gettid(), &cfg));
	ASSERT_EQ(pipe(pfd), 0);
	p = (struct pollfd){ .fd = pt_perfev_fd(e), .events = POLLIN };
	ASSERT_EQ(poll(&p, 1, 0), 0);   /* nothing yet */
	for (int i = 0; i < 3; i++) {
		pthread_t th;
		void *ret = pfd;

		k.n = 0;
		ASSERT_EQ(pthread_create(&th, NULL, waits, &pfd[0]), 0);
		ASSERT_EQ(poll(&p, 1, 5000), 1);
		ASSERT(p.revents & POLLIN);
		ASSERT(pt_perfev_drain(e, NULL, NULL, &lost) >= 0);
		ASSERT_EQ(k.n, 1);
		ASSERT_EQ(k.parent, gettid());
		ASSERT(k.child > 0 && k.child != gettid());
		ASSERT_EQ(syscall(SYS_tgkill, getpid(), k.child, 0), 0);   /* still there */
		ASSERT_EQ(write(pfd[1], "x", 1), 1);
		ASSERT_EQ(pthread_join(th, &ret), 0);
		ASSERT(ret == NULL);
		ASSERT_EQ(poll(&p, 1, 0), 0);   /* its end woke nobody: not its parent's record */
	}
	ASSERT_EQ(lost, 0);
	close(pfd[0]);
	close(pfd[1]);
	pt_perfev_close(e);
}
