/* The processes of the pod (see pod.h). Loop thread only. */
#include "sidecar/server/pod.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <uv.h>

#include "base/array.h"
#include "base/mem.h"
#include "ptrace/proc/proc.h"

#define POD_LIST_TTL_NS 1000000000ull

int sc_pod_list(struct sc_pod *pod, const struct sc_pod_proc **procs, size_t *n)
{
	struct sc_pod_proc *v = NULL;
	size_t nv = 0, cap = 0;
	uint64_t now = uv_hrtime();
	struct dirent *de;
	DIR *d;
	int err = 0;

	if (pod->at && now - pod->at < POD_LIST_TTL_NS)
		goto out;
	if (!(d = opendir("/proc")))
		return -errno;
	while ((de = readdir(d)) && nv < SC_POD_MAX) {
		char path[64], buf[1024], *end;
		struct pt_stat st;
		struct sc_pod_proc *p;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, &st) ||
		    (st.flags & PT_PF_KTHREAD))
			continue;
		if (!(p = BASE_ARRAY_PUSH(v, nv, cap))) {
			err = -ENOMEM;
			break;
		}
		p->pid = (pid_t)pid;
		snprintf(p->comm, sizeof(p->comm), "%s", st.comm);
	}
	closedir(d);
	if (err) {
		base_free(v);
		return err;
	}
	base_free(pod->procs);
	pod->procs = v;
	pod->n = nv;
	pod->at = now;
out:
	*procs = pod->procs;
	*n = pod->n;
	return 0;
}

void sc_pod_free(struct sc_pod *pod)
{
	if (!pod)
		return;
	base_free(pod->procs);
	*pod = (struct sc_pod){ 0 };
}
