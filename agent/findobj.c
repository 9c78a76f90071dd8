/* The object holding a code address (see findobj.h). GCC's unwinder asks
 * for each frame's pc which object maps it and where that object's
 * .eh_frame_hdr is (PT_GNU_EH_FRAME); of struct dl_find_object it reads
 * dlfo_eh_frame only (x86-64 has no dlfo_eh_dbase). Two ways to answer:
 *
 *  - glibc >= 2.35: its own _dl_find_object, lock-free and exact. Found
 *    with dlvsym bound to its GLIBC_2.2.5 version (a plain reference, or
 *    dlvsym@GLIBC_2.34, would make ld.so refuse to start the application
 *    on an older glibc), from the agent's constructor;
 *  - otherwise, and before the constructor (the loader's and libc's first
 *    allocations): dl_iterate_phdr, libgcc's own way before glibc 2.35,
 *    the object whose PT_LOAD segment holds pc. Nothing is cached: the
 *    answer is read from the loader's list each time, under its lock, so
 *    no dlclose can leave a stale one.
 *
 * Locks. dlvsym takes the loader's dl_load_lock, which a thread in dlopen
 * holds while it runs the new objects' constructors (application code,
 * which may wait for a lock held by a thread now in malloc): a lookup from
 * inside malloc could then deadlock. So it runs from the agent's
 * constructor, at start-up (hooks.c), or from a dlclose (which takes that
 * lock next anyway), and malloc never waits for it: until _dl_find_object
 * is stored, readers take the dl_iterate_phdr way.
 * dl_iterate_phdr takes only dl_load_write_lock, not dl_load_lock: a
 * recursive lock the loader holds just to link or unlink an object,
 * calling nothing but free meanwhile (dlclose), where the agent never
 * unwinds; the callback below takes no lock and allocates nothing. But
 * fork does not reset that lock in the child (glibc 2.31, 2.36): a fork
 * while a thread walks the list leaves the child's lock held by no one,
 * and the child's next dl_iterate_phdr, dlopen, dlclose or C++ exception
 * waits forever. So the walks pass a gate the records' fork handler closes,
 * waiting (bounded) until none is inside (ppa_find_object_fork_prepare).
 * The agent's own code, where every unwinding starts (libgcc aborts if it
 * cannot find that first frame), is found from its own headers: no loader
 * call, whatever the gate. */
#include "agent/findobj.h"

#include <link.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Their oldest versions, which every glibc on x86-64 has: in libc.so.6
 * since 2.34, and before in libdl.so.2, which the agent does not load
 * itself (weak: NULL when libdl.so.2 is not among the objects loaded at
 * start; there is then no _dl_find_object to find anyway, and no glibc
 * dlclose for the agent's own to call: ppa_next_dlclose). */
__asm__(".symver dlvsym,dlvsym@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
extern __typeof(dlvsym) dlvsym __attribute__((weak));
extern __typeof(dlerror) dlerror __attribute__((weak));

/* What the Makefile's copy of libgcc_eh.a calls pthread_once and
 * __pthread_key_create: undefined, weak and hidden (the strictest
 * visibility of all references wins), so the link sets them to 0 and the
 * agent neither exports nor looks up either. */
extern char ppa_no_pthread_once[] __attribute__((weak, visibility("hidden")));
extern char ppa_no_pthread_key_create[] __attribute__((weak, visibility("hidden")));
__attribute__((used)) static const void *const gthr_off[] = {
	ppa_no_pthread_once, ppa_no_pthread_key_create,
};

/* The agent's own ELF header (the linker's), and so its program headers. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));

typedef int find_fn(void *, struct dl_find_object *);

static find_fn *real;   /* atomic: set once, by the constructor */
static ppa_dlclose_fn *next_dlclose;   /* atomic: set once, by the constructor or a dlclose */
static struct {
	int closed;             /* atomic: a fork is being prepared */
	int inside;             /* atomic: threads in dl_iterate_phdr here */
} G;

/* glibc's dlclose, the one after the agent's own (RTLD_NEXT), at its
 * oldest version (libc.so.6 has it since 2.34, libdl.so.2 before). */
static void find_dlclose(void)
{
	void *f;

	if (!dlvsym)
		return;
	if ((f = dlvsym(RTLD_NEXT, "dlclose", "GLIBC_2.2.5")))
		__atomic_store_n(&next_dlclose, (ppa_dlclose_fn *)f, __ATOMIC_RELEASE);
	else if (dlerror)
		(void)dlerror();
}

ppa_dlclose_fn *ppa_next_dlclose(void)
{
	ppa_dlclose_fn *f = __atomic_load_n(&next_dlclose, __ATOMIC_ACQUIRE);

	if (!f) {
		find_dlclose();   /* a dlclose called before the constructor ran */
		f = __atomic_load_n(&next_dlclose, __ATOMIC_ACQUIRE);
	}
	return f;
}

void ppa_find_object_init(void)
{
	const char *no = getenv(PPA_NO_DLFO_ENV);
	void *f;

	find_dlclose();
	if (!dlvsym || (no && *no == '1'))
		return;
	if (!(f = dlvsym(RTLD_DEFAULT, "_dl_find_object", "GLIBC_2.35"))) {
		if (dlerror)
			(void)dlerror();   /* an older glibc: leave the application no error to read */
		return;
	}
	__atomic_store_n(&real, (find_fn *)f, __ATOMIC_RELEASE);
}

struct query {
	uintptr_t pc;
	struct dl_find_object *out;
};

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct query *q = arg;
	uintptr_t lo = UINTPTR_MAX, hi = 0, eh = 0;
	int holds = 0;

	(void)size;
	for (size_t i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = (uintptr_t)(info->dlpi_addr + ph->p_vaddr);

		if (ph->p_type == PT_LOAD) {
			if (q->pc >= start && q->pc - start < ph->p_memsz)
				holds = 1;
			if (start < lo)
				lo = start;
			if (start + ph->p_memsz > hi)
				hi = start + ph->p_memsz;
		} else if (ph->p_type == PT_GNU_EH_FRAME) {
			eh = start;
		}
	}
	if (!holds)
		return 0;
	q->out->dlfo_flags = 0;
	q->out->dlfo_map_start = (void *)lo;
	q->out->dlfo_map_end = (void *)hi;
	q->out->dlfo_link_map = NULL;   /* not in dl_phdr_info; libgcc does not read it */
	q->out->dlfo_eh_frame = (void *)eh;
	return 1;
}

/* 1 with *out set when pc is the agent's own, from its own headers. */
static int self(struct query *q)
{
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)(const void *)__ehdr_start;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(const void *)(__ehdr_start + eh->e_phoff);
	struct dl_phdr_info info = { 0 };

	for (size_t i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
			info.dlpi_addr = (ElfW(Addr))(uintptr_t)__ehdr_start - ph[i].p_vaddr;
			break;
		}
	}
	info.dlpi_phdr = ph;
	info.dlpi_phnum = eh->e_phnum;
	return visit(&info, sizeof(info), q);
}

int ppa_dl_find_object(void *pc, struct dl_find_object *out)
{
	find_fn *f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
	struct query q = { (uintptr_t)pc, out };
	int found = 0;

	if (f)
		return f(pc, out);
	if (self(&q))
		return 0;
	/* Counted in, then the gate read (the fork side: closed, then the
	 * count read; both sequentially consistent, so one sees the other). */
	__atomic_fetch_add(&G.inside, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&G.closed, __ATOMIC_SEQ_CST))
		found = dl_iterate_phdr(visit, &q);
	__atomic_fetch_sub(&G.inside, 1, __ATOMIC_RELEASE);
	return found ? 0 : -1;   /* closed: the stack ends at the agent's frames */
}

static int first_subs(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *out = arg;

	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
		*out = info->dlpi_subs;
	return 1;   /* every object has the same count: the first one's will do */
}

unsigned long long ppa_find_object_unloads(void)
{
	unsigned long long subs = PPA_UNLOADS_UNKNOWN;

	/* through the fork's gate, as a lookup (ppa_dl_find_object) */
	__atomic_fetch_add(&G.inside, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&G.closed, __ATOMIC_SEQ_CST))
		(void)dl_iterate_phdr(first_subs, &subs);
	__atomic_fetch_sub(&G.inside, 1, __ATOMIC_RELEASE);
	return subs;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ppa_find_object_fork_prepare(void)
{
	uint64_t until = 0;

	__atomic_store_n(&G.closed, 1, __ATOMIC_SEQ_CST);
	for (int i = 0;; i++) {
		if (!__atomic_load_n(&G.inside, __ATOMIC_SEQ_CST))
			return 1;
		if (i < 64) {
			__builtin_ia32_pause();
			continue;
		}
		/* A walk lasts microseconds; one that waits for the loader's
		 * lock waits for a dlopen or dlclose to link or unlink. */
		if (!until)
			until = now_ns() + 20000000ull;
		else if (now_ns() > until)
			return 0;
		sched_yield();
	}
}

void ppa_find_object_fork_parent(void)
{
	__atomic_store_n(&G.closed, 0, __ATOMIC_RELEASE);
}

void ppa_find_object_fork_child(void)
{
	/* One thread now, not inside: a count left by a thread that only
	 * looked at the gate goes. */
	__atomic_store_n(&G.inside, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&G.closed, 0, __ATOMIC_RELEASE);
}
