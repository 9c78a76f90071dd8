/* The runtimes' table (ptrace/runtimes/runtimes.h) over the test binary's
 * own address space: a process that runs no runtime, the tokens' rows and
 * names, and what a capture slot holds when no runtime is active. */
#include <errno.h>
#include <string.h>
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
