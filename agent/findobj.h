/* The object holding a code address, for the agent's copy of GCC's
 * unwinder, whose calls to glibc 2.35's _dl_find_object the Makefile
 * renames to ppa_dl_find_object: the agent then loads on any glibc from
 * 2.17 on, and still uses the real function when the running glibc has it.
 * Internal to the agent. */
#ifndef PPA_FINDOBJ_H
#define PPA_FINDOBJ_H

#include <dlfcn.h>

/* "1": the dl_iterate_phdr way even when glibc has _dl_find_object, so that
 * the tests run the older glibc's way on this machine. */
#define PPA_NO_DLFO_ENV "PODPROF_ALLOC_NO_DL_FIND_OBJECT"

/* Looks the running glibc's _dl_find_object up (dlvsym, under the loader's
 * lock; not with PPA_NO_DLFO_ENV=1). Once, from the agent's constructor:
 * never from inside a malloc call. Until it has run, and on a glibc
 * without it, ppa_dl_find_object walks the loaded objects instead. */
void ppa_find_object_init(void);
/* glibc's dlclose, which the agent's own (hooks.c) calls: found by
 * ppa_find_object_init (or now, under the loader's lock, if it has not
 * run); NULL when none was found (a glibc before 2.34 whose libdl.so.2 was
 * not among the objects loaded at start). Never from inside a malloc call. */
typedef int ppa_dlclose_fn(void *);
ppa_dlclose_fn *ppa_next_dlclose(void);
/* How many objects the loader has unloaded so far (dl_iterate_phdr's
 * dlpi_subs), or PPA_UNLOADS_UNKNOWN (a fork being prepared, a glibc
 * without the count). Takes the loader's list lock: never from inside a
 * malloc call. */
#define PPA_UNLOADS_UNKNOWN (~0ull)
unsigned long long ppa_find_object_unloads(void);
/* _dl_find_object's contract: 0 with *out set (dlfo_map_start/end, and
 * dlfo_eh_frame, the object's PT_GNU_EH_FRAME or NULL) when a loaded object
 * maps pc, -1 when none does (or while a fork is prepared, but for the
 * agent's own code). Any thread; allocates nothing; no lock but the
 * loader's list lock (dl_iterate_phdr) before glibc 2.35. */
int ppa_dl_find_object(void *pc, struct dl_find_object *out);
/* fork (from the records' handlers): prepare closes the gate to
 * dl_iterate_phdr and waits, at most 20 ms, until no thread is inside
 * (whose loader lock the child would inherit held); returns 1 when none is,
 * 0 when one still was (the child must then unwind no more). parent and
 * child open it again. */
int ppa_find_object_fork_prepare(void);
void ppa_find_object_fork_parent(void);
void ppa_find_object_fork_child(void);

#endif
