/* libpodprof-alloc.so: the allocation agent, loaded into an application
 * with LD_PRELOAD. It takes the place of the malloc family (and of
 * dlclose, only to hear of unloads: agent/unwind.h), passes every
 * call to glibc's own allocator (its __libc_* entry points: no dlsym, so it
 * works from the first allocation the loader makes, before any
 * constructor), and samples like Go's runtime.MemProfileRate: each thread
 * counts down the bytes it allocates from an exponential draw of mean RATE
 * (PODPROF_ALLOC_RATE, default 512 KiB; 0 turns sampling off); the
 * allocation that reaches the countdown's end is recorded with its stack
 * (agent/records.c) and the next countdown drawn. The fast path is a
 * compare and a subtraction, and a free one load. The blocks stay glibc's
 * own, so malloc_usable_size and every other libc call work on any of
 * them.
 *
 * The agent never harms its host: it never blocks on podprof (podprof reads
 * its records from outside), never aborts, never calls the hooked functions
 * itself (a thread inside the agent passes through), keeps a fixed area,
 * and leaves errno as the allocator leaves it. */
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/area.h"
#include "agent/findobj.h"
#include "agent/records.h"
#include "agent/unwind.h"
#include "agent/weight.h"

#define EXPORT __attribute__((visibility("default")))

/* glibc's allocator itself (GLIBC_2.2.5 on x86-64). */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);
extern void *__libc_valloc(size_t n);
extern void *__libc_pvalloc(size_t n);

/* Per thread, initial-exec (a preloaded library's TLS is static: no
 * allocation on first use), zero at first: left 0 sends the next allocation
 * to due() (a thread's first, or the next one after an allocation of the
 * agent's own, a failed malloc, records being set up), which seeds the
 * thread's draws once (seeded). */
struct tl {
	uint64_t left;          /* the allocation of at least this many bytes is sampled */
	uint64_t rng;
	uint8_t busy;           /* inside the agent: pass through */
	uint8_t seeded;
};
static __thread struct tl tl __attribute__((tls_model("initial-exec")));

static uint64_t next_random(void)
{
	uint64_t x = tl.rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	tl.rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* An exponential draw of mean rate, in [1, 64 * rate]. */
static uint64_t draw(uint64_t rate)
{
	double u, x;

	if (rate <= 1)
		return 0;   /* every allocation (0 bytes too: a countdown at 0 takes any) */
	u = (double)((next_random() >> 11) + 1) * 0x1.0p-53;   /* (0, 1] */
	x = ppa_neg_log(u) * (double)rate;
	if (x < 1)
		x = 1;
	if (x > 64.0 * (double)rate)
		x = 64.0 * (double)rate;
	return (uint64_t)x;
}

static void seed(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	tl.rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
		 (uint64_t)(uintptr_t)&tl ^ ((uint64_t)syscall(SYS_gettid) << 40);
	if (!tl.rng)
		tl.rng = 0x9e3779b97f4a7c15ull;
	tl.seeded = 1;
}

/* The countdown reached its end at an allocation of n bytes: whether to
 * record it. 1: yes, with the thread marked busy (sample() records, then
 * draws the next countdown and clears it); 0: no (an allocation of the
 * agent's own, sampling off or being set up, or a thread's first
 * countdown just drawn and not reached), the countdown set. */
static __attribute__((noinline)) int due(size_t n)
{
	int r;

	if (tl.busy) {
		tl.left = 0;   /* an allocation of the agent's own: the next one samples */
		return 0;
	}
	tl.busy = 1;
	r = ppa_records_ready();
	if (r < 0) {
		tl.left = UINT64_MAX;  /* sampling off: never come back */
	} else if (r == 0) {
		tl.left = 0;           /* being set up by another thread: the next one looks again */
	} else if (!tl.seeded) {
		/* The thread's first countdown, which this allocation starts:
		 * it is sampled if it reaches it, as any other. */
		uint64_t c;

		seed();
		c = draw(ppa_records_rate());
		if (n >= c)
			return 1;
		tl.left = c - n;
	} else {
		return 1;
	}
	tl.busy = 0;
	return 0;
}

/* Records the allocation of n bytes at p if it is due, with the stack of
 * the hook this is inlined into (the unwinding starts there). */
static inline __attribute__((always_inline)) void sample(void *p, size_t n)
{
	int e = errno;

	if (due(n)) {
		uint64_t f[PPA_MAX_FRAMES];

		ppa_records_alloc(p, n, f, ppa_records_capture(f));
		tl.left = draw(ppa_records_rate());
		tl.busy = 0;
	}
	errno = e;
}

/* At start-up, before the application's constructors (a preloaded
 * library's run first) and outside any malloc call: the unwinder's lookup
 * of glibc's _dl_find_object, which takes the loader's lock. Its own
 * allocations (dlerror's buffer) pass through. */
static __attribute__((constructor)) void start(void)
{
	uint8_t was = tl.busy;

	tl.busy = 1;
	ppa_find_object_init();
	tl.busy = was;
}

/* Go's rule: an allocation is sampled when it reaches the countdown's end
 * (size >= what was left). Unsigned: one compare, and the countdown
 * stored only when it goes on (a signed subtraction stored every time,
 * with free's multiplying hash, cost 0.3-0.6 ns a pair more: see
 * docs/BENCHMARKS.md). A signal handler's allocation between the load and
 * the store is counted, or its fresh draw overwritten, once: a small bias
 * of that one countdown, never a stuck one. */
static inline __attribute__((always_inline)) int counted(size_t n)
{
	uint64_t l = tl.left;

	if (__builtin_expect(l > n, 1)) {
		tl.left = l - n;
		return 1;
	}
	return 0;
}

static inline __attribute__((always_inline)) void note(void *p, size_t n)
{
	if (!counted(n))
		sample(p, n);
}

/* Counts p's free if it was sampled. Returns 1 with *b set if it was. */
static inline int forget(void *p, struct ppa_block *b)
{
	int e, r;

	if (__builtin_expect(!ppa_records_maybe(p), 1) || tl.busy)
		return 0;
	e = errno;
	tl.busy = 1;
	r = ppa_records_free(p, b);
	tl.busy = 0;
	errno = e;
	return r;
}

/* malloc's sampled case, out of line: the common case is a compare, a
 * subtraction and a tail call to glibc's (an allocation that fails counts
 * down all the same). */
static __attribute__((noinline)) void *malloc_sampled(size_t n)
{
	void *p = __libc_malloc(n);

	if (p)
		sample(p, n);
	else
		tl.left = 0;   /* the countdown ended all the same: the next one samples */
	return p;
}

EXPORT void *malloc(size_t n)
{
	if (counted(n))
		return __libc_malloc(n);
	return malloc_sampled(n);
}

/* free of a block the filter lets through, out of line likewise. */
static __attribute__((noinline)) void free_maybe(void *p)
{
	struct ppa_block b;

	if (p)
		forget(p, &b);
	__libc_free(p);
}

EXPORT void free(void *p)
{
	if (__builtin_expect(!ppa_records_maybe(p), 1))
		return __libc_free(p);
	free_maybe(p);
}

EXPORT void *calloc(size_t n, size_t size)
{
	size_t total;
	void *p = __libc_calloc(n, size);   /* overflow: ENOMEM, as libc's */

	if (p && !__builtin_mul_overflow(n, size, &total))
		note(p, total);
	return p;
}

EXPORT void *realloc(void *old, size_t n)
{
	struct ppa_block b;
	int was = old ? forget(old, &b) : 0;
	void *p = __libc_realloc(old, n);

	if (p) {
		note(p, n);
	} else if (was && n) {
		int e = errno;

		tl.busy = 1;
		ppa_records_unfree(old, &b);   /* failed: the old block lives on */
		tl.busy = 0;
		errno = e;
	}
	return p;
}

EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(old, total);
}

EXPORT void *memalign(size_t align, size_t n)
{
	void *p = __libc_memalign(align, n);

	if (p)
		note(p, n);
	return p;
}

/* glibc 2.36's aligned_alloc is its memalign. */
EXPORT void *aligned_alloc(size_t align, size_t n)
{
	return memalign(align, n);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	int e = errno;
	void *p;

	if (!align || align % sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	if (!(p = __libc_memalign(align, n))) {
		errno = e;
		return ENOMEM;
	}
	note(p, n);
	*out = p;
	return 0;
}

EXPORT void *valloc(size_t n)
{
	void *p = __libc_valloc(n);

	if (p)
		note(p, n);
	return p;
}

EXPORT void *pvalloc(size_t n)
{
	void *p = __libc_pvalloc(n);

	if (p)
		note(p, n);
	return p;
}

/* dlclose, passed to glibc's: the fast walk's cached rules read before it
 * are not used after it if it unloaded an object (agent/unwind.h), since
 * another object may be loaded where that one was. Without glibc's (none
 * found: a glibc before 2.34 whose libdl.so.2 was not loaded at start) the
 * call fails, with no message for dlerror. */
EXPORT int dlclose(void *handle)
{
	ppa_dlclose_fn *real = ppa_next_dlclose();

	return real ? ppa_unwind_dlclose(handle, real) : -1;
}
