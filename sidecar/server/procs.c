/* A request's processes (see procs.h): one scan of /proc into an array
 * of its own, freed before it returns. */
#include "sidecar/server/procs.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/array.h"
#include "base/mem.h"
#include "ptrace/proc/proc.h"
#include "sidecar/server/target.h"

struct entry {
	pid_t pid, ppid;
	char comm[64];
	int taken;
};

static int cmp_pid(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Every live process but kernel threads and podprof itself, by pid. */
static int scan(const char *proc_root, struct entry **out, size_t *n)
{
	struct entry *v = NULL;
	size_t nv = 0, cap = 0;
	pid_t self = getpid();
	struct dirent *de;
	DIR *d = opendir(proc_root);
	int err = 0;

	*out = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d)) && nv < SC_PROCS_SCAN_MAX) {
		char path[PT_PROC_MAX_PATH], buf[1024], *end;
		struct pt_stat st;
		struct entry *e;
		long pid;

		errno = 0;
		pid = strtol(de->d_name, &end, 10);
		if (errno || *end || pid <= 0 || pid > INT_MAX || (pid_t)pid == self)
			continue;
		snprintf(path, sizeof(path), "%s/%ld/stat", proc_root, pid);
		if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, &st) ||
		    (st.flags & PT_PF_KTHREAD) || st.state == 'Z' || st.state == 'X')
			continue;
		if (!(e = BASE_ARRAY_PUSH(v, nv, cap))) {
			err = -ENOMEM;
			break;
		}
		*e = (struct entry){ .pid = (pid_t)pid, .ppid = (pid_t)st.ppid };
		snprintf(e->comm, sizeof(e->comm), "%s", st.comm);
	}
	closedir(d);
	if (err) {
		base_free(v);
		return err;
	}
	qsort(v, nv, sizeof(*v), cmp_pid);
	*out = v;
	*n = nv;
	return 0;
}

static int take(struct sc_procs *p, struct entry *e, size_t max)
{
	if (e->taken)
		return 0;
	e->taken = 1;
	if (p->n == max) {
		p->left++;
		return 0;
	}
	p->v[p->n].pid = e->pid;
	snprintf(p->v[p->n].name, sizeof(p->v[p->n].name), "%s", e->comm);
	p->n++;
	return 1;
}

int sc_procs_list(const char *proc_root, pid_t root, size_t max, struct sc_procs *out)
{
	struct entry *v;
	size_t n, *queue = NULL, head = 0, tail = 0;
	int err;

	*out = (struct sc_procs){ 0 };
	if ((err = scan(proc_root, &v, &n)))
		return err;
	if (!(out->v = base_calloc(max + 1, sizeof(*out->v))) ||
	    !(queue = base_calloc(n + 1, sizeof(*queue)))) {
		err = -ENOMEM;
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		if (root) {
			if (v[i].pid == root)
				queue[tail++] = i;
			continue;
		}
		/* podprof instances and the pause process are no one's target */
		if (!strcmp(v[i].comm, "podprof") || (v[i].pid == 1 && sc_target_is_pause(v[i].comm)))
			continue;
		take(out, &v[i], max);
	}
	/* The tree: each process taken, then its children, breadth first
	 * (a scan is not atomic: a pid reused meanwhile is taken at most once). */
	if (tail)
		take(out, &v[queue[0]], max);
	while (head < tail) {
		pid_t parent = v[queue[head++]].pid;

		for (size_t i = 0; i < n && tail < n; i++)
			if (v[i].ppid == parent && !v[i].taken) {
				take(out, &v[i], max);
				queue[tail++] = i;
			}
	}
	out->max = max;
	err = out->n || out->left ? 0 : -ESRCH;
done:
	base_free(queue);
	base_free(v);
	if (err)
		sc_procs_free(out);
	return err;
}

void sc_procs_free(struct sc_procs *p)
{
	if (!p)
		return;
	base_free(p->v);
	*p = (struct sc_procs){ 0 };
}
