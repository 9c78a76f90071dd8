/* Choosing the process to profile among those in our PID namespace.
 * Start-up and loop thread. */
#ifndef SC_TARGET_H
#define SC_TARGET_H

#include <sys/types.h>

struct sc_cfg;
struct base_buf;

/* Picks by --pid, --comm or --exe, or else the only process that is neither
 * the pod's pause process (PID 1 named pause/catatonit/tini/...), a kernel
 * thread, nor podprof itself. With several matches and --tree, the one
 * all the others descend from (a pre-fork server's master: the target is
 * then its tree). Returns 0 with *pid set, -ESRCH when nothing matches, or
 * -EEXIST with several matches (not in one tree); in both failure cases
 * `msg` gets a message listing the candidates (pid, comm, exe). */
int sc_target_select(const struct sc_cfg *cfg, const char *proc_root, pid_t *pid,
		     struct base_buf *msg);

/* Whether PID 1 with this comm is a pod's pause/init shim. */
int sc_target_is_pause(const char *comm);

#endif
