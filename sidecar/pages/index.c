/* Go's index page (see index.h): each request builds its page in a buffer
 * of its own, handed to the HTTP layer; the pod's processes come from the
 * server's list of them (sidecar/server/pod.h). Loop thread only. */
#include "sidecar/pages/index.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "base/buf.h"
#include "base/mem.h"
#include "ptrace/proc/proc.h"
#include "sidecar/server/http.h"
#include "sidecar/server/params.h"
#include "sidecar/server/pod.h"
#include "sidecar/server/reply.h"
#include "sidecar/server/server.h"
#include "sidecar/server/util.h"

static void target_panel(pid_t pid, struct base_buf *b)
{
	char path[64], buf[4096], exe[PT_PROC_MAX_PATH];
	struct pt_stat st;
	long long rss = -1;
	ssize_t n;
	long hz = sysconf(_SC_CLK_TCK);

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, &st)) {
		base_buf_printf(b, "<p>Target pid %d: gone</p>\n", (int)pid);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) > 0)
		pt_proc_status_value(buf, "VmRSS", &rss);
	base_buf_printf(b, "<p>\nTarget process:\n<table>\n<tr><td>pid</td><td>%d</td></tr>\n"
			"<tr><td>comm</td><td>", (int)pid);
	sc_html_escape(b, st.comm);
	base_buf_printf(b, "</td></tr>\n<tr><td>exe</td><td>");
	sc_html_escape(b, exe[0] ? exe : "?");
	base_buf_printf(b, "</td></tr>\n<tr><td>threads</td><td>%ld</td></tr>\n"
			"<tr><td>RSS</td><td>%lld kB</td></tr>\n"
			"<tr><td>CPU</td><td>%.2f s</td></tr>\n</table>\n</p>\n",
			st.num_threads, rss, (double)(st.utime + st.stime) / (double)(hz > 0 ? hz : 100));
}

/* The other processes of the pod (our PID namespace), each with a link.
 * A /proc that cannot be listed leaves the panel out. Returns 0 or
 * -ENOMEM. */
static int pod_panel(struct sc_pod *pod, pid_t current, struct base_buf *b)
{
	const struct sc_pod_proc *procs;
	size_t n;
	int err = sc_pod_list(pod, &procs, &n);

	if (err)
		return err == -ENOMEM ? err : 0;
	base_buf_printf(b, "<p>\nProcesses in this pod:\n<table>\n<thead><td>pid</td><td>comm</td></thead>\n");
	for (size_t i = 0; i < n; i++) {
		base_buf_printf(b, "<tr><td><a href='?pid=%d'>%d</a>%s</td><td>", (int)procs[i].pid,
				(int)procs[i].pid, procs[i].pid == current ? " (shown)" : "");
		sc_html_escape(b, procs[i].comm);
		base_buf_printf(b, "</td></tr>\n");
	}
	base_buf_printf(b, "</table>\n</p>\n<p>\nAll of them in one profile (pid=all; tree=1: a process and its "
			"descendants), each sample labelled with its pid and process:\n"
			"<a href='profile?pid=all'>profile</a>\n"
			"<a href='trace?pid=all'>trace</a>\n"
			"<a href='heap?debug=1&pid=all'>heap</a>\n"
			"<a href='allocs?debug=1&pid=all'>allocs</a>\n"
			"<a href='goroutine?debug=1&pid=all'>goroutine</a>\n"
			"<a href='threadcreate?debug=1&pid=all'>threadcreate</a>\n"
			"<a href='block?debug=1&pid=all'>block</a>\n"
			"<a href='mutex?debug=1&pid=all'>mutex</a>\n</p>\n");
	return 0;
}

/* Go's index: a row per listed route, in table order, then descriptions. */
static void profile_table(struct sc_server *srv, pid_t pid, const char *extra, struct base_buf *b)
{
	size_t n, skip = strlen(SC_PPROF_PREFIX);
	const struct sc_route *r = sc_server_routes(srv, &n);

	for (size_t i = 0; i < n; i++) {
		if (!(r[i].flags & SC_ROUTE_LISTED))
			continue;
		base_buf_printf(b, "<tr><td>%lld</td><td><a href='%s?debug=1%s'>%s</a>",
				(long long)(r[i].count ? r[i].count(srv, pid) : 0), r[i].path + skip, extra,
				r[i].path + skip);
		if (r[i].also)
			base_buf_printf(b, " (<a href='%s?%s%s'>%s</a>)", r[i].path + skip, r[i].also, extra,
					r[i].also);
		base_buf_printf(b, "</td></tr>\n");
	}
	base_buf_printf(b, "</table>\n<p>\nFlame graphs (format=flamegraph):\n");
	for (size_t i = 0; i < n; i++)
		if (r[i].flags & SC_ROUTE_FORMATS)
			base_buf_printf(b, "<a href='%s?format=flamegraph%s'>%s</a>\n", r[i].path + skip, extra,
					r[i].path + skip);
	base_buf_printf(b, "</p>\n<br>\n<p>\nProfile Descriptions:\n<ul>\n");
	for (size_t i = 0; i < n; i++) {
		if (!(r[i].flags & SC_ROUTE_LISTED))
			continue;
		base_buf_printf(b, "<li><div class=profile-name>%s: </div> ", r[i].path + skip);
		sc_html_escape(b, r[i].desc);
		base_buf_printf(b, "</li>\n");
	}
	base_buf_printf(b, "</ul>\n</p>\n");
}

void sc_index_handle(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	struct base_buf b;
	char extra[32] = "", *html;
	size_t len;
	int err;
	pid_t pid = p->target.pid;

	(void)req;
	/* The links keep looking at the process this page is about. */
	if (pid != sc_server_target(srv))
		snprintf(extra, sizeof(extra), "&pid=%d", (int)pid);
	base_buf_init(&b, 1u << 20);
	base_buf_printf(&b, "<html>\n<head>\n<title>/debug/pprof/</title>\n<style>\n.profile-name{\n"
			"\tdisplay:inline-block;\n\twidth:6rem;\n}\n</style>\n</head>\n<body>\n"
			"/debug/pprof/\n<br>\n<p>Set debug=1 as a query parameter to export in legacy "
			"text format</p>\n<p>Without Go: format=flamegraph (a flame graph page), "
			"format=speedscope (a file for speedscope) or format=collapsed (folded stacks "
			"for flamegraph.pl and inferno)</p>\n<br>\nTypes of profiles available:\n<table>\n"
			"<thead><td>Count</td><td>Profile</td></thead>\n");
	profile_table(srv, pid, extra, &b);
	target_panel(pid, &b);
	if ((err = pod_panel(sc_server_pod(srv), pid, &b))) {
		base_buf_free(&b);
		sc_go_error(c, 500, "out of memory");
		return;
	}
	base_buf_printf(&b, "</body>\n</html>\n");
	if ((err = base_buf_take(&b, &html, &len))) {
		sc_go_error(c, 500, "out of memory");
		return;
	}
	sc_http_respond_owned(c, 200, "Content-Type: text/html; charset=utf-8\r\n", html, len);
}

void sc_index_redirect(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	(void)p;
	(void)srv;
	(void)req;
	sc_http_respond(c, 301, "Location: /debug/pprof/\r\nContent-Type: text/html; charset=utf-8\r\n",
			"<a href=\"/debug/pprof/\">Moved Permanently</a>.\n\n", 48);
}
