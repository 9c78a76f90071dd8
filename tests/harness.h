/* Tiny unit-test harness (CONVENTIONS H20): TEST(name) registers a test; the runner
 * forks each one with a timeout and prints PASS/FAIL/SKIP lines. Asserts
 * print both operands. A test calls SKIP("why") to be counted as skipped:
 * the runner prints "SKIP unit/NAME: why" (scripts/check.sh counts a skip
 * that tests/expected-skips.txt does not list as a failure). */
#ifndef TESTS_HARNESS_H
#define TESTS_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*test_fn)(void);
void harness_register(const char *name, test_fn fn);
/* Ends a test process with status: exit(3) normally; under torture _exit(2),
 * so that the leak check at exit judges only the runs that passed (a failed
 * assertion leaves the test's own objects behind). */
void harness_exit(int status) __attribute__((noreturn));
/* Ends a test process as skipped (77), the reason kept for the runner's
 * SKIP line. */
void harness_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* PATH (relative to the source tree, e.g. "tests/fuzz/corpus/...") as a
 * path that opens from any working directory: the unit-tests binary is
 * BUILD/FLAVOUR/unit-tests in the source tree. Returns buf. */
const char *harness_src(const char *path, char *buf, size_t len);

#define TEST(name)                                                              \
	static void test_##name(void);                                          \
	__attribute__((constructor)) static void register_##name(void)          \
	{                                                                       \
		harness_register(#name, test_##name);                           \
	}                                                                       \
	static void test_##name(void)

#define FAIL_AT(...)                                                            \
	do {                                                                    \
		fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);               \
		fprintf(stderr, __VA_ARGS__);                                   \
		fprintf(stderr, "\n");                                          \
		harness_exit(1);                                                \
	} while (0)

#define ASSERT(c) do { if (!(c)) FAIL_AT("assertion failed: %s", #c); } while (0)
#define ASSERT_EQ(a, b)                                                         \
	do {                                                                    \
		long long _a = (long long)(a), _b = (long long)(b);             \
		if (_a != _b)                                                   \
			FAIL_AT("%s == %s: %lld != %lld", #a, #b, _a, _b);      \
	} while (0)
#define ASSERT_U64_EQ(a, b)                                                     \
	do {                                                                    \
		uint64_t _a = (uint64_t)(a), _b = (uint64_t)(b);                \
		if (_a != _b)                                                   \
			FAIL_AT("%s == %s: %#" PRIx64 " != %#" PRIx64, #a, #b, _a, _b); \
	} while (0)
#define ASSERT_OK(e)                                                            \
	do {                                                                    \
		long long _e = (long long)(e);                                  \
		if (_e != 0)                                                    \
			FAIL_AT("%s: %lld (%s)", #e, _e, strerror((int)-_e));   \
	} while (0)
#define ASSERT_STR_EQ(a, b)                                                     \
	do {                                                                    \
		const char *_a = (a), *_b = (b);                                \
		if (!_a || !_b || strcmp(_a, _b))                               \
			FAIL_AT("%s == %s: \"%s\" != \"%s\"", #a, #b,           \
				_a ? _a : "(null)", _b ? _b : "(null)");        \
	} while (0)
#define SKIP(...) harness_skip(__VA_ARGS__)

#endif
