/* The memory sessions, heap and allocs by mapping (see memory.c).
 * Sampler thread. */
#ifndef PT_SESSION_MEMORY_H
#define PT_SESSION_MEMORY_H

#include "ptrace/sampler/session.h"

/* Memory by mapping, from /proc/<pid>/smaps (no attach). heap: values RSS,
 * PSS, private dirty, swap, bytes; with duration_ns, the change over it.
 * allocs: alloc_objects, alloc_space (growths of each mapping's RSS and
 * their bytes, cumulative since podprof first looked), inuse_objects,
 * inuse_space. Samples: [mapping, class], synthetic frames. Result: profile. */
extern const struct pt_session_kind pt_kind_heap;
extern const struct pt_session_kind pt_kind_allocs;
/* With allocation records (the agent's, or a Go runtime's: ptrace/allocs/allocsrc.h),
 * heap and allocs carry their stacks instead: one sample per stack, values
 * alloc_objects, alloc_space, inuse_objects, inuse_space estimated from
 * the samples (the profile's alloc member says the source and its rate); with duration_ns,
 * the change over it. These two always answer by mapping. */
extern const struct pt_session_kind pt_kind_heap_mappings;
extern const struct pt_session_kind pt_kind_allocs_mappings;

/* A look at the target's memory for allocs (memory.c). Returns 0
 * or a negative errno. */
int pt__memory_look(struct pt_session *ss);

#endif
