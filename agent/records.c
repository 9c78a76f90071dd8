/* The agent's records (see records.h and area.h). One anonymous private
 * mapping, set up on the first sampled allocation:
 *
 *   [struct ppa_area][stack records ...][stack index][live table]
 *
 * The first two are what podprof reads. The index finds a stack's record
 * by its hash; the live table holds each sampled block still allocated
 * (address, stack, size; open addressing, at most half full, removal by
 * backward shift). The filter, in the agent's own data (records.h), counts
 * live sampled blocks per hash of the address (a byte each, stuck at 255),
 * so that a free of any other block costs one load. A spin lock, taken only for sampled events and frees the
 * filter lets through, guards the tables; a thread that cannot take it
 * soon drops the event and counts it, so nothing ever waits long, not even
 * a fork child that inherited the lock held (vfork, _Fork). Stacks are
 * captured before the lock, from the CFI (no frame pointers needed): by
 * agent/unwind.c's cached rules, or GCC's unwinder (linked in) where they
 * do not reach; both find objects through agent/findobj.c (glibc's
 * _dl_find_object, no loader lock, or before glibc 2.35 dl_iterate_phdr). */
#include "agent/records.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "agent/area.h"
#include "agent/findobj.h"
#include "agent/weight.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

#define MAX_STACKS 16384u
#define INDEX_SLOTS (2u * MAX_STACKS)
#define LIVE_SLOTS (1u << 17)           /* at most LIVE_SLOTS / 2 live sampled blocks */
#define STACK_SIZE (sizeof(struct ppa_stack) + PPA_MAX_FRAMES * sizeof(uint64_t))
#define PAGE 4096u
#define ROUND(x) (((x) + PAGE - 1) / PAGE * PAGE)

struct live {
	uint64_t addr;                  /* 0: empty */
	uint32_t stack;
	uint32_t reserved;
	uint64_t size;
};

enum { ST_NONE, ST_SETTING, ST_READY, ST_OFF };

/* The one symbol podprof looks for. */
__attribute__((visibility("default"))) struct ppa_header podprof_alloc_header = {
	{ 'P', 'O', 'D', 'P', 'R', 'O', 'F', 'A' }, PPA_VERSION, sizeof(struct ppa_header), 0, 0,
};

uint8_t ppa__filter[1u << PPA_FILTER_BITS];   /* see records.h; atomic loads and stores */

static struct {
	int state;                      /* ST_*, atomic */
	uint64_t rate;
	struct ppa_area *area;
	unsigned char *stacks;
	uint32_t *index;                /* stack number + 1, 0: empty */
	struct live *live;
	uint32_t nlive;
	int lock;                       /* atomic */
	int fork_locked;
	int fork_quiet;                 /* no thread in the loader's lock at the fork */
} R;

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}


/* ---- the lock: short and bounded --------------------------------------- */

static int lock_take(void)
{
	/* Spin a little, then yield: a holder that lost its core (a busy
	 * machine) gets it back; past about a thousand yields (a fork child
	 * whose lock was another thread's, or a holder stopped) the event is
	 * dropped and counted, never waited for. */
	for (int i = 0; i < 64 + 1024; i++) {
		if (!__atomic_exchange_n(&R.lock, 1, __ATOMIC_ACQUIRE))
			return 1;
		if (i >= 64)
			sched_yield();
		else
			__builtin_ia32_pause();
	}
	return 0;
}

static void lock_give(void)
{
	__atomic_store_n(&R.lock, 0, __ATOMIC_RELEASE);
}

static void count(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

/* ---- set-up ------------------------------------------------------------- */

static uint64_t read_rate(void)
{
	const char *s = getenv(PPA_RATE_ENV);
	uint64_t v = 0;

	if (!s || !*s)
		return PPA_DEFAULT_RATE;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > PPA_MAX_RATE)
			return PPA_MAX_RATE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (*s)
		return PPA_DEFAULT_RATE;   /* not a number: the default */
	return v > PPA_MAX_RATE ? PPA_MAX_RATE : v;
}

static _Unwind_Reason_Code stop(struct _Unwind_Context *c, void *arg)
{
	(void)c;
	(void)arg;
	return _URC_END_OF_STACK;
}

static void setup(void)
{
	size_t off_stacks = ROUND(sizeof(struct ppa_area));
	size_t off_index = off_stacks + ROUND((size_t)MAX_STACKS * STACK_SIZE);
	size_t off_live = off_index + ROUND(INDEX_SLOTS * sizeof(uint32_t));
	size_t len = off_live + ROUND(LIVE_SLOTS * sizeof(struct live));
	struct timespec ts;
	unsigned char *m;

	R.rate = read_rate();
	if (!R.rate) {
		__atomic_store_n(&R.state, ST_OFF, __ATOMIC_RELEASE);
		return;
	}
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		__atomic_store_n(&R.state, ST_OFF, __ATOMIC_RELEASE);
		return;
	}
	prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)m, len, "podprof-alloc");
	R.area = (struct ppa_area *)(void *)m;
	R.stacks = m + off_stacks;
	R.index = (uint32_t *)(void *)(m + off_index);
	R.live = (struct live *)(void *)(m + off_live);
	memcpy(R.area->magic, PPA_AREA_MAGIC, 8);
	R.area->version = PPA_VERSION;
	R.area->area_header_size = sizeof(struct ppa_area);
	R.area->rate = R.rate;
	R.area->stacks_off = off_stacks;
	R.area->stack_size = (uint32_t)STACK_SIZE;
	R.area->max_frames = PPA_MAX_FRAMES;
	R.area->max_stacks = MAX_STACKS;
	R.area->pid = (uint64_t)getpid();
	clock_gettime(CLOCK_REALTIME, &ts);
	R.area->start_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	pthread_atfork(ppa_records_fork_prepare, ppa_records_fork_parent, ppa_records_fork_child);
	/* The unwinder's one-time set-up (its table of register sizes), done
	 * here, before any thread can unwind: the agent's libgcc has no
	 * pthread_once (see the Makefile), and a thread that found the table
	 * half written by another would abort. The state's release below
	 * publishes it. */
	_Unwind_Backtrace(stop, NULL);
	podprof_alloc_header.area_size = (uint64_t)off_index;   /* what podprof may read */
	__atomic_store_n(&podprof_alloc_header.area, (uint64_t)(uintptr_t)m, __ATOMIC_RELEASE);
	__atomic_store_n(&R.state, ST_READY, __ATOMIC_RELEASE);
}

int ppa_records_ready(void)
{
	int st = __atomic_load_n(&R.state, __ATOMIC_ACQUIRE);

	if (st == ST_READY)
		return 1;
	if (st == ST_OFF)
		return -1;
	if (st == ST_NONE && __atomic_compare_exchange_n(&R.state, &st, ST_SETTING, 0,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		setup();
		return __atomic_load_n(&R.state, __ATOMIC_ACQUIRE) == ST_READY ? 1 : -1;
	}
	return 0;   /* another thread is setting up */
}

uint64_t ppa_records_rate(void)
{
	return R.rate;
}

/* ---- stacks ------------------------------------------------------------- */

_Unwind_Reason_Code ppa_records_step(struct _Unwind_Context *c, void *arg)
{
	struct ppa_walk *w = arg;
	uintptr_t ip = _Unwind_GetIP(c);

	if (!ip)
		return _URC_END_OF_STACK;
	if (!w->n && ip >= (uintptr_t)__ehdr_start && ip < (uintptr_t)__etext)
		return _URC_NO_REASON;   /* the agent's own frames, at the top */
	if (w->n >= PPA_MAX_FRAMES)
		return _URC_END_OF_STACK;
	w->f[w->n++] = ip;
	return _URC_NO_REASON;
}

static struct ppa_stack *stack_at(uint32_t i)
{
	return (struct ppa_stack *)(void *)(R.stacks + (size_t)i * STACK_SIZE);
}

/* The record of stack f[0..n) with hash h, added if new. Returns its number,
 * or -1 when the records are full. Under the lock. */
static int64_t stack_find(uint64_t h, const uint64_t *f, uint32_t n)
{
	uint32_t mask = INDEX_SLOTS - 1, i = (uint32_t)h & mask;
	uint64_t nst = R.area->nstacks;
	struct ppa_stack *s;

	for (;; i = (i + 1) & mask) {
		uint32_t k = R.index[i];

		if (!k)
			break;
		s = stack_at(k - 1);
		if (s->hash == h && s->nframes == n && !memcmp(s->frames, f, n * sizeof(*f)))
			return k - 1;
	}
	if (nst >= MAX_STACKS) {
		R.area->flags |= PPA_F_STACKS_FULL;
		return -1;
	}
	s = stack_at((uint32_t)nst);
	s->hash = h;
	s->nframes = n;
	memcpy(s->frames, f, n * sizeof(*f));
	R.index[i] = (uint32_t)nst + 1;
	__atomic_store_n(&R.area->nstacks, nst + 1, __ATOMIC_RELEASE);
	return (int64_t)nst;
}

/* Counts (sign 1) or takes back (sign -1) a sample's allocation (freed 0)
 * or the free of its block (freed 1), of size bytes, on s: as sampled, and
 * estimated. */
static void tally(struct ppa_stack *s, int freed, uint64_t size, int sign)
{
	double w = ppa_weight(size, R.rate);
	uint64_t *n = freed ? &s->free_objects : &s->alloc_objects;
	uint64_t *bytes = freed ? &s->free_bytes : &s->alloc_bytes;
	uint64_t *est_n = freed ? &s->est_free_objects : &s->est_alloc_objects;
	uint64_t *est_bytes = freed ? &s->est_free_bytes : &s->est_alloc_bytes;

	*n += (uint64_t)sign;
	*bytes += (uint64_t)sign * size;
	*est_n += (uint64_t)sign * (uint64_t)(w + 0.5);
	*est_bytes += (uint64_t)sign * (uint64_t)((double)size * w + 0.5);
}

/* ---- live sampled blocks ------------------------------------------------ */

static uint32_t live_home(uint64_t addr)
{
	return (uint32_t)mix(addr) & (LIVE_SLOTS - 1);
}

static struct live *live_find(uint64_t addr)
{
	for (uint32_t i = live_home(addr);; i = (i + 1) & (LIVE_SLOTS - 1)) {
		if (!R.live[i].addr)
			return NULL;
		if (R.live[i].addr == addr)
			return &R.live[i];
	}
}

/* Whether addr is in the table, looked at without the lock (a free that
 * could not take it): the table is always mapped and at most half full, so
 * the look is safe and ends, but its answer may be stale. */
static int live_seen(uint64_t addr)
{
	uint32_t i = live_home(addr);

	for (int k = 0; k < 64; k++, i = (i + 1) & (LIVE_SLOTS - 1)) {
		uint64_t a = __atomic_load_n(&R.live[i].addr, __ATOMIC_RELAXED);

		if (!a)
			return 0;
		if (a == addr)
			return 1;
	}
	return 0;
}

static void filter_add(const void *p, int d)
{
	uint8_t *c = &ppa__filter[ppa__filter_at(p)];
	uint8_t v = __atomic_load_n(c, __ATOMIC_RELAXED);

	if (v == 255)
		return;   /* stuck: too many to count */
	__atomic_store_n(c, (uint8_t)(v + d), __ATOMIC_RELAXED);
}

/* Removes slot e by shifting back the entries after it that it displaced. */
static void live_remove(struct live *e)
{
	uint32_t mask = LIVE_SLOTS - 1, i = (uint32_t)(e - R.live), j = i;

	filter_add((const void *)(uintptr_t)e->addr, -1);
	for (;;) {
		j = (j + 1) & mask;
		if (!R.live[j].addr)
			break;
		uint32_t h = live_home(R.live[j].addr);
		/* j's entry may move to i when its home is not in (i, j]. */
		if ((i <= j) ? (h <= i || h > j) : (h <= i && h > j)) {
			R.live[i] = R.live[j];
			i = j;
		}
	}
	R.live[i].addr = 0;
	R.nlive--;
}

static void live_put(uint64_t addr, uint32_t stack, uint64_t size)
{
	struct live *e = live_find(addr);
	uint32_t i;

	if (e) {
		/* Still here: its free was not seen (lost while busy). */
		tally(stack_at(e->stack), 1, e->size, 1);
		e->stack = stack;
		e->size = size;
		return;
	}
	if (R.nlive >= LIVE_SLOTS / 2) {
		R.area->flags |= PPA_F_LIVE_FULL;
		return;
	}
	for (i = live_home(addr); R.live[i].addr; i = (i + 1) & (LIVE_SLOTS - 1)) {
	}
	R.live[i] = (struct live){ addr, stack, 0, size };
	R.nlive++;
	filter_add((const void *)(uintptr_t)addr, 1);
}

/* ---- events ------------------------------------------------------------- */

void ppa_records_alloc(void *p, size_t size, const uint64_t *f, uint32_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull;
	struct ppa_stack *s;
	int64_t k;

	for (uint32_t i = 0; i < n; i++)
		h = mix(h ^ f[i]);
	if (!lock_take()) {
		count(&R.area->dropped_samples);
		return;
	}
	R.area->samples++;
	if ((k = stack_find(h, f, n)) < 0) {
		count(&R.area->dropped_samples);
		lock_give();
		return;
	}
	s = stack_at((uint32_t)k);
	tally(s, 0, size, 1);
	live_put((uint64_t)(uintptr_t)p, (uint32_t)k, size);
	lock_give();
}


int ppa_records_free(const void *p, struct ppa_block *b)
{
	struct live *e;
	struct ppa_stack *s;

	if (__atomic_load_n(&R.state, __ATOMIC_ACQUIRE) != ST_READY)
		return 0;   /* a fork child's records, stopped */
	if (!lock_take()) {
		/* Only a sampled block's free is lost: not the free of another
		 * that shares its filter byte. */
		if (live_seen((uint64_t)(uintptr_t)p))
			count(&R.area->lost_frees);
		return 0;
	}
	if (!(e = live_find((uint64_t)(uintptr_t)p))) {
		lock_give();
		return 0;
	}
	b->stack = e->stack;
	b->size = e->size;
	s = stack_at(e->stack);
	tally(s, 1, e->size, 1);
	live_remove(e);
	lock_give();
	return 1;
}

void ppa_records_unfree(const void *p, const struct ppa_block *b)
{
	struct ppa_stack *s;

	if (__atomic_load_n(&R.state, __ATOMIC_ACQUIRE) != ST_READY)
		return;   /* never after a free that found its block: defensive */
	if (!lock_take()) {
		count(&R.area->lost_frees);
		return;
	}
	s = stack_at(b->stack);
	tally(s, 1, b->size, -1);
	live_put((uint64_t)(uintptr_t)p, b->stack, b->size);
	lock_give();
}

/* ---- fork --------------------------------------------------------------- */

void ppa_records_fork_prepare(void)
{
	R.fork_quiet = ppa_find_object_fork_prepare();
	R.fork_locked = lock_take();
}

void ppa_records_fork_parent(void)
{
	if (R.fork_locked)
		lock_give();
	ppa_find_object_fork_parent();
}

void ppa_records_fork_child(void)
{
	ppa_find_object_fork_child();
	ppa_unwind_fork_child();
	R.area->pid = (uint64_t)getpid();
	R.area->flags |= PPA_F_FORKED;
	if (R.fork_locked)
		lock_give();
	if (R.fork_locked && R.fork_quiet)
		return;
	/* Another thread held the lock at the fork: its tables may be half
	 * updated. Or one was walking the loader's list (findobj.c), whose
	 * lock the child holds for no one: an unwinding would wait forever.
	 * The child's records stop (a free the filter lets through finds
	 * them off). */
	R.area->flags |= PPA_F_STOPPED;
	__atomic_store_n(&R.state, ST_OFF, __ATOMIC_RELEASE);
}
