/* The allocation agent's records (agent/area.h), read from outside the
 * target into neutral records (ptrace/core/allocs.h). The target writes them:
 * every field is bounded before it is used. Any thread. */
#ifndef PT_AGENTREC_H
#define PT_AGENTREC_H

#include <stdint.h>

#include "ptrace/core/allocs.h"

#define PT_AGENTREC_MAX_FRAMES 256u       /* a record's frames, as the area declares them */
#define PT_AGENTREC_MAX_STACKS 65536u     /* records, as the area declares them */
#define PT_AGENTREC_MAX_AREA (64ull << 20) /* bytes of records read at most */

/* The agent's library, as a mapping's path ends: ".../libpodprof-alloc.so". */
#define PT_AGENTREC_LIBRARY "libpodprof-alloc.so"

/* Reads the records whose header (the agent's podprof_alloc_header) is at
 * header_addr, through rd, into out (source "agent"). Returns 0; -ENOENT
 * when the agent has no records yet (*why: a static string); -EPROTO when
 * they make no sense (*why says what); -E2BIG past PT_AGENTREC_MAX_AREA; an errno from rd; -ENOMEM. */
int pt_agentrec_read(pt_allocs_read_fn rd, void *arg, uint64_t header_addr,
		     struct pt_allocs *out, const char **why);

#endif
