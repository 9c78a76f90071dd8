/* Unit-test runner: forks every registered test with a 5 s (or
 * UNIT_TIMEOUT) limit; exit 77 means skipped (SKIP: its reason is printed
 * on the test's line). Prints one line per test and a final "N passed, N
 * failed, N skipped". Args: test names to run (default
 * all).
 *
 * --torture[=MAX] (make torture): each test is first run once counting its
 * allocations (base/mem.h), then once more per allocation N with the Nth
 * failing; a run may end in a failed assertion (the code under test
 * reported the failure), never in a crash, a sanitizer's report, a leak
 * (LeakSanitizer's exit status 23, in runs that passed) or a timeout. A test
 * of more than MAX allocations (default 300) runs with the first MAX/2
 * failing and MAX/2 more drawn at random (--seed=S, default 1), and says so.
 * The runs' own output is dropped, but for the counting run's when it
 * fails (the test's own message, not only its exit status); --fail-at=N
 * runs the tests named once with the Nth allocation failing, output kept,
 * to see one. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/mem.h"
#include "tests/harness.h"

struct entry {
	const char *name;
	test_fn fn;
};

static struct entry tests[512];
static int ntests;
static int torture;
/* The reason a test's process gave for skipping (harness_skip), in memory
 * the runner shares with it. */
#define WHY_LEN 512
static char *skip_why;

void harness_register(const char *name, test_fn fn)
{
	if (ntests < 512)
		tests[ntests++] = (struct entry){ name, fn };
}

void harness_exit(int status)
{
	fflush(NULL);
	if (torture)
		_exit(status);
	exit(status);
}

void harness_skip(const char *fmt, ...)
{
	char why[WHY_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", why);
	if (skip_why)
		memcpy(skip_why, why, sizeof(why));
	harness_exit(77);
}

const char *harness_src(const char *path, char *buf, size_t len)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	/* SRC/build/FLAVOUR/unit-tests: three names up is the source tree. */
	if (n > 0) {
		self[n] = '\0';
		for (int up = 0; up < 3 && (slash = strrchr(self, '/')); up++)
			*slash = '\0';
		snprintf(buf, len, "%s/%s", self, path);
	} else {
		snprintf(buf, len, "%s", path);
	}
	return buf;
}

static const char *why_of_skip(void)
{
	return skip_why && skip_why[0] ? skip_why : "(no reason given)";
}

/* Runs test i in a child with the nth allocation failing (0: counting
 * only; -1: no injection). Returns its wait status; with count_fd >= 0 the
 * child writes how many allocations it made there. Its output goes to
 * out_fd if >= 0, else nowhere if quiet. */
static int run(int i, long long nth, int count_fd, int timeout, int quiet, int out_fd)
{
	int status;
	pid_t pid;

	fflush(stdout);
	if (skip_why)
		skip_why[0] = '\0';
	pid = fork();
	if (pid == 0) {
		int null = out_fd >= 0 ? dup(out_fd) : quiet ? open("/dev/null", O_WRONLY) : -1;

		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
			close(null);
		}
		alarm((unsigned)timeout);
		if (nth >= 0)
			base_mem_fail_at((uint64_t)nth);
		tests[i].fn();
		if (count_fd >= 0) {
			uint64_t n = base_mem_counted();

			(void)!write(count_fd, &n, sizeof(n));
		}
		base_mem_fail_off();
		exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return -1;
	return status;
}

static const char *describe(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "signal %d%s", WTERMSIG(status),
			 WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
	else if (WEXITSTATUS(status) == 23)
		snprintf(buf, len, "a leak (LeakSanitizer)");
	else
		snprintf(buf, len, "exit %d", WEXITSTATUS(status));
	return buf;
}

static uint64_t rng = 1;

static uint64_t next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Prints the last lines a run wrote into fd (its output), indented. */
static void show_output(int fd)
{
	char buf[2048];
	off_t end = lseek(fd, 0, SEEK_END);
	ssize_t n;

	if (end <= 0)
		return;
	lseek(fd, end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0, SEEK_SET);
	if ((n = read(fd, buf, sizeof(buf) - 1)) <= 0)
		return;
	buf[n] = '\0';
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
		printf("  | %s\n", line);
}

/* Test i under torture. Returns 1 passed, 0 failed, 77 skipped. */
static int torture_one(int i, int timeout, uint64_t max)
{
	uint64_t count = 0, runs = 0, sampled;
	int fds[2], status, out = memfd_create("unit-output", MFD_CLOEXEC);
	char why[64];

	if (pipe(fds)) {
		if (out >= 0)
			close(out);
		return 0;
	}
	status = run(i, 0, fds[1], timeout, 1, out);
	close(fds[1]);
	if (read(fds[0], &count, sizeof(count)) != sizeof(count))
		count = 0;
	close(fds[0]);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		printf("SKIP torture/%s: %s\n", tests[i].name, why_of_skip());
		if (out >= 0)
			close(out);
		return 77;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		printf("FAIL torture/%s: fails without a failing allocation (%s); its output:\n",
		       tests[i].name, describe(status, why, sizeof(why)));
		if (out >= 0) {
			show_output(out);
			close(out);
		}
		return 0;
	}
	if (out >= 0)
		close(out);
	sampled = count > max;
	for (uint64_t k = 1; k <= (sampled ? max : count); k++) {
		uint64_t nth = k;

		if (sampled && k > max / 2)
			nth = max / 2 + 1 + next_random() % (count - max / 2);
		status = run(i, (long long)nth, -1, timeout, 1, -1);
		runs++;
		if (WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 1 ||
					  WEXITSTATUS(status) == 77))
			continue;
		printf("FAIL torture/%s: allocation %llu of %llu failing: %s (again, with its "
		       "output: unit-tests --fail-at=%llu %s)\n", tests[i].name,
		       (unsigned long long)nth, (unsigned long long)count,
		       describe(status, why, sizeof(why)), (unsigned long long)nth, tests[i].name);
		return 0;
	}
	printf("PASS torture/%s (%llu allocations, %llu runs%s)\n", tests[i].name,
	       (unsigned long long)count, (unsigned long long)runs, sampled ? ", sampled" : "");
	return 1;
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0, skipped = 0, named = 0;
	int timeout = getenv("UNIT_TIMEOUT") ? atoi(getenv("UNIT_TIMEOUT")) : 5;
	uint64_t max = 300;
	long long fail_at = -1;

	skip_why = mmap(NULL, WHY_LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (skip_why == MAP_FAILED)
		skip_why = NULL;

	for (int a = 1; a < argc; a++) {
		if (!strncmp(argv[a], "--torture", 9)) {
			torture = 1;
			if (argv[a][9] == '=')
				max = strtoull(argv[a] + 10, NULL, 10);
		} else if (!strncmp(argv[a], "--fail-at=", 10)) {
			fail_at = strtoll(argv[a] + 10, NULL, 10);
		} else if (!strncmp(argv[a], "--seed=", 7)) {
			rng = strtoull(argv[a] + 7, NULL, 10) | 1;
		} else {
			named = 1;
		}
	}
	if (torture)
		printf("torture: every allocation of each test failing in turn, at most %llu runs "
		       "a test (seed %llu)\n", (unsigned long long)max, (unsigned long long)rng);
	for (int i = 0; i < ntests; i++) {
		int status, want = !named, r;
		char why[64];

		for (int a = 1; a < argc; a++)
			want |= !strcmp(argv[a], tests[i].name);
		if (torture && fail_at >= 0)
			torture = 0;
		if (!want)
			continue;
		if (torture) {
			r = torture_one(i, timeout, max < 2 ? 2 : max);
			passed += r == 1;
			skipped += r == 77;
			failed += r == 0;
			continue;
		}
		status = run(i, fail_at, -1, timeout, 0, -1);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			printf("PASS unit/%s\n", tests[i].name);
			passed++;
		} else if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
			printf("SKIP unit/%s: %s\n", tests[i].name, why_of_skip());
			skipped++;
		} else {
			printf("FAIL unit/%s (%s)\n", tests[i].name, describe(status, why, sizeof(why)));
			failed++;
		}
	}
	printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	return failed ? 1 : 0;
}
