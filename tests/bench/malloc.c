/* bench-malloc: a malloc-bound microbenchmark for the allocation agent
 * (make bench runs it alone and under LD_PRELOAD=libpodprof-alloc.so, side
 * by side). Each of THREADS threads makes PAIRS malloc/free pairs of sizes
 * drawn uniformly from 16 B to 1 KiB, BATCH blocks live at a time: BATCH 1
 * frees each block right after its malloc; BATCH N mallocs N blocks, then
 * frees them in the order they were made. Every block is written once (its
 * first byte), so no pair can be optimised away.
 *   bench-malloc [-t THREADS] [-n PAIRS] [-b BATCH]
 * prints one line:
 *   pairs=<all threads> pair_ns=<CPU ns per pair> malloc_ns=<CPU ns per malloc> free_ns=<per free>
 * CPU time is each thread's own (CLOCK_THREAD_CPUTIME_ID), summed, so that
 * more threads than cores do not count each other's time. malloc_ns and
 * free_ns come from timing each phase of a batch apart, only for BATCH >=
 * 256 (a clock read per phase costs ~0.2 ns per block there); else "-".
 * A first tenth of the pairs, untimed, warms the allocator up.
 *
 *   bench-malloc -s LEVELS
 * instead allocates one 64 B block from each of 2^LEVELS distinct call
 * stacks (LEVELS <= 16), keeps them, prints "ready <blocks>" and waits for
 * SIGTERM: with PODPROF_ALLOC_RATE=1 the agent records every stack, which
 * is the heaviest record area podprof has to read. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NSIZES 4096

static long pairs = 4000000, batch = 1;
static int threads = 1;
static pthread_barrier_t start;

static struct result {
	double all_ns, malloc_ns, free_ns;
} *results;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* n pairs, batch live at a time; phase times into r when split. */
static void run(char **live, const uint16_t *sizes, long n, int split, struct result *r)
{
	unsigned k = 0;

	for (long done = 0; done < n; done += batch) {
		long m = n - done < batch ? n - done : batch;
		uint64_t t0 = split ? now_ns() : 0, t1;

		for (long i = 0; i < m; i++) {
			char *p = malloc(sizes[k++ % NSIZES]);

			if (!p)
				abort();
			p[0] = (char)i;
			live[i] = p;
		}
		__asm__ volatile("" : : "r"(live) : "memory");
		if (split) {
			t1 = now_ns();
			r->malloc_ns += (double)(t1 - t0);
			t0 = t1;
		}
		for (long i = 0; i < m; i++)
			free(live[i]);
		if (split)
			r->free_ns += (double)(now_ns() - t0);
	}
}

static void *worker(void *arg)
{
	struct result *r = arg;
	uint64_t s = 0x9e3779b97f4a7c15ull ^ (uint64_t)(r - results + 1), t0;   /* the same sizes every run */
	uint16_t *sizes = malloc(NSIZES * sizeof(*sizes));
	char **live = malloc((size_t)batch * sizeof(*live));
	struct result warm = { 0, 0, 0 };
	int split = batch >= 256;

	if (!sizes || !live)
		abort();
	for (int i = 0; i < NSIZES; i++)
		sizes[i] = (uint16_t)(16 + xorshift(&s) % (1024 - 16 + 1));
	pthread_barrier_wait(&start);
	run(live, sizes, pairs / 10, split, &warm);
	t0 = now_ns();
	run(live, sizes, pairs, split, r);
	r->all_ns = (double)(now_ns() - t0);
	free(live);
	free(sizes);
	return NULL;
}

/* ---- -s: many distinct stacks ------------------------------------------ */

static void *kept[1 << 16];
static unsigned nkept;
static volatile sig_atomic_t stop;

static volatile unsigned calls_a, calls_b;   /* a and b differ: not folded into one */

static void descend_a(unsigned bits, int level);
static void descend_b(unsigned bits, int level);

/* Two functions calling each other as bits says: each path is a stack. */
static __attribute__((noinline)) void step(unsigned bits, int level)
{
	if (level == 0) {
		void *p = malloc(64);

		if (!p)
			abort();
		kept[nkept++] = p;
		return;
	}
	if (bits & 1)
		descend_a(bits >> 1, level - 1);
	else
		descend_b(bits >> 1, level - 1);
	__asm__ volatile("" : : : "memory");   /* no tail call: keep the frame */
}

static __attribute__((noinline)) void descend_a(unsigned bits, int level)
{
	calls_a++;
	step(bits, level);
	__asm__ volatile("" : : : "memory");
}

static __attribute__((noinline)) void descend_b(unsigned bits, int level)
{
	calls_b++;
	step(bits, level);
	__asm__ volatile("" : : : "memory");
}

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static int stacks(int levels)
{
	signal(SIGTERM, on_term);
	for (unsigned b = 0; b < (1u << levels); b++)
		step(b, levels);
	printf("ready %u\n", nkept);
	fflush(stdout);
	while (!stop)
		pause();
	for (unsigned i = 0; i < nkept; i++)
		free(kept[i]);
	return 0;
}

int main(int argc, char **argv)
{
	struct result *r, sum = { 0, 0, 0 };
	pthread_t *t;
	int c, levels = -1;

	while ((c = getopt(argc, argv, "t:n:b:s:")) != -1) {
		if (c == 't')
			threads = atoi(optarg);
		else if (c == 'n')
			pairs = atol(optarg);
		else if (c == 'b')
			batch = atol(optarg);
		else if (c == 's')
			levels = atoi(optarg);
		else
			return 2;
	}
	if (levels >= 0)
		return levels <= 16 ? stacks(levels) : 2;
	if (threads < 1 || threads > 256 || pairs < 1 || batch < 1)
		return 2;
	r = results = calloc((size_t)threads, sizeof(*r));
	t = calloc((size_t)threads, sizeof(*t));
	if (!r || !t || pthread_barrier_init(&start, NULL, (unsigned)threads))
		return 1;
	for (int i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, worker, &r[i]))
			return 1;
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		sum.all_ns += r[i].all_ns;
		sum.malloc_ns += r[i].malloc_ns;
		sum.free_ns += r[i].free_ns;
	}
	printf("pairs=%ld pair_ns=%.2f", pairs * threads, sum.all_ns / (double)(pairs * threads));
	if (batch >= 256)
		printf(" malloc_ns=%.2f free_ns=%.2f\n", sum.malloc_ns / (double)(pairs * threads),
		       sum.free_ns / (double)(pairs * threads));
	else
		printf(" malloc_ns=- free_ns=-\n");
	free(r);
	free(t);
	return 0;
}
