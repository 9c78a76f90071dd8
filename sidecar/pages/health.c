/* /healthz and /readyz: whether podprof can do its job now. Loop thread
 * only. */
#include "sidecar/pages/health.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrace/proc/proc.h"
#include "ptrace/sampler/sampler.h"
#include "sidecar/server/http.h"
#include "sidecar/server/log.h"
#include "sidecar/server/reply.h"
#include "sidecar/server/server.h"

/* The sampler thread wakes at least once a second; a loop turn longer than
 * this (a tick of a huge target) is a stall. */
#define SAMPLER_STALL_NS (10ull * 1000000000ull)

/* The value of a "Name:\t..." line of /proc/<pid>/status text, or NULL. */
static const char *status_field(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, name, n) && p[n] == ':')
			return p + n + 1;
	return NULL;
}

/* 1 if every id of a Uid:/Gid: line (real, effective, saved, fs) is `id`:
 * the kernel's rule for tracing without CAP_SYS_PTRACE (ptrace(2),
 * "Ptrace access mode checking", step 3). */
static int all_ids(const char *field, unsigned long id)
{
	const char *cur = field;
	int n = 0;

	while (cur && *cur && *cur != '\n') {
		char *end;
		unsigned long v;

		cur += strspn(cur, " \t");
		if (*cur == '\n' || !*cur)
			break;
		v = strtoul(cur, &end, 10);
		if (end == cur || v != id)
			return 0;
		cur = end;
		n++;
	}
	return n > 0;
}

/* Whether podprof can do its job now: its sampler thread runs, the default
 * target exists (not a zombie), and podprof may trace it (CAP_SYS_PTRACE
 * effective, or the same user, and Yama does not forbid ptrace). Returns 0,
 * or -1 with one line saying what is wrong in msg. Loop thread. */
static int health_check(struct sc_server *srv, char *msg, size_t size)
{
	char path[64], buf[4096];
	const char *cap, *uid, *gid;
	unsigned long long eff = 0;
	struct pt_stat st;
	int pid = (int)sc_server_target(srv);

	if (!pt_sampler_alive(sc_server_sampler(srv), SAMPLER_STALL_NS)) {
		snprintf(msg, size, "podprof's sampler thread is not running (or stalled over 10 s)");
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, &st)) {
		snprintf(msg, size, "target process %d is gone", pid);
		return -1;
	}
	if (st.state == 'Z' || st.state == 'X') {
		snprintf(msg, size, "target process %d is gone (exited, a zombie)", pid);
		return -1;
	}
	if (pt_proc_slurp("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof(buf)) > 0 && buf[0] == '3') {
		snprintf(msg, size, "ptrace is disabled on this node (Yama ptrace_scope 3)");
		return -1;
	}
	if (pt_proc_slurp("/proc/self/status", buf, sizeof(buf)) > 0 && (cap = status_field(buf, "CapEff")))
		eff = strtoull(cap, NULL, 16);
	if (eff & (1ull << 19 /* CAP_SYS_PTRACE */))
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) > 0 && (uid = status_field(buf, "Uid")) &&
	    (gid = status_field(buf, "Gid")) && all_ids(uid, (unsigned long)geteuid()) &&
	    all_ids(gid, (unsigned long)getegid()))
		return 0;
	snprintf(msg, size, "podprof lacks CAP_SYS_PTRACE and target process %d runs as another "
		 "user than podprof (uid %lu)", pid, (unsigned long)geteuid());
	return -1;
}

/* /healthz and /readyz: 200 "ok" when podprof can profile its target, else
 * 503 and what is wrong. A target that is gone (its container restarted
 * with a new pid) fails both, so a liveness probe restarts podprof, which
 * then finds the new one. The switch file does not matter here: disabled
 * profiling is a choice, not a fault. */
void sc_health_handle(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	char msg[256], body[260];
	int n;

	(void)p;
	if (!health_check(srv, msg, sizeof(msg))) {
		sc_http_respond(c, 200, SC_TEXT_PLAIN, "ok\n", 3);
		return;
	}
	log_debug("http: %s: 503 %s", req->path, msg);
	n = snprintf(body, sizeof(body), "%s\n", msg);
	sc_http_respond(c, 503, SC_TEXT_PLAIN, body, (size_t)n);
}
