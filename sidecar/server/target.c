/* Choosing the target (see target.h): one scan of /proc, its candidates
 * in an array of its own, freed before it returns. Start-up and loop
 * thread. */
#include "sidecar/server/target.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/array.h"
#include "base/buf.h"
#include "base/mem.h"
#include "ptrace/proc/proc.h"
#include "sidecar/server/cfg.h"
#include "sidecar/server/util.h"

int sc_target_is_pause(const char *comm)
{
	static const char *const shims[] = { "pause", "catatonit", "tini", "tini-static",
					     "dumb-init", "podman-pause", "conmon" };

	for (size_t i = 0; i < SC_ARRAY_LEN(shims); i++)
		if (!strcmp(comm, shims[i]))
			return 1;
	return 0;
}

struct cand {
	pid_t pid, ppid;
	char comm[64];
	char exe[PT_PROC_MAX_PATH];
};

/* The match all others descend from, or 0: each match's ancestors read
 * from /proc up to PID 1 (a chain at most 64 long). */
static pid_t tree_root(const char *proc_root, const struct cand *c, size_t n)
{
	pid_t root = 0;

	for (size_t i = 0; i < n; i++) {
		pid_t up = c[i].ppid;
		int below = 0;

		/* A match that is PID 1 (a container's own entrypoint) is an
		 * ancestor too: looked for before the walk stops there. */
		for (int depth = 0; up > 0 && depth < 64 && !below; depth++) {
			char path[PT_PROC_MAX_PATH], buf[1024];
			struct pt_stat st;

			for (size_t k = 0; k < n && !below; k++)
				below = c[k].pid == up;
			snprintf(path, sizeof(path), "%s/%d/stat", proc_root, (int)up);
			if (below || up == 1 || pt_proc_slurp(path, buf, sizeof(buf)) <= 0 ||
			    pt_proc_parse_stat(buf, &st))
				break;
			up = (pid_t)st.ppid;
		}
		if (below)
			continue;
		if (root)
			return 0;   /* a second root: several trees */
		root = c[i].pid;
	}
	return root;
}

int sc_target_select(const struct sc_cfg *cfg, const char *proc_root, pid_t *pid,
		     struct base_buf *msg)
{
	struct cand *c = NULL;
	size_t n = 0, cap = 0;
	pid_t self = getpid();
	struct dirent *de;
	DIR *d;
	int err, orphaned = 0;

	*pid = 0;
	d = opendir(proc_root);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char path[PT_PROC_MAX_PATH], buf[1024];
		struct pt_stat st;
		struct cand *x;
		char *end;
		long v;
		ssize_t len;

		errno = 0;
		v = strtol(de->d_name, &end, 10);
		if (errno || *end || v <= 0 || v > INT_MAX || (pid_t)v == self)
			continue;
		if (cfg->pid && v != cfg->pid)
			continue;
		snprintf(path, sizeof(path), "%s/%ld/stat", proc_root, v);
		if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, &st))
			continue;
		if ((st.flags & PT_PF_KTHREAD) || st.state == 'Z') {
			/* A main thread that called pthread_exit stays a zombie
			 * while the others run; its /proc entries (maps, memory,
			 * root) are gone with its address space. */
			orphaned |= cfg->pid && st.state == 'Z' && st.num_threads > 1;
			continue;
		}
		if (!cfg->pid && v == 1 && sc_target_is_pause(st.comm))
			continue;
		if (cfg->comm && strcmp(st.comm, cfg->comm))
			continue;
		if ((err = BASE_ARRAY_RESERVE(c, cap, n + 1)))
			goto out;
		x = &c[n];
		x->pid = (pid_t)v;
		x->ppid = (pid_t)st.ppid;
		snprintf(x->comm, sizeof(x->comm), "%s", st.comm);
		snprintf(path, sizeof(path), "%s/%ld/exe", proc_root, v);
		len = readlink(path, x->exe, sizeof(x->exe) - 1);
		x->exe[len > 0 ? len : 0] = '\0';
		if (len <= 0)
			snprintf(x->exe, sizeof(x->exe), "?");
		/* podprof instances (other than us) are never targets. */
		if (!cfg->pid && !strcmp(st.comm, "podprof"))
			continue;
		if (cfg->exe && !strstr(x->exe, cfg->exe))
			continue;
		n++;
	}
	if (n == 1) {
		*pid = c[0].pid;
		err = 0;
		goto out;
	}
	/* With --tree, matches that descend from one of them (a pre-fork
	 * server's workers, under its master) are its tree's: the one match
	 * whose ancestors match nothing is the target. */
	if (n > 1 && cfg->tree && (*pid = tree_root(proc_root, c, n))) {
		err = 0;
		goto out;
	}
	err = n ? -EEXIST : -ESRCH;
	if (cfg->pid && cfg->pid == self)
		base_buf_printf(msg, "--pid %d is podprof itself", cfg->pid);
	else if (orphaned)
		base_buf_printf(msg, "pid %d's main thread has exited (pthread_exit) while its other threads "
				"run on: podprof reads a process through its main thread and cannot profile it",
				cfg->pid);
	else if (cfg->pid)
		base_buf_printf(msg, "no process with pid %d in this PID namespace", cfg->pid);
	else if (!n)
		base_buf_printf(msg, "no process matches %s%s%s", cfg->comm ? "--comm " : cfg->exe ? "--exe " : "",
				cfg->comm ? cfg->comm : cfg->exe ? cfg->exe : "(any process besides pause and podprof)",
				"; is shareProcessNamespace: true set on the pod?");
	else if (cfg->tree)
		base_buf_printf(msg, "%zu processes match, not all in one process tree; choose one with --pid, "
				"--comm or --exe:", n);
	else
		base_buf_printf(msg, "%zu processes match; choose one with --pid, --comm or --exe, or take a "
				"process and its descendants with --tree:", n);
	for (size_t i = 0; i < n && i < 50; i++)
		base_buf_printf(msg, "\n  pid=%d comm=%s exe=%s", (int)c[i].pid, c[i].comm, c[i].exe);
out:
	closedir(d);
	base_free(c);
	return err;
}
