/* Unit-test runner: forks every registered test with a 5 s (or
 * UNIT_TIMEOUT) limit; exit 77 means skipped. Prints one line per test and a
 * final "N passed, N failed, N skipped". Args: test names to run (default all). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness.h"

struct entry {
	const char *name;
	test_fn fn;
};

static struct entry tests[512];
static int ntests;

void harness_register(const char *name, test_fn fn)
{
	if (ntests < 512)
		tests[ntests++] = (struct entry){ name, fn };
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0, skipped = 0;
	int timeout = getenv("UNIT_TIMEOUT") ? atoi(getenv("UNIT_TIMEOUT")) : 5;

	for (int i = 0; i < ntests; i++) {
		int status, want = argc < 2;
		pid_t pid;

		for (int a = 1; a < argc; a++)
			want |= !strcmp(argv[a], tests[i].name);
		if (!want)
			continue;
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			alarm((unsigned)timeout);
			tests[i].fn();
			exit(0);
		}
		waitpid(pid, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			printf("PASS unit/%s\n", tests[i].name);
			passed++;
		} else if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
			printf("SKIP unit/%s\n", tests[i].name);
			skipped++;
		} else {
			printf("FAIL unit/%s (%s %d)\n", tests[i].name,
			       WIFSIGNALED(status) ? "signal" : "exit",
			       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			failed++;
		}
	}
	printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	return failed ? 1 : 0;
}
