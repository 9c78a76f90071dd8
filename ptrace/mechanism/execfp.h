/* Noticing an exec without waiting for its event: a fingerprint of the
 * target's address space, compared before and after each batch of
 * captures (stop.c). Tracer thread only. */
#ifndef PT_EXECFP_H
#define PT_EXECFP_H

#include <stdint.h>
#include <sys/types.h>

struct pt_tracee;

/* The fingerprint of t's address space now, 0 if unreadable; a leader that
 * ended has none: then thread alt's (> 0). */
uint64_t pt__execfp_read(struct pt_tracee *t, pid_t alt);
/* (Re)opens the leader's /proc auxv, which the fingerprint reads. */
void pt__execfp_open(struct pt_tracee *t);

#endif
