/* The Go memory-profile reader (ptrace/runtimes/go/gomem.c) on synthetic target memory:
 * a small fake address space (the runtime's globals, and buckets laid out
 * as Go 1.18 to 1.26 lay them out on 64-bit) served by a read callback that
 * counts its reads. Each future of a record holds different counts, so a
 * wrong cycle index, a missed or extra future, or the wrong version's cycle
 * encoding gives wrong sums. Then hostile images: loops in allnext, a huge
 * nstk, an unreadable bucket, an endless list, profiling turned off. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrace/runtimes/go/gomem.h"
#include "tests/harness.h"

#define DATA 0x500000u         /* the runtime's globals */
#define HEAP 0xc000000000ull   /* where buckets are */
#define HEAP_LEN (1u << 20)
#define PC0 0x401000u

#define SYM_MBUCKETS (DATA + 0x00)
#define SYM_CYCLE (DATA + 0x10)   /* mProfCycle, or mProf in 1.18 images */
#define SYM_RATE (DATA + 0x20)
#define SYM_DISABLE (DATA + 0x30)

struct cyc {
	uint64_t allocs, frees, alloc_bytes, free_bytes;
};

struct rec {
	struct cyc active, future[3];
};

struct image {
	uint8_t data[0x100];
	uint8_t *heap;
	size_t used;                /* heap bytes given out */
	uint64_t head;              /* the list as built (mbuckets) */
	uint64_t reads, max_reads;  /* reads served; fail the test past max_reads */
	uint64_t hole;              /* a bucket address made unreadable, 0: none */
};

static int img_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct image *im = arg;

	if (++im->reads > im->max_reads)
		FAIL_AT("more than %llu reads: the walk does not end", (unsigned long long)im->max_reads);
	if (im->hole && addr >= im->hole && addr < im->hole + 48 + 8)
		return -EFAULT;
	if (addr >= DATA && addr <= DATA + sizeof(im->data) && len <= DATA + sizeof(im->data) - addr) {
		memcpy(buf, im->data + (addr - DATA), len);
		return 0;
	}
	if (addr >= HEAP && addr <= HEAP + im->used && len <= HEAP + im->used - addr) {
		memcpy(buf, im->heap + (addr - HEAP), len);
		return 0;
	}
	return -EFAULT;
}

static void put64(struct image *im, uint64_t addr, uint64_t v)
{
	if (addr >= HEAP)
		memcpy(im->heap + (addr - HEAP), &v, 8);
	else
		memcpy(im->data + (addr - DATA), &v, 8);
}

/* An image of a program at MemProfileRate 512 KiB, cycle state v at
 * SYM_CYCLE, no buckets yet. */
static void img_init(struct image *im, uint32_t cycle_word)
{
	memset(im, 0, sizeof(*im));
	im->heap = calloc(1, HEAP_LEN);
	ASSERT(im->heap);
	im->max_reads = 100000;
	memcpy(im->data + (SYM_CYCLE - DATA), &cycle_word, 4);
	put64(im, SYM_RATE, 512 * 1024);
}

static void img_free(struct image *im)
{
	free(im->heap);
}

/* A bucket prepended to the list (as stkbucket does), its allnext the old
 * head; nstk words of stk; the record after them. Returns its address. */
static uint64_t add_bucket(struct image *im, uint64_t typ, const uint64_t *stk, uint64_t nstk,
			   const struct rec *r)
{
	uint64_t at = HEAP + im->used, hdr[6] = { 0, im->head, typ, 0x1234, 64, nstk };
	size_t len = sizeof(hdr) + nstk * 8 + sizeof(*r);

	ASSERT(im->used + len <= HEAP_LEN);
	memcpy(im->heap + im->used, hdr, sizeof(hdr));
	memcpy(im->heap + im->used + sizeof(hdr), stk, nstk * 8);
	memcpy(im->heap + im->used + sizeof(hdr) + nstk * 8, r, sizeof(*r));
	im->used += (len + 15) & ~(size_t)15;
	im->head = at;
	put64(im, SYM_MBUCKETS, at);
	return at;
}

static struct pt_gomem_syms syms119(void)
{
	return (struct pt_gomem_syms){ .mbuckets = SYM_MBUCKETS, .mprofcycle = SYM_CYCLE,
				       .memprofilerate = SYM_RATE, .disable = SYM_DISABLE };
}

static struct pt_gomem_syms syms118(void)
{
	return (struct pt_gomem_syms){ .mbuckets = SYM_MBUCKETS, .mprof = SYM_CYCLE,
				       .memprofilerate = SYM_RATE, .disable = SYM_DISABLE };
}

/* A record whose future k holds k+1 times base's counts plus a marker in
 * the high digits (1000, 2000, 3000 for futures 0, 1, 2), active base's
 * own counts times a: any sum of futures is told apart by its digits. */
static struct rec record(uint64_t a, uint64_t base)
{
	struct rec r;

	r.active = (struct cyc){ a * base, a * base / 2, a * base * 64, a * base / 2 * 64 };
	for (int k = 0; k < 3; k++) {
		uint64_t n = (uint64_t)(k + 1) * 1000 + base;

		r.future[k] = (struct cyc){ n, n / 4, n * 64, n / 4 * 64 };
	}
	return r;
}

static void expect_stack(const struct pt_allocs *a, size_t i, const struct cyc *want,
			 const uint64_t *frames, uint32_t n)
{
	const struct pt_alloc_stack *s;

	ASSERT(i < a->nstacks);
	s = &a->stacks[i];
	ASSERT_U64_EQ(s->alloc_objects, want->allocs);
	ASSERT_U64_EQ(s->free_objects, want->frees);
	ASSERT_U64_EQ(s->alloc_bytes, want->alloc_bytes);
	ASSERT_U64_EQ(s->free_bytes, want->free_bytes);
	ASSERT_EQ(s->n, n);
	for (uint32_t k = 0; k < n; k++)
		ASSERT_U64_EQ(a->frames[s->first + k], frames[k]);
}

static struct cyc sum(const struct rec *r, int f0, int f1, int f2)
{
	struct cyc c = r->active;
	const int use[3] = { f0, f1, f2 };

	for (int k = 0; k < 3; k++)
		if (use[k]) {
			c.allocs += r->future[k].allocs;
			c.frees += r->future[k].frees;
			c.alloc_bytes += r->future[k].alloc_bytes;
			c.free_bytes += r->future[k].free_bytes;
		}
	return c;
}

/* Three memory buckets and one of another type; idx is the future the
 * cycle state names. Checks the stacks come out in list order, each
 * active + future[idx], PCs as call sites with zeros skipped. */
static void check_published(struct pt_gomem_syms s, uint32_t cycle_word, int idx)
{
	const uint64_t stk_a[] = { PC0 + 0x10, PC0 + 0x220, 0, PC0 + 0x330 };
	const uint64_t want_a[] = { PC0 + 0x0f, PC0 + 0x21f, PC0 + 0x32f };
	const uint64_t stk_b[] = { PC0 + 0x40 };
	const uint64_t want_b[] = { PC0 + 0x3f };
	const uint64_t stk_x[] = { PC0 + 0x50, PC0 + 0x60 };
	struct rec ra = record(3, 8), rb = record(1, 20), rx = record(5, 1), rz;
	struct pt_allocs out = { 0 };
	const char *why = "unset";
	struct image im;
	struct cyc want;
	int f[3] = { 0 };

	img_init(&im, cycle_word);
	/* the list, head first: b, x (a block profile bucket), z, a */
	add_bucket(&im, 1, stk_a, 4, &ra);
	/* z: nothing in active nor in future[idx] (only in the other two):
	 * after a GC MemProfile reports it with zeros, which is nothing. */
	memset(&rz, 0, sizeof(rz));
	rz.future[(idx + 1) % 3] = (struct cyc){ 7, 0, 7 * 64, 0 };
	rz.future[(idx + 2) % 3] = (struct cyc){ 0, 3, 0, 3 * 64 };
	add_bucket(&im, 1, stk_b, 1, &rz);
	add_bucket(&im, 2, stk_x, 2, &rx);
	add_bucket(&im, 1, stk_b, 1, &rb);
	ASSERT_OK(pt_gomem_read(img_read, &im, &s, &out, &why));
	ASSERT(why == NULL);
	ASSERT_STR_EQ(out.source, "go");
	ASSERT_U64_EQ(out.rate, 512 * 1024);
	ASSERT_EQ(out.nstacks, 2);
	f[idx] = 1;
	want = sum(&rb, f[0], f[1], f[2]);
	expect_stack(&out, 0, &want, want_b, 1);
	want = sum(&ra, f[0], f[1], f[2]);
	expect_stack(&out, 1, &want, want_a, 3);
	/* Each bucket's size kept (Go unsamples each size on its own). */
	ASSERT_EQ(out.stacks[0].size, 64);
	ASSERT_EQ(out.stacks[1].size, 64);
	ASSERT_EQ(out.nframes, 4);
	ASSERT_EQ(out.full, 0);
	/* Two reads a memory bucket (header; stack and record), one for the
	 * other type, five for the globals (flag, rate, cycle, head). */
	ASSERT_EQ(im.reads, 4 + 3 * 2 + 1);
	pt_allocs_clear(&out);
	img_free(&im);
}

/* 1.19 on: mProfCycle = cycle << 1 | flushed. Cycle 4 flushed is the word
 * 9: index 1 (9 % 3 would be 0); cycle 8 not flushed, the word 16: index
 * 2 (16 % 3 would be 1). */
TEST(gomem_go119_layout)
{
	check_published(syms119(), 4 << 1 | 1, 1);
	check_published(syms119(), 8 << 1, 2);
	check_published(syms119(), 3 << 1 | 1, 0);
}

/* 1.18: mProf = struct { cycle uint32; flushed bool }: the cycle is the
 * whole first word. 7: index 1 (read as 1.19's, 7 >> 1 = 3: index 0). */
TEST(gomem_go118_layout)
{
	check_published(syms118(), 7, 1);
	check_published(syms118(), 5, 2);
	check_published(syms118(), 0x01000000u | 9, (0x01000000 + 9) % 3);
}

/* Go 1.27: a record keeps counts only ({allocs, frees} for active and
 * each future: 8 words); the bytes are the counts times the bucket's
 * object size (64 in these images). A stripped program's rate is Go's
 * default, whatever the rate word holds, and the records say so. */
TEST(gomem_go127_counts_only)
{
	const uint64_t stk[] = { PC0 + 0x10, PC0 + 0x20 }, want_pc[] = { PC0 + 0x0f, PC0 + 0x1f };
	/* active 5/2, futures 1001/250, 2002/500, 3003/750; then padding the
	 * 16-word writer fills with a marker no reader may take */
	const uint64_t counts[16] = { 5, 2, 1001, 250, 2002, 500, 3003, 750,
				      0xdead, 0xdead, 0xdead, 0xdead, 0xdead, 0xdead, 0xdead, 0xdead };
	struct pt_gomem_syms s = syms119();
	struct pt_allocs out = { 0 };
	const char *why = "unset";
	struct image im;
	struct cyc want;

	img_init(&im, 4 << 1 | 1);   /* index 1 */
	put64(&im, SYM_RATE, 4096);
	add_bucket(&im, 1, stk, 2, (const struct rec *)counts);
	s.counts_only = 1;
	ASSERT_OK(pt_gomem_read(img_read, &im, &s, &out, &why));
	ASSERT_EQ(out.nstacks, 1);
	want = (struct cyc){ 5 + 2002, 2 + 500, (5 + 2002) * 64, (2 + 500) * 64 };
	expect_stack(&out, 0, &want, want_pc, 2);
	ASSERT_U64_EQ(out.rate, 4096);
	ASSERT_EQ(out.rate_assumed, 0);
	pt_allocs_clear(&out);

	s.rate_assumed = 1;
	s.memprofilerate = 0;
	ASSERT_OK(pt_gomem_read(img_read, &im, &s, &out, &why));
	ASSERT_U64_EQ(out.rate, 512 * 1024);
	ASSERT_EQ(out.rate_assumed, 1);
	pt_allocs_clear(&out);
	img_free(&im);
}

/* Before the first GC has published anything (every bucket's active and
 * future[idx] empty) MemProfile adds all three futures: so does the
 * reader; a bucket with counts only in a future it would otherwise leave
 * out is there. */
TEST(gomem_before_first_gc)
{
	const uint64_t stk1[] = { PC0 + 0x100 }, want1[] = { PC0 + 0xff };
	const uint64_t stk2[] = { PC0 + 0x200, PC0 + 0x300 }, want2[] = { PC0 + 0x1ff, PC0 + 0x2ff };
	struct rec r1 = record(0, 4), r2, r0;
	struct pt_allocs out = { 0 };
	const char *why;
	struct image im;
	struct cyc want;

	img_init(&im, 4 << 1 | 1);   /* index 1 */
	r1.future[1] = (struct cyc){ 0 };
	memset(&r2, 0, sizeof(r2));
	r2.future[2] = (struct cyc){ 5, 1, 5 * 4096, 4096 };
	add_bucket(&im, 1, stk1, 1, &r1);
	add_bucket(&im, 1, stk2, 2, &r2);
	/* a bucket with nothing anywhere (created, its counts not yet added):
	 * nothing to say, in either reading */
	memset(&r0, 0, sizeof(r0));
	add_bucket(&im, 1, stk1, 1, &r0);
	ASSERT_OK(pt_gomem_read(img_read, &im, &(struct pt_gomem_syms){ .mbuckets = syms119().mbuckets,
		  .mprofcycle = SYM_CYCLE, .memprofilerate = SYM_RATE, .disable = SYM_DISABLE }, &out, &why));
	ASSERT_EQ(out.nstacks, 2);
	want = sum(&r2, 1, 1, 1);
	expect_stack(&out, 0, &want, want2, 2);
	want = sum(&r1, 1, 1, 1);
	ASSERT_U64_EQ(want.allocs, 1004 + 3004);
	expect_stack(&out, 1, &want, want1, 1);
	pt_allocs_clear(&out);

	/* One count in one bucket's future[idx] is a publication: from then
	 * on each bucket is active + future[idx], and r2 has none. */
	r1.future[1] = (struct cyc){ 1, 0, 64, 0 };
	memcpy(im.heap + 48 + 8, &r1, sizeof(r1));
	ASSERT_OK(pt_gomem_read(img_read, &im, &(struct pt_gomem_syms){ .mbuckets = syms119().mbuckets,
		  .mprofcycle = SYM_CYCLE, .memprofilerate = SYM_RATE, .disable = SYM_DISABLE }, &out, &why));
	ASSERT_EQ(out.nstacks, 1);
	ASSERT_EQ(out.nframes, 1);
	want = (struct cyc){ 1, 0, 64, 0 };
	expect_stack(&out, 0, &want, want1, 1);
	pt_allocs_clear(&out);
	img_free(&im);
}

/* Only buckets of type 1 (memProfile) count; other types' stacks and
 * records are not even read, whatever their nstk says. */
TEST(gomem_other_types_skipped)
{
	struct rec r = record(2, 2);
	struct pt_allocs out = { 0 };
	struct pt_gomem_syms s = syms119();
	uint64_t stk[1] = { PC0 };
	const char *why;
	struct image im;

	img_init(&im, 0);
	for (uint64_t typ = 0; typ < 6; typ++)
		if (typ != 1)
			add_bucket(&im, typ, stk, 1, &r);
	put64(&im, im.head + 40, UINT64_MAX);   /* nstk of one of them */
	ASSERT_OK(pt_gomem_read(img_read, &im, &s, &out, &why));
	ASSERT_EQ(out.nstacks, 0);
	ASSERT_EQ(im.reads, 4 + 5);
	/* An empty list. */
	put64(&im, SYM_MBUCKETS, 0);
	ASSERT_OK(pt_gomem_read(img_read, &im, &s, &out, &why));
	ASSERT_EQ(out.nstacks, 0);
	ASSERT_STR_EQ(out.source, "go");
	img_free(&im);
}

/* Profiling off, or symbols missing: -ENOENT with a reason, before any
 * bucket is read. */
TEST(gomem_off_or_missing)
{
	struct rec r = record(2, 2);
	struct pt_allocs out = { 0 };
	struct pt_gomem_syms s;
	uint64_t stk[1] = { PC0 };
	const char *why;
	struct image im;

	img_init(&im, 0);
	add_bucket(&im, 1, stk, 1, &r);

	im.data[SYM_DISABLE - DATA] = 1;
	s = syms119();
	ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -ENOENT);
	ASSERT(why && strstr(why, "disabled memory profiling"));
	im.data[SYM_DISABLE - DATA] = 0;

	put64(&im, SYM_RATE, 0);
	ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -ENOENT);
	ASSERT(why && strstr(why, "MemProfileRate is 0"));
	put64(&im, SYM_RATE, (uint64_t)-1);
	ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -ENOENT);
	put64(&im, SYM_RATE, 1);   /* every allocation: fine */
	ASSERT_OK(pt_gomem_read(img_read, &im, &s, &out, &why));
	ASSERT_EQ(out.rate, 1);
	ASSERT_EQ(out.nstacks, 1);
	pt_allocs_clear(&out);

	s = syms119();
	s.mbuckets = 0;
	ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -ENOENT);
	ASSERT(why && strstr(why, "runtime.mbuckets"));
	s = syms119();
	s.mprofcycle = 0;
	ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -ENOENT);
	ASSERT(why && strstr(why, "mProfCycle"));
	s = syms119();
	s.memprofilerate = 0;
	ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -ENOENT);
	ASSERT(why && strstr(why, "MemProfileRate"));
	/* No flag symbol: not disabled. */
	s = syms119();
	s.disable = 0;
	ASSERT_OK(pt_gomem_read(img_read, &im, &s, &out, &why));
	ASSERT_EQ(out.nstacks, 1);
	pt_allocs_clear(&out);
	/* A global that cannot be read: rd's error. */
	s = syms119();
	s.memprofilerate = 0x10;
	ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -EFAULT);
	ASSERT(why);
	ASSERT_EQ(out.nstacks, 0);
	img_free(&im);
}

/* A stack already in out, before a read that fails: it is all out holds
 * after. */
static void prefill(struct pt_allocs *out)
{
	const uint64_t fr[2] = { 1, 2 };
	struct pt_alloc_stack c = { .alloc_objects = 9 };

	ASSERT_OK(pt_allocs_add(out, fr, 2, &c));
}

static void expect_prefill(const struct pt_allocs *out)
{
	ASSERT_EQ(out->nstacks, 1);
	ASSERT_EQ(out->nframes, 2);
	ASSERT_U64_EQ(out->stacks[0].alloc_objects, 9);
}

/* allnext loops: through the head, a bucket to itself, a long loop met
 * after a run of buckets. Each is found (-EPROTO) within a few times the
 * loop's length in reads, and out is as it was. */
TEST(gomem_hostile_allnext_loops)
{
	const uint64_t stk[2] = { PC0 + 1, PC0 + 2 };
	struct pt_gomem_syms s = syms119();
	struct rec r = record(1, 3);
	uint64_t addr[600];
	const char *why;
	struct image im;

	for (int variant = 0; variant < 4; variant++) {
		struct pt_allocs out = { 0 };
		int n = variant == 3 ? 600 : 8;

		img_init(&im, 0);
		for (int i = 0; i < n; i++)
			addr[i] = add_bucket(&im, (uint64_t)(1 + (i % 5 == 4)), stk, 2, &r);
		/* addr[0] is the tail, addr[n-1] the head. */
		if (variant == 0)
			put64(&im, addr[0] + 8, addr[n - 1]);     /* tail -> head */
		else if (variant == 1)
			put64(&im, addr[3] + 8, addr[3]);         /* a bucket to itself */
		else if (variant == 2)
			put64(&im, addr[n - 1] + 8, addr[n - 1]); /* the head to itself */
		else
			put64(&im, addr[0] + 8, addr[450]);       /* 150 in, a loop of 450 */
		im.max_reads = 4 + 2 * 4 * (uint64_t)n + 16;
		prefill(&out);
		why = NULL;
		ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -EPROTO);
		ASSERT(why && strstr(why, "loop"));
		expect_prefill(&out);
		pt_allocs_clear(&out);
		img_free(&im);
	}
}

/* A list with no end (each bucket's allnext a new one): the walk stops at
 * PT_GOMEM_MAX_BUCKETS headers. Buckets are made up as they are read. */
static int endless_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	uint64_t *reads = arg, hdr[6] = { 0, addr + 64, 2, 0, 0, 1 };

	(*reads)++;
	if (addr == SYM_MBUCKETS && len == 8) {
		uint64_t head = HEAP;

		memcpy(buf, &head, 8);
		return 0;
	}
	if (addr == SYM_RATE && len == 8) {
		uint64_t rate = 4096;

		memcpy(buf, &rate, 8);
		return 0;
	}
	if (addr >= HEAP && len == sizeof(hdr)) {
		memcpy(buf, hdr, len);
		return 0;
	}
	memset(buf, 0, len);
	return 0;
}

TEST(gomem_hostile_endless_list)
{
	struct pt_gomem_syms s = syms119();
	struct pt_allocs out = { 0 };
	uint64_t reads = 0;
	const char *why;

	ASSERT_EQ(pt_gomem_read(endless_read, &reads, &s, &out, &why), -EPROTO);
	ASSERT(why && strstr(why, "PT_GOMEM_MAX_BUCKETS"));
	ASSERT_EQ(reads, 4 + PT_GOMEM_MAX_BUCKETS);
	ASSERT_EQ(out.nstacks, 0);
	pt_allocs_clear(&out);
}

/* nstk past PT_GOMEM_MAX_STACK, an unreadable bucket, a misaligned link:
 * errors, out as it was; PT_GOMEM_MAX_STACK itself is read. */
TEST(gomem_hostile_buckets)
{
	static uint64_t big[PT_GOMEM_MAX_STACK];
	struct pt_gomem_syms s = syms119();
	struct rec r = record(1, 5);
	struct pt_allocs out = { 0 };
	uint64_t a, b;
	const char *why;
	struct image im;

	for (int i = 0; i < PT_GOMEM_MAX_STACK; i++)
		big[i] = PC0 + 16 * (uint64_t)i + 1;
	img_init(&im, 0);
	a = add_bucket(&im, 1, big, PT_GOMEM_MAX_STACK, &r);
	b = add_bucket(&im, 1, big, 3, &r);
	ASSERT_OK(pt_gomem_read(img_read, &im, &s, &out, &why));
	ASSERT_EQ(out.nstacks, 2);
	/* cut by pt_allocs_add to its maximum, leaf first */
	ASSERT_EQ(out.stacks[1].n, PT_ALLOCS_MAX_FRAMES);
	ASSERT_U64_EQ(out.frames[out.stacks[1].first + 5], PC0 + 16 * 5);
	pt_allocs_clear(&out);

	prefill(&out);
	put64(&im, a + 40, PT_GOMEM_MAX_STACK + 1);
	ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -EPROTO);
	ASSERT(why && strstr(why, "nstk"));
	expect_prefill(&out);
	put64(&im, a + 40, UINT64_MAX / 8 + 2);   /* 8 * nstk wraps to 8 */
	ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -EPROTO);
	expect_prefill(&out);
	put64(&im, a + 40, PT_GOMEM_MAX_STACK);

	/* nstk that runs past the end of what is mapped: rd fails. */
	put64(&im, b + 40, 1000);
	im.used = (size_t)(b - HEAP) + 48 + 8 * 100;
	ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -EFAULT);
	expect_prefill(&out);
	im.used = HEAP_LEN;
	put64(&im, b + 40, 3);

	/* the second bucket's header unreadable */
	im.hole = a;
	ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -EFAULT);
	ASSERT(why && strstr(why, "header"));
	expect_prefill(&out);
	im.hole = 0;
	/* a link into nowhere */
	put64(&im, b + 8, 0x7000);
	ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -EFAULT);
	expect_prefill(&out);
	/* a misaligned link */
	put64(&im, b + 8, a + 4);
	ASSERT_EQ(pt_gomem_read(img_read, &im, &s, &out, &why), -EPROTO);
	expect_prefill(&out);
	/* and back: out keeps its stack and gains the two */
	put64(&im, b + 8, a);
	ASSERT_OK(pt_gomem_read(img_read, &im, &s, &out, &why));
	ASSERT_EQ(out.nstacks, 3);
	ASSERT_U64_EQ(out.stacks[0].alloc_objects, 9);
	ASSERT_EQ(out.stacks[1].n, 3);
	ASSERT_U64_EQ(out.frames[out.stacks[1].first], PC0);
	pt_allocs_clear(&out);
	img_free(&im);
}

/* frees over allocs (a counter read mid-update, or a hostile one): kept
 * raw; the consumer clamps in-use at 0. */
TEST(gomem_counts_kept_raw)
{
	struct pt_gomem_syms s = syms119();
	struct pt_allocs out = { 0 };
	uint64_t stk[1] = { PC0 + 1 };
	const char *why;
	struct image im;
	struct rec r;

	img_init(&im, 0);
	memset(&r, 0, sizeof(r));
	r.active = (struct cyc){ 2, 5, 128, 320 };
	add_bucket(&im, 1, stk, 1, &r);
	ASSERT_OK(pt_gomem_read(img_read, &im, &s, &out, &why));
	ASSERT_EQ(out.nstacks, 1);
	expect_stack(&out, 0, &r.active, (uint64_t[]){ PC0 }, 1);
	pt_allocs_clear(&out);
	img_free(&im);
}

/* A bucket with no stack (nstk 0, or only zero PCs) is kept, with no
 * frames, as MemProfile keeps it; first into an empty out. */
TEST(gomem_empty_stacks)
{
	struct pt_gomem_syms s = syms119();
	struct pt_allocs out = { 0 };
	uint64_t zeros[3] = { 0 };
	const char *why;
	struct image im;
	struct rec r;

	img_init(&im, 0);
	memset(&r, 0, sizeof(r));
	r.active = (struct cyc){ 4, 1, 256, 64 };
	add_bucket(&im, 1, zeros, 0, &r);
	add_bucket(&im, 1, zeros, 3, &r);
	ASSERT_OK(pt_gomem_read(img_read, &im, &s, &out, &why));
	ASSERT_EQ(out.nstacks, 2);
	ASSERT_EQ(out.nframes, 0);
	expect_stack(&out, 0, &r.active, NULL, 0);
	expect_stack(&out, 1, &r.active, NULL, 0);
	pt_allocs_clear(&out);
	img_free(&im);
}

TEST(gomem_symbol_names)
{
	ASSERT_STR_EQ(pt_gomem_symbol_names[0], "runtime.mbuckets");
	ASSERT_STR_EQ(pt_gomem_symbol_names[1], "runtime.mProfCycle");
	ASSERT_STR_EQ(pt_gomem_symbol_names[2], "runtime.mProf");
	ASSERT_STR_EQ(pt_gomem_symbol_names[3], "runtime.MemProfileRate");
	ASSERT_STR_EQ(pt_gomem_symbol_names[4], "runtime.disableMemoryProfiling");
}

/* The fuzzer's seeds (tests/fuzz/make_gomem_seeds.py) read as they were
 * made to: the harness's input format, and seeds that reach the reader's
 * paths. */
struct seed {
	uint8_t bytes[4096];
	size_t len;
};

static int seed_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct seed *sd = arg;
	size_t n = sd->len - PT_GOMEM_NSYMS * 4;

	if (addr < 0x10000 || addr - 0x10000 > n || len > n - (addr - 0x10000))
		return -EFAULT;
	memcpy(buf, sd->bytes + PT_GOMEM_NSYMS * 4 + (addr - 0x10000), len);
	return 0;
}

static int read_seed(const char *name, struct pt_allocs *out)
{
	uint64_t a[PT_GOMEM_NSYMS];
	struct pt_gomem_syms s;
	struct seed sd;
	const char *why;
	char rel[128], path[4300];
	FILE *f;

	/* A committed seed (tests/fuzz/corpus/gomem), found from any directory. */
	snprintf(rel, sizeof(rel), "tests/fuzz/corpus/gomem/%s", name);
	if (!(f = fopen(harness_src(rel, path, sizeof(path)), "rb")))
		FAIL_AT("%s: %s (a committed seed)", path, strerror(errno));
	sd.len = fread(sd.bytes, 1, sizeof(sd.bytes), f);
	fclose(f);
	ASSERT(sd.len > PT_GOMEM_NSYMS * 4);
	for (int i = 0; i < PT_GOMEM_NSYMS; i++) {
		uint32_t off;

		memcpy(&off, sd.bytes + 4 * i, 4);
		a[i] = off == UINT32_MAX ? 0 : 0x10000 + (uint64_t)off;
	}
	s = (struct pt_gomem_syms){ .mbuckets = a[0], .mprofcycle = a[1], .mprof = a[2],
				    .memprofilerate = a[3], .disable = a[4] };
	return pt_gomem_read(seed_read, &sd, &s, out, &why);
}

TEST(gomem_fuzz_seeds)
{
	const uint64_t f3[] = { PC0 + 0x4f, PC0 + 0x5f }, f1[] = { PC0 + 0xf, PC0 + 0x11f, PC0 + 0x22f };
	struct pt_allocs out = { 0 };
	struct cyc want;

	/* cycle word 9: 1.19 reads cycle 4 (future 1), 1.18 cycle 9 (future 0) */
	ASSERT_OK(read_seed("go119", &out));
	ASSERT_EQ(out.nstacks, 2);
	want = (struct cyc){ 7 + 9, 1 + 9, 16 * 64, 10 * 64 };
	expect_stack(&out, 0, &want, f3, 2);
	want = (struct cyc){ 30 + 2, 12 + 1, 32 * 64, 13 * 64 };
	expect_stack(&out, 1, &want, f1, 3);
	pt_allocs_clear(&out);
	ASSERT_OK(read_seed("go118", &out));
	ASSERT_EQ(out.nstacks, 2);
	want = (struct cyc){ 7 + 4, 1 + 4, 11 * 64, 5 * 64 };
	expect_stack(&out, 0, &want, f3, 2);
	pt_allocs_clear(&out);
	ASSERT_OK(read_seed("before-gc", &out));
	ASSERT_EQ(out.nstacks, 2);
	ASSERT_U64_EQ(out.stacks[0].alloc_objects, 6);
	ASSERT_U64_EQ(out.stacks[1].alloc_objects, 6);
	ASSERT_U64_EQ(out.stacks[1].free_objects, 1);
	pt_allocs_clear(&out);
	ASSERT_EQ(read_seed("loop", &out), -EPROTO);
	ASSERT_EQ(read_seed("nstk-huge", &out), -EPROTO);
	ASSERT_EQ(read_seed("disabled", &out), -ENOENT);
	ASSERT_EQ(out.nstacks, 0);
	pt_allocs_clear(&out);
}
