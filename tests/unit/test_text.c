/* encoder/text: Go's legacy text profiles over the neutral stack type,
 * byte for byte. */
#include <errno.h>

#include "encoder/text.h"
#include "tests/harness.h"

/* Three threads: two share a stack (a blocked reader), one runs. */
static const struct enc_text_loc locs[] = {
	{ 0x401010, "read", "/lib/libc.so.6", 0x1010, 0 },
	{ 0x402020, "blocked_reader", "/app", 0x2020, 0 },
	{ 0x7f0000001000, "jit+0x1000", NULL, 0, 0 },
};
static const uint32_t reader[] = { 0, 1 };
static const uint32_t runner[] = { 2, 1 };
static const struct enc_text_stack stacks[] = {
	{ reader, 2, 1, 12, "blocked", "sleeping", "read", 0, { 0 }, 0, NULL },
	{ runner, 2, 1, 10, "main", "running", NULL, 0, { 0 }, 0, NULL },
	{ reader, 2, 1, 11, "", "sleeping", "?", 0, { 0 }, 0, NULL },
	{ NULL, 0, 1, 13, "late", "running", NULL, 0, { 0 }, 0, NULL },
};
static const struct enc_text_profile prof = { "goroutine", locs, 3, stacks, 4, NULL };

TEST(text_count_profile_like_go)
{
	static const char want[] =
		"goroutine profile: total 4\n"
		"2 @ 0x401010 0x402020\n"
		"#\t0x401010\tread\t/lib/libc.so.6 +0x1010\n"
		"#\t0x402020\tblocked_reader\t/app +0x2020\n"
		"\n"
		"1 @\n"
		"\n"
		"1 @ 0x7f0000001000 0x402020\n"
		"#\t0x7f0000001000\tjit+0x1000\t?\n"
		"#\t0x402020\tblocked_reader\t/app +0x2020\n"
		"\n";
	char *out;
	size_t len;

	ASSERT_OK(enc_text_count_encode(&prof, 1 << 20, &out, &len));
	ASSERT_EQ(len, sizeof(want) - 1);
	ASSERT_STR_EQ(out, want);
	free(out);
}

TEST(text_dump_like_a_panic)
{
	static const char want[] =
		"goroutine 10 [running, thread \"main\"]:\n"
		"jit+0x1000(...)\n\t?\n"
		"blocked_reader(...)\n\t/app +0x2020\n"
		"\n"
		"goroutine 11 [sleeping, syscall ?, thread \"\"]:\n"
		"read(...)\n\t/lib/libc.so.6 +0x1010\n"
		"blocked_reader(...)\n\t/app +0x2020\n"
		"\n"
		"goroutine 12 [sleeping, syscall read, thread \"blocked\"]:\n"
		"read(...)\n\t/lib/libc.so.6 +0x1010\n"
		"blocked_reader(...)\n\t/app +0x2020\n"
		"\n"
		"goroutine 13 [running, thread \"late\"]:\n"
		"(stack not captured)\n"
		"\n";
	char *out;
	size_t len;

	ASSERT_OK(enc_text_dump_encode(&prof, 1 << 20, &out, &len));
	ASSERT_EQ(len, sizeof(want) - 1);
	ASSERT_STR_EQ(out, want);
	free(out);
}

TEST(text_caps_and_empty)
{
	static const struct enc_text_profile none = { "goroutine", NULL, 0, NULL, 0, NULL };
	char *out = (char *)"x";
	size_t len;

	/* The cap counts every byte: one short of the whole text fails. */
	ASSERT_OK(enc_text_dump_encode(&prof, 1 << 20, &out, &len));
	free(out);
	ASSERT_EQ(enc_text_dump_encode(&prof, len - 1, &out, &len), -E2BIG);
	ASSERT(out == NULL);
	ASSERT_EQ(enc_text_count_encode(&prof, 10, &out, &len), -E2BIG);
	ASSERT(out == NULL);
	ASSERT_OK(enc_text_dump_encode(&none, 100, &out, &len));
	ASSERT_EQ(len, 0);
	free(out);
	ASSERT_OK(enc_text_count_encode(&none, 100, &out, &len));
	ASSERT_STR_EQ(out, "goroutine profile: total 0\n");
	free(out);
}

/* Interpreted frames (Python) print their source line, as Go's own do. */
TEST(text_source_lines)
{
	static const struct enc_text_loc py[] = {
		{ 0x70000000000001, "crunch", "/app/hot.py", 0, 22 },
		{ 0x70000000000001, "<module>", "/app/hot.py", 0, 74 },
	};
	static const uint32_t ids[] = { 0, 1 };
	static const struct enc_text_stack st[] = { { ids, 2, 1, 7, "python3", "running", NULL, 0, { 0 }, 0, NULL } };
	static const struct enc_text_profile p = { "goroutine", py, 2, st, 1, NULL };
	static const char want[] =
		"goroutine 7 [running, thread \"python3\"]:\n"
		"crunch(...)\n\t/app/hot.py:22\n"
		"<module>(...)\n\t/app/hot.py:74\n"
		"\n";
	char *out;
	size_t len;

	ASSERT_OK(enc_text_dump_encode(&p, 1 << 20, &out, &len));
	ASSERT_STR_EQ(out, want);
	free(out);
}

/* Several processes: the same stack in two processes stays two records,
 * each saying its process as Go says a goroutine's labels; the dump lists
 * each process's threads under its own line. */
TEST(text_of_several_processes_keeps_them_apart)
{
	static const struct enc_text_stack st[] = {
		{ reader, 2, 1, 21, "w", "sleeping", "read", 0, { 0 }, 20, "nginx" },
		{ reader, 2, 1, 11, "w", "sleeping", "read", 0, { 0 }, 10, "nginx" },
		{ reader, 2, 1, 12, "w", "sleeping", "read", 0, { 0 }, 10, "nginx" },
	};
	static const struct enc_text_profile p = { "goroutine", locs, 3, st, 3, NULL };
	static const char count[] =
		"goroutine profile: total 3\n"
		"2 @ 0x401010 0x402020\n"
		"# labels: {\"pid\":\"10\", \"process\":\"nginx\"}\n"
		"#\t0x401010\tread\t/lib/libc.so.6 +0x1010\n"
		"#\t0x402020\tblocked_reader\t/app +0x2020\n"
		"\n"
		"1 @ 0x401010 0x402020\n"
		"# labels: {\"pid\":\"20\", \"process\":\"nginx\"}\n"
		"#\t0x401010\tread\t/lib/libc.so.6 +0x1010\n"
		"#\t0x402020\tblocked_reader\t/app +0x2020\n"
		"\n";
	static const char dump[] =
		"process 10 (nginx):\n\n"
		"goroutine 11 [sleeping, syscall read, thread \"w\"]:\n"
		"read(...)\n\t/lib/libc.so.6 +0x1010\n"
		"blocked_reader(...)\n\t/app +0x2020\n"
		"\n"
		"goroutine 12 [sleeping, syscall read, thread \"w\"]:\n"
		"read(...)\n\t/lib/libc.so.6 +0x1010\n"
		"blocked_reader(...)\n\t/app +0x2020\n"
		"\n"
		"process 20 (nginx):\n\n"
		"goroutine 21 [sleeping, syscall read, thread \"w\"]:\n"
		"read(...)\n\t/lib/libc.so.6 +0x1010\n"
		"blocked_reader(...)\n\t/app +0x2020\n"
		"\n";
	char *out;
	size_t len;

	ASSERT_OK(enc_text_count_encode(&p, 1 << 20, &out, &len));
	ASSERT_STR_EQ(out, count);
	free(out);
	ASSERT_OK(enc_text_dump_encode(&p, 1 << 20, &out, &len));
	ASSERT_STR_EQ(out, dump);
	free(out);
}

/* A process's name is its own to choose: a quote, a backslash or a newline
 * in it stays inside the label and the header line. */
TEST(text_escapes_process_names)
{
	static const struct enc_text_stack st[] = {
		{ reader, 2, 1, 11, "w", "sleeping", "read", 0, { 0 }, 10, "a\"b\\c\nd" },
	};
	static const struct enc_text_profile p = { "goroutine", locs, 3, st, 1, NULL };
	char *out;
	size_t len;

	ASSERT_OK(enc_text_count_encode(&p, 1 << 20, &out, &len));
	ASSERT(strstr(out, "# labels: {\"pid\":\"10\", \"process\":\"a\\\"b\\\\c\\x0ad\"}\n"));
	free(out);
	ASSERT_OK(enc_text_dump_encode(&p, 1 << 20, &out, &len));
	ASSERT(!strncmp(out, "process 10 (a\\\"b\\\\c\\x0ad):\n\n", 27));
	free(out);
}

/* What the text lacks (a runtime's frames), one "# podprof:" line each:
 * after the count profile's first line (pprof's reader skips lines that
 * begin with '#'), before the dump's first block. */
TEST(text_says_what_it_lacks)
{
	static const struct enc_text_loc l[] = { { .addr = 0x1010, .name = "read", .file = "/lib/libc.so.6" } };
	static const uint32_t ids[] = { 0 };
	static const struct enc_text_stack st[] = {
		{ .locs = ids, .n = 1, .count = 1, .id = 7, .thread = "t", .state = "running" },
	};
	const struct enc_text_profile p = { "goroutine", l, 1, st, 1,
					    "python: CPython 3.16 is newer than podprof knows\npython: two" };
	char *out;
	size_t len;

	ASSERT_OK(enc_text_count_encode(&p, 1 << 20, &out, &len));
	ASSERT(!strncmp(out, "goroutine profile: total 1\n"
			     "# podprof: python: CPython 3.16 is newer than podprof knows\n"
			     "# podprof: python: two\n"
			     "1 @ 0x1010\n", strlen("goroutine profile: total 1\n# podprof: python: CPython 3.16 "
						    "is newer than podprof knows\n# podprof: python: two\n1 @ 0x1010\n")));
	free(out);
	ASSERT_OK(enc_text_dump_encode(&p, 1 << 20, &out, &len));
	ASSERT_STR_EQ(out, "# podprof: python: CPython 3.16 is newer than podprof knows\n"
			   "# podprof: python: two\n"
			   "\n"
			   "goroutine 7 [running, thread \"t\"]:\n"
			   "read(...)\n\t/lib/libc.so.6 +0\n"
			   "\n");
	free(out);
}

/* threadcreate: a stack's count is the threads it created; Go's total is
 * every record's, so the sum of the counts, not the number of stacks. */
TEST(text_count_total_is_the_records_not_the_stacks)
{
	static const struct enc_text_stack st[] = {
		{ reader, 2, 5, 0, "w", NULL, NULL, 0, { 0 }, 0, NULL },
		{ reader + 1, 1, 2, 0, "w", NULL, NULL, 0, { 0 }, 0, NULL },
	};
	static const struct enc_text_profile p = { "threadcreate", locs, 3, st, 2, NULL };
	char *out;
	size_t len;

	ASSERT_OK(enc_text_count_encode(&p, 1 << 20, &out, &len));
	ASSERT(!strncmp(out, "threadcreate profile: total 7\n5 @ 0x401010 0x402020\n",
			strlen("threadcreate profile: total 7\n5 @ 0x401010 0x402020\n")));
	free(out);
}
