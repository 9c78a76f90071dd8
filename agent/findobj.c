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
 * inside malloc could then deadlock. So it runs once, from the agent's
 * constructor, at start-up (hooks.c), and malloc never waits for it: until
 * it has stored its answer, readers take the dl_iterate_phdr way.
 * dl_iterate_phdr takes only dl_load_write_lock, not dl_load_lock: a
 * recursive lock the loader holds just to link or unlink an object,
 * calling nothing but free meanwhile (dlclose), where the agent never
 * unwinds; the callback below takes no lock and allocates nothing. */
#include "agent/findobj.h"

#include <link.h>
#include <stddef.h>
#include <stdint.h>

/* Their oldest versions, which every glibc has: in libc.so.6 since 2.34,
 * and before in libdl.so.2, which the agent does not load itself (weak:
 * NULL when the application has not loaded it, and there is then no
 * _dl_find_object to find anyway). */
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

typedef int find_fn(void *, struct dl_find_object *);

static find_fn *real;   /* atomic: set once, by the constructor */

void ppa_find_object_init(void)
{
	void *f;

	if (!dlvsym)
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

int ppa_dl_find_object(void *pc, struct dl_find_object *out)
{
	find_fn *f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
	struct query q = { (uintptr_t)pc, out };

	if (f)
		return f(pc, out);
	return dl_iterate_phdr(visit, &q) ? 0 : -1;
}
