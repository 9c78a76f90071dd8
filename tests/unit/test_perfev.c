/* The perf_event ring (ptrace/perf/perfev.h) on a busy child of ours: samples
 * come with its registers, its count and a copy of its stack that holds
 * what the child wrote there; a drain stopped by its callback leaves the
 * rest for the next. Skipped where perf_event_open is refused. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
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
