/* The memory layer (base/): allocation and its failure injection, checked
 * sizes, growable arrays, the hash map and the byte buffer, each through
 * growth, failure and its limits. */
#include <errno.h>
#include <stdint.h>

#include "base/array.h"
#include "base/buf.h"
#include "base/map.h"
#include "base/mem.h"
#include "tests/harness.h"

TEST(base_mem_fails_the_nth_allocation_once)
{
	void *a, *b, *c;
	char *s;

	base_mem_fail_at(2);
	a = base_malloc(16);
	b = base_calloc(4, 4);
	c = base_malloc(16);
	ASSERT(a && !b && c);
	ASSERT(base_mem_failed());
	ASSERT_EQ(base_mem_counted(), 3);
	base_free(a);
	base_free(c);
	/* strdup, memdup and realloc go through the same door. */
	base_mem_fail_at(1);
	ASSERT(!base_strdup("x"));
	base_mem_fail_at(1);
	ASSERT(!base_memdup("xy", 2));
	a = base_malloc(8);
	base_mem_fail_at(1);
	ASSERT(!base_realloc(a, 64));   /* a is untouched */
	base_mem_fail_off();
	ASSERT_EQ(base_mem_counted(), 0);
	s = base_strndup("abcdef", 3);
	ASSERT_STR_EQ(s, "abc");
	base_free(s);
	base_free(a);
	ASSERT(!base_strdup(NULL));
}

TEST(base_checked_sizes)
{
	size_t r = 7;

	ASSERT_OK(base_size_mul(1u << 20, 1u << 20, &r));
	ASSERT_U64_EQ(r, 1ull << 40);
	ASSERT_EQ(base_size_mul(SIZE_MAX / 2, 3, &r), -E2BIG);
	ASSERT_U64_EQ(r, 1ull << 40);   /* left alone */
	ASSERT_EQ(base_size_add(SIZE_MAX, 1, &r), -E2BIG);
	ASSERT_OK(base_size_add(SIZE_MAX - 1, 1, &r));
	ASSERT_U64_EQ(r, SIZE_MAX);
	ASSERT(!base_calloc(SIZE_MAX / 8, 16));
	ASSERT(!base_reallocarray(NULL, SIZE_MAX / 8, 16));
}

TEST(base_array_grows_by_doubling_and_zeroes)
{
	uint32_t *v = NULL;
	size_t n = 0, cap = 0;

	for (uint32_t i = 0; i < 1000; i++) {
		uint32_t *e = BASE_ARRAY_PUSH(v, n, cap);

		ASSERT(e);
		ASSERT_EQ(*e, 0);
		*e = i;
	}
	ASSERT_EQ(n, 1000);
	ASSERT_EQ(cap, 1024);   /* 8, 16, ... 1024 */
	for (uint32_t i = 0; i < 1000; i++)
		ASSERT_EQ(v[i], i);
	ASSERT_OK(BASE_ARRAY_RESERVE(v, cap, 1500));
	ASSERT_EQ(cap, 2048);
	ASSERT_EQ(v[1999], 0);
	ASSERT_OK(BASE_ARRAY_RESERVE(v, cap, 10));   /* already there */
	ASSERT_EQ(cap, 2048);
	base_free(v);
}

TEST(base_array_grow_keeps_what_is_there)
{
	char *v = NULL;
	size_t cap = 0;

	ASSERT_OK(BASE_ARRAY_GROW(v, cap, 5));
	memcpy(v, "abcd", 5);
	ASSERT_OK(BASE_ARRAY_GROW(v, cap, 100));
	ASSERT_EQ(cap, 128);
	ASSERT_STR_EQ(v, "abcd");
	ASSERT_EQ(BASE_ARRAY_GROW(v, cap, BASE_ARRAY_MAX + 1), -E2BIG);
	base_free(v);
}

TEST(base_array_refuses_growth_past_2_31_elements)
{
	char *v = NULL;
	uint64_t *w = NULL;
	size_t cap = 0, wcap = 0;

	ASSERT_OK(BASE_ARRAY_RESERVE(v, cap, 100));
	v[99] = 'x';
	/* Refused before any allocation is tried (none is counted). */
	base_mem_fail_at(0);
	ASSERT_EQ(BASE_ARRAY_RESERVE(v, cap, BASE_ARRAY_MAX + 1), -E2BIG);
	ASSERT_EQ(BASE_ARRAY_RESERVE(v, cap, SIZE_MAX), -E2BIG);
	ASSERT_EQ(base_mem_counted(), 0);
	ASSERT_EQ(cap, 128);
	ASSERT_EQ(v[99], 'x');
	/* 2^31 elements of 2^62 bytes each: the size overflows, refused. */
	ASSERT_EQ(base_array_reserve(&w, &wcap, 16, (size_t)1 << 62), -E2BIG);
	ASSERT(!w);
	ASSERT_EQ(wcap, 0);
	base_free(v);
}

TEST(base_array_keeps_its_elements_when_growth_fails)
{
	int *v = NULL;
	size_t n = 0, cap = 0;

	for (int i = 0; i < 8; i++)
		*BASE_ARRAY_PUSH(v, n, cap) = i;
	base_mem_fail_at(1);
	ASSERT(!BASE_ARRAY_PUSH(v, n, cap));
	base_mem_fail_off();
	ASSERT_EQ(n, 8);
	ASSERT_EQ(cap, 8);
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(v[i], i);
	base_free(v);
}

TEST(base_map_exact_keys)
{
	struct base_map m = { 0 };
	size_t pos = 0, seen = 0;
	const struct base_map_slot *s;

	ASSERT(!base_map_get(&m, 5));
	ASSERT_EQ(base_map_put(&m, 0, 1), -EINVAL);
	for (uint64_t k = 1; k <= 10000; k++)
		ASSERT_OK(base_map_put(&m, k * 4096, k));
	ASSERT_EQ(base_map_count(&m), 10000);
	ASSERT(m.cap >= 20000 && (m.cap & (m.cap - 1)) == 0);   /* at most half full */
	for (uint64_t k = 1; k <= 10000; k++)
		ASSERT_U64_EQ(*base_map_get(&m, k * 4096), k);
	ASSERT(!base_map_get(&m, 4095));
	ASSERT_OK(base_map_put(&m, 4096, 77));   /* replaces */
	ASSERT_U64_EQ(*base_map_get(&m, 4096), 77);
	ASSERT_EQ(base_map_count(&m), 10000);
	while ((s = base_map_next(&m, &pos)))
		seen++;
	ASSERT_EQ(seen, 10000);
	base_map_free(&m);
	ASSERT_EQ(base_map_count(&m), 0);
}

TEST(base_map_delete_keeps_probe_runs_whole)
{
	struct base_map m = { 0 };

	/* Sequential keys collide in runs; delete every third, then every
	 * key must still be found or absent as it should. */
	for (uint64_t k = 1; k <= 3000; k++)
		ASSERT_OK(base_map_put(&m, k, k + 1));
	for (uint64_t k = 3; k <= 3000; k += 3)
		ASSERT_OK(base_map_del(&m, k));
	ASSERT_EQ(base_map_del(&m, 3), -ENOENT);
	ASSERT_EQ(base_map_count(&m), 2000);
	for (uint64_t k = 1; k <= 3000; k++) {
		uint64_t *v = base_map_get(&m, k);

		if (k % 3 == 0)
			ASSERT(!v);
		else
			ASSERT(v && *v == k + 1);
	}
	base_map_free(&m);
}

static const char *const words[] = { "alpha", "beta", "gamma", "delta" };

static int word_eq(const void *arg, uint64_t val)
{
	return !strcmp(words[val], arg);
}

TEST(base_map_hashed_keys_with_collisions)
{
	struct base_map m = { 0 };

	/* Every word under one hash: the equality callback tells them apart. */
	for (uint64_t i = 0; i < 4; i++)
		ASSERT_OK(base_map_add(&m, 42, i));
	for (uint64_t i = 0; i < 4; i++)
		ASSERT_U64_EQ(*base_map_find(&m, 42, word_eq, words[i]), i);
	ASSERT(!base_map_find(&m, 42, word_eq, "epsilon"));
	ASSERT(!base_map_find(&m, 43, word_eq, "alpha"));
	ASSERT(base_hash_str("alpha") != base_hash_str("beta"));
	ASSERT(base_hash_bytes(BASE_HASH_SEED, "", 0) != 0);
	ASSERT(base_hash_word(0, 0) != 0);
	base_map_free(&m);
}

TEST(base_map_keeps_its_entries_when_growth_fails)
{
	struct base_map m = { 0 };
	size_t cap;

	for (uint64_t k = 1; k <= 8; k++)
		ASSERT_OK(base_map_put(&m, k, k));
	cap = m.cap;
	base_mem_fail_at(1);
	ASSERT_EQ(base_map_put(&m, 9, 9), -ENOMEM);
	base_mem_fail_off();
	ASSERT_EQ(m.cap, cap);
	ASSERT_EQ(base_map_count(&m), 8);
	for (uint64_t k = 1; k <= 8; k++)
		ASSERT_U64_EQ(*base_map_get(&m, k), k);
	ASSERT(!base_map_get(&m, 9));
	base_map_free(&m);
}

TEST(base_map_refuses_growth_past_2_31_entries)
{
	struct base_map m = { 0 };

	base_mem_fail_at(0);
	ASSERT_EQ(base_map_reserve(&m, BASE_MAP_MAX + 1), -E2BIG);
	ASSERT_EQ(base_mem_counted(), 0);
	ASSERT(!m.slots);
}

TEST(base_buf_caps_and_sticks)
{
	struct base_buf b;
	char *out;
	size_t len;

	base_buf_init(&b, 10);
	ASSERT_OK(base_buf_str(&b, "hello"));
	ASSERT_OK(base_buf_printf(&b, "%d", 1234));
	ASSERT_STR_EQ(b.data, "hello1234");
	ASSERT_EQ(base_buf_str(&b, "xy"), -E2BIG);   /* 11 > 10 */
	ASSERT_EQ(base_buf_byte(&b, 'z'), -E2BIG);   /* it sticks */
	ASSERT_EQ(b.len, 9);
	ASSERT_EQ(base_buf_take(&b, &out, &len), -E2BIG);
	ASSERT(!out);
	base_buf_free(&b);

	base_buf_init(&b, 1 << 20);
	for (int i = 0; i < 1000; i++)
		ASSERT_OK(base_buf_printf(&b, "line %04d %s\n", i, "a longer piece of text"));
	ASSERT_EQ(b.len, 1000 * 33);
	ASSERT_OK(base_buf_take(&b, &out, &len));
	ASSERT_EQ(len, 33000);
	ASSERT(!memcmp(out + 33 * 999, "line 0999 a longer piece of text\n", 33));
	ASSERT_EQ(out[len], '\0');
	base_free(out);
	ASSERT(!b.data && !b.len);
	/* An empty buffer hands over an empty string. */
	ASSERT_OK(base_buf_take(&b, &out, &len));
	ASSERT(out && !len && !out[0]);
	base_free(out);
}

/* The number appenders write what printf's %lld and %#llx write. */
TEST(base_buf_numbers_as_printf_writes_them)
{
	static const int64_t dec[] = { 0, 7, -7, 10, 123456789, INT64_MAX, INT64_MIN, -1 };
	static const uint64_t hex[] = { 0, 1, 0xf, 0x10, 0x4bdf5f, 0xdeadbeefcafe, UINT64_MAX };
	struct base_buf b, want;
	char *got, *exp;
	size_t len, elen;

	base_buf_init(&b, 1 << 12);
	base_buf_init(&want, 1 << 12);
	for (size_t i = 0; i < sizeof(dec) / sizeof(dec[0]); i++) {
		ASSERT_OK(base_buf_i64(&b, dec[i]));
		ASSERT_OK(base_buf_byte(&b, ' '));
		ASSERT_OK(base_buf_printf(&want, "%lld ", (long long)dec[i]));
	}
	for (size_t i = 0; i < sizeof(hex) / sizeof(hex[0]); i++) {
		ASSERT_OK(base_buf_hex(&b, hex[i]));
		ASSERT_OK(base_buf_byte(&b, ' '));
		ASSERT_OK(base_buf_printf(&want, "%#llx ", (unsigned long long)hex[i]));
	}
	ASSERT_OK(base_buf_take(&b, &got, &len));
	ASSERT_OK(base_buf_take(&want, &exp, &elen));
	ASSERT_STR_EQ(got, exp);
	ASSERT_EQ(len, elen);
	base_free(got);
	base_free(exp);
	/* Past the cap: the error, as every append. */
	base_buf_init(&b, 3);
	ASSERT_EQ(base_buf_hex(&b, 0x1234), -E2BIG);
	ASSERT_EQ(base_buf_i64(&b, 1), -E2BIG);
	base_buf_free(&b);
}

TEST(base_buf_fails_cleanly_without_memory)
{
	struct base_buf b;
	char big[600];

	base_buf_init(&b, 1 << 20);
	ASSERT_OK(base_buf_str(&b, "kept"));
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	base_mem_fail_at(1);
	ASSERT_EQ(base_buf_printf(&b, "%s", big), -ENOMEM);
	base_mem_fail_off();
	ASSERT_STR_EQ(b.data, "kept");
	ASSERT_EQ(base_buf_str(&b, "more"), -ENOMEM);   /* sticky */
	base_buf_free(&b);
	ASSERT_OK(base_buf_str(&b, "again"));             /* free clears it */
	ASSERT_STR_EQ(b.data, "again");
	base_buf_free(&b);
}
