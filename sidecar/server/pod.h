/* The processes of the pod (our PID namespace): kernel threads and podprof
 * itself left out, listed from /proc at most once a second however often
 * they are asked for (a flood of index requests must not rescan /proc for
 * each). Loop thread only. */
#ifndef SC_POD_H
#define SC_POD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SC_POD_MAX 200          /* processes listed at most */

struct sc_pod_proc {
	pid_t pid;
	char comm[64];
};

/* Zero-initialised is empty. */
struct sc_pod {
	struct sc_pod_proc *procs;
	size_t n;
	uint64_t at;            /* when listed (uv_hrtime), 0: never */
};

/* The pod's processes, listed anew if the last list is a second old.
 * Returns 0 (with *procs, *n valid until the next call), -ENOMEM, or the
 * errno of a /proc that cannot be listed. */
int sc_pod_list(struct sc_pod *pod, const struct sc_pod_proc **procs, size_t *n);
/* Frees the list. NULL-safe. */
void sc_pod_free(struct sc_pod *pod);

#endif
