/* The allocation agent's records as podprof reads them (ptrace/allocs/agentrec.c),
 * over a synthetic target memory: good records, and every bound a corrupt
 * or hostile target could break. Also Go's unsampling and the heap text. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "agent/area.h"
#include "base/mem.h"
#include "encoder/text.h"
#include "ptrace/allocs/agentrec.h"
#include "ptrace/core/allocs.h"
#include "tests/harness.h"

#define BASE 0x7f0000000000ull
#define AREA (BASE + 4096)
#define FRAMES 8u
#define STACK_SIZE (sizeof(struct ppa_stack) + FRAMES * 8)

struct fake {
	unsigned char mem[4096 + 4096 + 16 * STACK_SIZE];
	int reads;
};

static int fake_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct fake *f = arg;

	f->reads++;
	if (addr < BASE || addr - BASE > sizeof(f->mem) || len > sizeof(f->mem) - (addr - BASE))
		return -EFAULT;
	memcpy(buf, f->mem + (addr - BASE), len);
	return 0;
}

static struct ppa_header *hdr(struct fake *f)
{
	return (struct ppa_header *)(void *)f->mem;
}

static struct ppa_area *area(struct fake *f)
{
	return (struct ppa_area *)(void *)(f->mem + 4096);
}

static struct ppa_stack *stack(struct fake *f, int i)
{
	return (struct ppa_stack *)(void *)(f->mem + 4096 + 4096 + (size_t)i * STACK_SIZE);
}

/* Records of two stacks: main <- alpha (3 allocations of 100, one freed),
 * and a stack with nothing counted (skipped). */
static void good(struct fake *f)
{
	struct ppa_stack *s;

	memset(f, 0, sizeof(*f));
	memcpy(hdr(f)->magic, PPA_HEADER_MAGIC, 8);
	hdr(f)->version = PPA_VERSION;
	hdr(f)->header_size = sizeof(struct ppa_header);
	hdr(f)->area = AREA;
	hdr(f)->area_size = 4096 + 16 * STACK_SIZE;
	memcpy(area(f)->magic, PPA_AREA_MAGIC, 8);
	area(f)->version = PPA_VERSION;
	area(f)->area_header_size = sizeof(struct ppa_area);
	area(f)->rate = 4096;
	area(f)->stacks_off = 4096;
	area(f)->stack_size = (uint32_t)STACK_SIZE;
	area(f)->max_frames = FRAMES;
	area(f)->max_stacks = 16;
	area(f)->nstacks = 3;
	area(f)->samples = 5;
	area(f)->flags = PPA_F_FORKED;
	s = stack(f, 0);
	s->nframes = 2;
	s->frames[0] = 0x401001;   /* return address in alpha */
	s->frames[1] = 0x402001;   /* in main */
	s->alloc_objects = 3;       /* sampled */
	s->alloc_bytes = 300;
	s->free_objects = 1;
	s->free_bytes = 100;
	s->est_alloc_objects = 30;  /* estimated: what podprof serves */
	s->est_alloc_bytes = 3000;
	s->est_free_objects = 10;
	s->est_free_bytes = 1000;
	stack(f, 1)->nframes = 1;   /* nothing counted */
	stack(f, 1)->frames[0] = 0x403001;
	s = stack(f, 2);
	s->nframes = 3;             /* a zero frame ends the stack */
	s->frames[0] = 0x404001;
	s->frames[1] = 0;
	s->frames[2] = 0x405001;
	s->alloc_objects = 1;
	s->alloc_bytes = 7;
	s->est_alloc_objects = 1ull << 60;   /* past any sense: held to the cap */
	s->est_alloc_bytes = 7;
}

TEST(agentrec_reads_stacks_as_call_sites)
{
	static struct fake f;
	struct pt_allocs a;
	const char *why;

	good(&f);
	ASSERT_OK(pt_agentrec_read(fake_read, &f, BASE, &a, &why));
	ASSERT_STR_EQ(a.source, "agent");
	ASSERT_EQ(a.rate, 4096);
	ASSERT_EQ(a.samples, 5);
	ASSERT_EQ(a.forked, 1);
	ASSERT_EQ(a.full, 0);
	ASSERT_EQ(a.nstacks, 2);
	ASSERT_EQ(a.stacks[0].n, 2);
	ASSERT_U64_EQ(a.frames[a.stacks[0].first], 0x401000);
	ASSERT_U64_EQ(a.frames[a.stacks[0].first + 1], 0x402000);
	ASSERT_EQ(a.scaled, 1);
	ASSERT_EQ(a.stacks[0].alloc_objects, 30);
	ASSERT_EQ(a.stacks[0].alloc_bytes, 3000);
	ASSERT_EQ(a.stacks[0].free_objects, 10);
	ASSERT_EQ(a.stacks[0].free_bytes, 1000);
	ASSERT_EQ(a.stacks[1].n, 1);
	ASSERT_U64_EQ(a.frames[a.stacks[1].first], 0x404000);
	ASSERT_EQ(a.stacks[1].alloc_objects, PT_ALLOCS_MAX_VALUE);
	pt_allocs_clear(&a);
}

TEST(agentrec_before_the_first_sample)
{
	static struct fake f;
	struct pt_allocs a;
	const char *why;

	good(&f);
	hdr(&f)->area = 0;
	ASSERT_EQ(pt_agentrec_read(fake_read, &f, BASE, &a, &why), -ENOENT);
	ASSERT(why && strstr(why, "no records yet"));
	ASSERT_EQ(a.nstacks, 0);
}

/* Breaks one thing of good records; the reader must refuse with `want`. */
static void refuse(void (*breakit)(struct fake *), int want)
{
	static struct fake f;
	struct pt_allocs a;
	const char *why = NULL;
	int err;

	good(&f);
	breakit(&f);
	err = pt_agentrec_read(fake_read, &f, BASE, &a, &why);
	if (err != want)
		FAIL_AT("got %d (%s), want %d", err, why ? why : "", want);
	ASSERT(want != -EPROTO || why);
	ASSERT_EQ(a.nstacks, 0);
	ASSERT(!a.stacks && !a.frames);
}

static void b_magic(struct fake *f) { hdr(f)->magic[0] = 'X'; }
static void b_version(struct fake *f) { hdr(f)->version = 2; }
static void b_area_magic(struct fake *f) { area(f)->magic[0] = 'X'; }
static void b_area_version(struct fake *f) { area(f)->version = 9; }
static void b_stack_size(struct fake *f) { area(f)->stack_size += 8; }
static void b_frames(struct fake *f) { area(f)->max_frames = 1u << 20; }
static void b_max_stacks(struct fake *f) { area(f)->max_stacks = 1u << 20; }
static void b_frames0(struct fake *f) { area(f)->max_frames = 0; }
static void b_nstacks(struct fake *f) { area(f)->nstacks = 17; }
static void b_past_area(struct fake *f) { hdr(f)->area_size = 4096 + 2 * STACK_SIZE; }
static void b_huge_area(struct fake *f) { hdr(f)->area_size = 1ull << 40; }
static void b_small_area(struct fake *f) { hdr(f)->area_size = 8; }
static void b_off(struct fake *f) { area(f)->stacks_off = 8; }
static void b_off_far(struct fake *f) { area(f)->stacks_off = 1ull << 40; }
static void b_unmapped(struct fake *f) { hdr(f)->area = 0x1000; }
static void b_stacks_unmapped(struct fake *f)
{
	area(f)->max_stacks = 1u << 16;
	area(f)->nstacks = 1000;
	hdr(f)->area_size = 4096 + 1000 * STACK_SIZE;
}
static void b_overflow(struct fake *f)
{
	area(f)->max_stacks = UINT64_MAX;
	area(f)->nstacks = UINT64_MAX / 2;
	hdr(f)->area_size = PT_AGENTREC_MAX_AREA;
}

TEST(agentrec_refuses_corrupt_records)
{
	refuse(b_magic, -EPROTO);
	refuse(b_version, -EPROTO);
	refuse(b_area_magic, -EPROTO);
	refuse(b_area_version, -EPROTO);
	refuse(b_stack_size, -EPROTO);
	refuse(b_frames, -EPROTO);
	refuse(b_max_stacks, -EPROTO);
	refuse(b_frames0, -EPROTO);
	refuse(b_nstacks, -EPROTO);
	refuse(b_past_area, -EPROTO);
	refuse(b_huge_area, -E2BIG);
	refuse(b_small_area, -EPROTO);
	refuse(b_off, -EPROTO);
	refuse(b_off_far, -EPROTO);
	refuse(b_unmapped, -EFAULT);
	refuse(b_stacks_unmapped, -EFAULT);
	refuse(b_overflow, -EPROTO);
}

TEST(agentrec_bounds_frames_per_stack)
{
	static struct fake f;
	struct pt_allocs a;
	const char *why;

	good(&f);
	stack(&f, 0)->nframes = 0xffffffffu;   /* past max_frames: cut to it */
	for (unsigned i = 0; i < FRAMES; i++)
		stack(&f, 0)->frames[i] = 0x1000 + i + 1;
	ASSERT_OK(pt_agentrec_read(fake_read, &f, BASE, &a, &why));
	ASSERT_EQ(a.stacks[0].n, FRAMES);
	ASSERT_U64_EQ(a.frames[a.stacks[0].first + FRAMES - 1], 0x1000 + FRAMES - 1);
	pt_allocs_clear(&a);
}

TEST(allocs_scale_as_go_does)
{
	int64_t c, b;

	/* One sampled 512 KiB block at rate 512 KiB: 1 / (1 - e^-1). */
	pt_allocs_scale(1, 524288, 524288, &c, &b);
	ASSERT_EQ(c, 1);   /* 1.58, truncated as Go's int64() does */
	ASSERT_EQ(b, (int64_t)(524288.0 / (1.0 - exp(-1.0))));
	/* Scaled by the average size, not each object's. */
	pt_allocs_scale(10, 10240, 524288, &c, &b);
	ASSERT_EQ(b, (int64_t)(10240.0 / (1.0 - exp(-1024.0 / 524288.0))));
	ASSERT(c >= 5120 && c <= 5125);
	/* Every allocation recorded, or nothing: unchanged. */
	pt_allocs_scale(3, 300, 1, &c, &b);
	ASSERT_EQ(c, 3);
	ASSERT_EQ(b, 300);
	/* Held to the cap, never past int64. */
	pt_allocs_scale(PT_ALLOCS_MAX_VALUE, PT_ALLOCS_MAX_VALUE, 1ull << 40, &c, &b);
	ASSERT_EQ(c, PT_ALLOCS_MAX_VALUE);
	ASSERT_EQ(b, PT_ALLOCS_MAX_VALUE);
	pt_allocs_scale(0, 0, 524288, &c, &b);
	ASSERT_EQ(c, 0);
	ASSERT_EQ(b, 0);
}

TEST(allocs_add_refuses_past_its_caps)
{
	struct pt_allocs a = { 0 };
	uint64_t f[PT_ALLOCS_MAX_FRAMES + 5];
	struct pt_alloc_stack c = { .alloc_objects = 1 };

	for (size_t i = 0; i < PT_ALLOCS_MAX_FRAMES + 5; i++)
		f[i] = i + 1;
	ASSERT_OK(pt_allocs_add(&a, f, PT_ALLOCS_MAX_FRAMES + 5, &c));
	ASSERT_EQ(a.stacks[0].n, PT_ALLOCS_MAX_FRAMES);
	a.nstacks = PT_ALLOCS_MAX_STACKS;   /* as if full */
	ASSERT_EQ(pt_allocs_add(&a, f, 1, &c), -E2BIG);
	a.nstacks = 1;
	pt_allocs_clear(&a);
}

TEST(heap_text_as_go_writes_it)
{
	static const struct enc_text_loc locs[] = {
		{ .addr = 0x401000, .name = "alpha", .file = "/app", .file_off = 0x1000 },
		{ .addr = 0x402000, .name = "main", .file = "/app", .file_off = 0x2000 },
	};
	static const uint32_t ids[] = { 0, 1, 1 };
	struct enc_text_stack st[2] = {
		{ .locs = ids + 2, .n = 1, .heap = { 0, 0, 4, 400 } },
		{ .locs = ids, .n = 2, .heap = { 2, 200, 3, 300 } },
	};
	struct enc_text_profile p = { "heap", locs, 2, st, 2, NULL };
	char *out;
	size_t len;

	ASSERT_OK(enc_text_heap_encode(&p, 524288, 1 << 20, &out, &len));
	ASSERT(!strncmp(out, "heap profile: 2: 200 [7: 700] @ heap/1048576\n"
			     "2: 200 [3: 300] @ 0x401000 0x402000\n"
			     "#\t0x401000\talpha\t/app +0x1000\n", len < 109 ? len : 109));
	ASSERT(strstr(out, "0: 0 [4: 400] @ 0x402000\n"));
	base_free(out);
	/* Estimates already: rate 1, Go's "heap/2", which pprof does not scale. */
	ASSERT_OK(enc_text_heap_encode(&p, 1, 1 << 20, &out, &len));
	ASSERT(!strncmp(out, "heap profile: 2: 200 [7: 700] @ heap/2\n", 39));
	base_free(out);
}

#include "agent/weight.h"

/* The agent's own arithmetic against libm's. */
TEST(agent_weight_and_draw_match_libm)
{
	static const double us[] = { 1e-300, 1e-9, 0.001, 0.1, 0.3333, 0.5, 0.70710678, 0.9, 0.999999, 1 };
	static const uint64_t sizes[] = { 1, 16, 1000, 65536, 524288, 1u << 22, 1ull << 30 };

	for (size_t i = 0; i < sizeof(us) / sizeof(us[0]); i++) {
		double want = -log(us[i]), got = ppa_neg_log(us[i]);

		if (fabs(got - want) > 1e-6 * (want > 1 ? want : 1))
			FAIL_AT("-ln(%g): %.12g, libm %.12g", us[i], got, want);
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		double want = 1 / -expm1(-(double)sizes[i] / 524288.0), got = ppa_weight(sizes[i], 524288);

		if (fabs(got - want) > 1e-9 * want)
			FAIL_AT("weight of %llu B: %.12g, libm %.12g", (unsigned long long)sizes[i], got, want);
	}
	ASSERT(ppa_weight(100, 1) == 1);
	ASSERT(ppa_weight(0, 524288) == 1);
}

#include "agent/records.h"

/* How many distinct filter bytes n blocks at base + k * step fall on. */
static unsigned filter_spread(uintptr_t base, uintptr_t step, unsigned n)
{
	static uint8_t seen[1u << PPA_FILTER_BITS];
	unsigned distinct = 0;

	memset(seen, 0, sizeof(seen));
	for (unsigned k = 0; k < n; k++) {
		size_t i = ppa__filter_at((const void *)(base + k * step));

		distinct += !seen[i];
		seen[i] = 1;
	}
	return distinct;
}

/* free's filter: a byte shared with a live sampled block sends a free to
 * the locked lookup, so blocks of any common alignment must spread over
 * the filter, not only those packed 16 bytes apart. */
TEST(agent_filter_spreads_aligned_blocks)
{
	uintptr_t heap = 0x5581c0de2000u, mmapped = 0x7f3a41200010u;   /* a brk heap; glibc's mmapped chunk: page + 16 */
	unsigned n = 1u << PPA_FILTER_BITS;

	ASSERT(filter_spread(heap, 16, n) >= n * 9 / 10);        /* 1 MiB of small blocks packed */
	ASSERT(filter_spread(heap + 16, 48, 20000) >= 19500);
	ASSERT(filter_spread(heap, 4096, 4096) >= 4000);         /* page-aligned buffers */
	ASSERT(filter_spread(mmapped, 4096, 4096) >= 4000);      /* glibc's own mmapped chunks */
	ASSERT(filter_spread(0x7f0000000000u, 1u << 20, 4096) >= 4000);   /* MiB-aligned (huge-page buffers) */
}
