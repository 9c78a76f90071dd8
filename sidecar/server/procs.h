/* The processes of a request for several (pid=all, or a process and its
 * descendants: tree=1, --tree): one scan of /proc per request, since the
 * workers of a pre-fork server come and go. Loop thread (and start-up). */
#ifndef SC_PROCS_H
#define SC_PROCS_H

#include <stddef.h>
#include <sys/types.h>

#include "ptrace/profile/profile.h"

#define SC_PROCS_SCAN_MAX 8192   /* processes read from /proc at most */

struct sc_procs {
	struct pt_profile_proc *v;   /* pid and name (comm) of each */
	size_t n;
	size_t left;                 /* found past `max`, left out */
	size_t max;                  /* the cap it was listed with (and its children are held to) */
};

/* What a request is about (sidecar/server/params.h: the server parses it): one
 * process, or several. */
struct sc_target_set {
	pid_t pid;                   /* one process: procs empty */
	struct sc_procs procs;
};

/* root 0: every process of the pod (our PID namespace) but kernel
 * threads, zombies, podprof and the pod's pause process (PID 1 named
 * pause, tini, ...), in pid order; else root and its descendants, root
 * first, then breadth first. At most max; the others are counted in left.
 * Returns 0, -ESRCH (no such live process as root; none at all),
 * -ENOMEM or the errno of a /proc that cannot be listed. */
int sc_procs_list(const char *proc_root, pid_t root, size_t max, struct sc_procs *out);
/* NULL-safe; leaves *p empty. */
void sc_procs_free(struct sc_procs *p);

#endif
