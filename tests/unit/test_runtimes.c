/* The runtimes' table (ptrace/runtimes/runtimes.h) over the test binary's
 * own address space: a process that runs no runtime, the tokens' rows and
 * names, and what a capture slot holds when no runtime is active; and over
 * real CPythons started for the test, what the answers must say of the
 * frames podprof cannot read. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrace/core/runtime.h"
#include "ptrace/runtimes/runtimes.h"
#include "ptrace/space/space.h"
#include "tests/harness.h"

TEST(runtimes_tokens_carry_their_row)
{
	uint64_t a = pt_rt_token(0, 5), b = pt_rt_token(3, 0xffffffffffffull);

	ASSERT(pt_rt_is_token(a) && pt_rt_is_token(b));
	ASSERT_EQ(pt_rt_token_row(a), 0);
	ASSERT_EQ(pt_rt_token_row(b), 3);
	ASSERT_U64_EQ(a & PT_RT_TOKEN_ID_MASK, 5);
	ASSERT(!pt_rt_is_token(0x7fffffffe000ull));        /* a user-space address */
	ASSERT(!pt_rt_is_token(0xffffffffff600000ull));    /* the vsyscall page */
	ASSERT(!pt_rt_is_token(0x00ff800000000000ull));    /* LA57 user space */
	ASSERT_STR_EQ(pt_runtimes_token_name(pt_rt_token(0, 1)), "python");
	ASSERT(pt_runtimes_token_name(pt_rt_token(15, 1)) == NULL);   /* no such row */
	ASSERT(pt_runtimes_token_name(0x401000) == NULL);
}

TEST(runtimes_of_a_process_that_runs_none)
{
	struct pt_space *as;
	struct pt_runtimes *rts;
	struct pt_rt_thread th = { .nstid = getpid() };
	struct pt_rt_thread *list[1] = { &th };
	struct pt_rt_line ln[4];
	uint64_t frames[3] = { 0x401000, 0x402000, 0x403000 };

	ASSERT_OK(pt_space_new(&as, getpid(), NULL, NULL, NULL));
	ASSERT_OK(pt_space_refresh_maps(as));
	ASSERT_OK(pt_runtimes_new(&rts, as, PT_RUNTIME_PYTHON, 4));
	pt_runtimes_detect(rts);   /* this binary is no CPython */
	ASSERT(!pt_runtimes_active(rts));
	ASSERT(!pt_runtimes_read_in_stop(rts));
	ASSERT(pt_runtimes_note(rts) == NULL);
	pt_runtimes_prepare(rts, list, 1);
	ASSERT_EQ(pt_runtimes_capture(rts, 0, &th, NULL), 0);
	ASSERT_EQ(pt_runtimes_merge(rts, 0, NULL, frames, 3, 3), 3);   /* untouched */
	ASSERT_U64_EQ(frames[1], 0x402000);
	ASSERT_EQ(pt_runtimes_lines(rts, pt_rt_token(0, 0), ln, 4), 0);
	ASSERT_EQ(pt_runtimes_lines(rts, 0x401000, ln, 4), 0);
	pt_runtimes_reset(rts);
	pt_runtimes_free(rts);
	pt_space_free(as);
}

/* A CPython started for the test (`python`, which prints "ready" once it
 * runs), its pid, and the read end of its stdout. -1 if it is not here. */
static pid_t start_python(const char *python, int *fd)
{
	int p[2];
	pid_t pid;
	char buf[16] = "";

	if (access(python, X_OK))
		return -1;
	ASSERT(!pipe(p));
	if (!(pid = fork())) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);   /* a test that fails midway leaves nothing behind */
		dup2(p[1], 1);
		execl(python, python, "-c", "import time; print('ready', flush=True); time.sleep(30)", (char *)NULL);
		_exit(127);
	}
	ASSERT(pid > 0);
	close(p[1]);
	ASSERT(read(p[0], buf, sizeof(buf) - 1) > 0 && !strncmp(buf, "ready", 5));
	*fd = p[0];
	return pid;
}

/* What an answer must say of the runtimes' frames: nothing for a process
 * without them or a CPython podprof reads (and no sample torn yet); for a
 * CPython it cannot read (3.10: no Py_Version), why, every time asked;
 * nothing with Python turned off. */
TEST(runtimes_say_what_they_cannot_read)
{
	static const struct { const char *python; const char *want; } cases[] = {
		{ "/usr/bin/python3.11", "" },
		{ "/root/.pyenv/versions/3.10.13/bin/python3.10",
		  "/libpython3.10.so.1.0 is a CPython without Py_Version (before 3.11): profiled natively: "
		  "its Python functions are not shown" },
	};
	struct pt_runtimes_counts c0;
	char out[1024], missing[256] = "";

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (unsigned int enabled = 0; enabled <= PT_RUNTIME_PYTHON; enabled += PT_RUNTIME_PYTHON) {
			struct pt_space *as;
			struct pt_runtimes *rts;
			int fd, status;
			pid_t pid = start_python(cases[i].python, &fd);

			if (pid < 0) {
				snprintf(missing, sizeof(missing), "%s", cases[i].python);
				break;
			}
			ASSERT_OK(pt_space_new(&as, pid, NULL, NULL, NULL));
			ASSERT_OK(pt_space_refresh_maps(as));
			ASSERT_OK(pt_runtimes_new(&rts, as, enabled | PT_RUNTIME_GO, 4));
			pt_runtimes_missing(rts, NULL, out, sizeof(out));
			ASSERT_STR_EQ(out, "");   /* nothing detected yet */
			pt_runtimes_counts(rts, &c0);
			pt_runtimes_detect(rts);
			ASSERT_EQ(pt_runtimes_active(rts), enabled && !cases[i].want[0]);
			for (int again = 0; again < 2; again++) {
				pt_runtimes_missing(rts, &c0, out, sizeof(out));
				if (!enabled)
					ASSERT_STR_EQ(out, "");
				else if (!cases[i].want[0])
					ASSERT_STR_EQ(out, "");
				else if (strncmp(out, "python: ", 8) || !strstr(out, cases[i].want) || strchr(out, '\n'))
					FAIL_AT("%s: \"%s\"", cases[i].python, out);
			}
			pt_runtimes_free(rts);
			pt_space_free(as);
			kill(pid, SIGKILL);
			ASSERT_EQ(waitpid(pid, &status, 0), pid);
			close(fd);
		}
	}
	if (missing[0])
		SKIP("%s not installed: not checked", missing);
}
