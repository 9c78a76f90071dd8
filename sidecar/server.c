/* The pprof server (see server.h): the route table and dispatch, the
 * answers, and the jobs, each owned by the server from sc_job_new until
 * its answer is sent (the sampler thread and a work thread hold it in
 * turn). The server itself goes once the loop has closed its async
 * handle and no encoding is left. Loop thread, except where noted. */
#include "sidecar/server.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"
#include "encoder/pprof.h"
#include "ptrace/proc.h"
#include "sidecar/cfg.h"
#include "sidecar/http.h"
#include "sidecar/index.h"
#include "sidecar/log.h"
#include "sidecar/metrics.h"
#include "sidecar/profiles/profiles.h"
#include "sidecar/query.h"
#include "sidecar/switch.h"
#include "sidecar/util.h"

static const char GO_ERR[] = "Content-Type: text/plain; charset=utf-8\r\nX-Go-Pprof: 1\r\n";
static const char GO_ERR_RETRY[] = "Content-Type: text/plain; charset=utf-8\r\nX-Go-Pprof: 1\r\n"
				   "Retry-After: 5\r\n";

struct sc_server {
	uv_loop_t *loop;
	const struct sc_cfg *cfg;
	pid_t pid;
	char *token;                 /* --auth-token-file's token, or NULL */
	struct sc_http *http;
	struct pt_sampler *sampler;
	uv_async_t async;
	pthread_mutex_t lock;        /* guards done */
	struct sc_job *done;         /* handed back by the sampler thread */
	int async_open;
	int freeing;                 /* sc_server_free was called */
	int encoding;                /* jobs queued or running on work threads */
	struct sc_index_cache index;
	struct pt_request watch;     /* --continuous: the sampler's watch of the target */
	atomic_int watching;         /* the watch runs (sampler thread ends it) */
	struct sc_switch *sw;        /* --enable-file, or NULL */
	atomic_int enabled;          /* profiling on (the switch); read by the sampler thread */
};

/* A job's life: with the sampler, then on a work thread. What a client
 * that goes away cancels depends on which. */
enum { JOB_SAMPLING, JOB_ENCODING };

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
	int pid = (int)srv->pid;

	if (!pt_sampler_alive(srv->sampler, SAMPLER_STALL_NS)) {
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
static void on_healthz(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req)
{
	char msg[256], body[260];
	int n;

	if (!health_check(srv, msg, sizeof(msg))) {
		sc_http_respond(c, 200, SC_TEXT_PLAIN, "ok\n", 3);
		return;
	}
	log_debug("http: %s: 503 %s", req->path, msg);
	n = snprintf(body, sizeof(body), "%s\n", msg);
	sc_http_respond(c, 503, SC_TEXT_PLAIN, body, (size_t)n);
}

/* Go's ServeMux: /tree is redirected to /tree/ when only the latter is
 * registered, which the index's relative links rely on. */
static void on_redirect(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req)
{
	(void)srv;
	(void)req;
	sc_http_respond(c, 301, "Location: /debug/pprof/\r\nContent-Type: text/html; charset=utf-8\r\n",
			"<a href=\"/debug/pprof/\">Moved Permanently</a>.\n\n", 48);
}

/* Every endpoint, sorted by path: listed profiles appear in the index in
 * this order, as Go's index sorts them by name. */
static const struct sc_route routes[] = {
	{ "/debug/pprof", SC_ROUTE_ANY, NULL, on_redirect, NULL, NULL },
	{ "/debug/pprof/", SC_ROUTE_GET,
	  "The index of the profiles below (HTML), with the target process and the other "
	  "processes of the pod, each with a link.", sc_index_handle, NULL, NULL },
	{ "/debug/pprof/allocs", SC_ROUTE_GET | SC_ROUTE_LISTED,
	  "Memory by mapping, cumulative: the bytes that became resident in each since podprof "
	  "first looked (Go: a sampling of all past memory allocations)", sc_profile_allocs, sc_count_mappings, NULL },
	{ "/debug/pprof/block", SC_ROUTE_GET | SC_ROUTE_LISTED,
	  "Stack traces where threads waited (blocked in a system call or D state), with the "
	  "time they waited, over ?seconds=N (default --wait-seconds)", sc_profile_block, sc_count_blocked,
	  NULL },
	{ "/debug/pprof/cmdline", SC_ROUTE_GET | SC_ROUTE_LISTED,
	  "The command line invocation of the current program", sc_profile_cmdline, NULL, NULL },
	{ "/debug/pprof/goroutine", SC_ROUTE_GET | SC_ROUTE_LISTED,
	  "Stack traces of all current goroutines (here: every thread of the target). "
	  "Use debug=2 as a query parameter to export in the same format as an "
	  "unrecovered panic.", sc_profile_goroutine, sc_count_threads, NULL },
	{ "/debug/pprof/heap", SC_ROUTE_GET | SC_ROUTE_LISTED,
	  "Where the process's memory lives, by mapping (heap, thread stacks, anonymous, code "
	  "and data of each file, shared memory): resident, PSS, dirty and swapped bytes. "
	  "?seconds=N gives the change over N seconds.", sc_profile_heap, sc_count_mappings, NULL },
	{ "/debug/pprof/mutex", SC_ROUTE_GET | SC_ROUTE_LISTED,
	  "Stack traces of threads waiting on locks and conditions (futex), with the time they "
	  "waited, over ?seconds=N (default --wait-seconds)", sc_profile_mutex, sc_count_futex, NULL },
	{ "/debug/pprof/profile", SC_ROUTE_GET | SC_ROUTE_LISTED,
	  "CPU profile. You can specify the duration in the seconds GET parameter. "
	  "After you get the profile file, use the go tool pprof command to investigate "
	  "the profile.", sc_profile_cpu, NULL, NULL },
	{ "/debug/pprof/symbol", SC_ROUTE_GET | SC_ROUTE_POST | SC_ROUTE_LISTED,
	  "Maps given program counters to function names. Counters can be specified "
	  "in a GET raw query or POST body, multiple counters are separated by '+'.",
	  sc_profile_symbol, NULL, NULL },
	{ "/debug/pprof/threadcreate", SC_ROUTE_GET | SC_ROUTE_LISTED,
	  "Stack traces that led to the creation of new OS threads (clone events seen while "
	  "attached, from the first request on); threads whose creation was not seen appear "
	  "under their start routine, labelled creation=\"not seen\"", sc_profile_threadcreate,
	  sc_count_threads, NULL },
	{ "/debug/pprof/trace", SC_ROUTE_GET | SC_ROUTE_LISTED,
	  "A trace of every thread of the target: running, waiting for a core, blocked (sync, "
	  "network, sleep, system calls), CPU samples, RSS. You can specify the duration in the "
	  "seconds GET parameter. After you get the trace file, use the go tool trace command to "
	  "investigate the trace; ?format=json gives Chrome Trace Event JSON (Perfetto, "
	  "speedscope).", sc_profile_trace, NULL, "format=json" },
	{ "/healthz", SC_ROUTE_ANY | SC_ROUTE_PUBLIC,
	  "ok (200) when podprof can profile: its sampler runs, the target exists and may be "
	  "traced; else 503 and what is wrong (no token needed).", on_healthz, NULL, NULL },
	{ "/metrics", SC_ROUTE_GET,
	  "podprof's own counters, and the target's threads, RSS and CPU, in Prometheus text "
	  "format.", sc_metrics_handle, NULL, NULL },
	{ "/readyz", SC_ROUTE_ANY | SC_ROUTE_PUBLIC, "The same checks as /healthz, for readiness probes.",
	  on_healthz, NULL, NULL },
};

const struct sc_route *sc_server_routes(size_t *n)
{
	*n = SC_ARRAY_LEN(routes);
	return routes;
}

/* Prints text from column 29 on (where --help puts option texts),
 * wrapped before column 80. */
static void help_text(FILE *out, const char *s)
{
	size_t col = 0;

	while (*s) {
		size_t w = strcspn(s, " ");

		if (col && col + 1 + w > 51) {
			fprintf(out, "\n%29s", "");
			col = 0;
		} else if (col) {
			fputc(' ', out);
			col++;
		}
		fprintf(out, "%.*s", (int)w, s);
		col += w;
		s += w;
		s += strspn(s, " ");
	}
	fputc('\n', out);
}

void sc_server_help(FILE *out)
{
	fprintf(out, "Endpoints (each profile also takes ?pid=N to look at another process of the pod):\n");
	for (size_t i = 0; i < SC_ARRAY_LEN(routes); i++) {
		if (!routes[i].desc)
			continue;
		fprintf(out, "  %-26s ", routes[i].path);
		help_text(out, routes[i].desc);
	}
}

/* ---- answers --------------------------------------------------------------- */

static void go_error_body(int status, const char *msg, const char **headers, char *body,
			  size_t size, int *len)
{
	*len = snprintf(body, size, "%s\n", msg);
	if (*len >= (int)size)
		*len = (int)size - 1;
	/* A 503 is a "come back soon": say when, as scrapers honour it. */
	*headers = status == 503 ? GO_ERR_RETRY : GO_ERR;
}

void sc_go_error(struct sc_conn *c, int status, const char *msg)
{
	const char *headers;
	char body[512];
	int n;

	go_error_body(status, msg, &headers, body, sizeof(body), &n);
	sc_http_respond(c, status, headers, body, (size_t)n);
}

void sc_reply_body(struct sc_reply *r, int status, const char *headers, void *body, size_t len)
{
	base_free(r->body);
	r->status = status;
	snprintf(r->headers, sizeof(r->headers), "%s", headers ? headers : "");
	r->body = body;
	r->len = body ? len : 0;
}

void sc_reply_error(struct sc_reply *r, int status, const char *msg)
{
	const char *headers;
	char body[512], *copy;
	int n;

	go_error_body(status, msg, &headers, body, sizeof(body), &n);
	copy = base_memdup(body, (size_t)n + 1);
	sc_reply_body(r, status, headers, copy, (size_t)n);
}

void sc_reply_pprof(struct sc_reply *r, struct enc_pprof *e, int err, const char *filename)
{
	char headers[160];
	uint8_t *body = NULL;
	size_t len = 0;

	if (!err)
		err = enc_pprof_encode(e, SC_MAX_PROFILE_BYTES, &body, &len);
	if (err) {
		log_error("pprof: encoding %s failed: %s", filename, sc_strerror(err));
		sc_reply_error(r, 500, "failed to encode profile");
		return;
	}
	snprintf(headers, sizeof(headers), "Content-Type: application/octet-stream\r\n"
		 "Content-Disposition: attachment; filename=\"%s\"\r\n", filename);
	sc_reply_body(r, 200, headers, body, len);
}

pid_t sc_request_pid(struct sc_server *srv, struct sc_conn *c, const char *query)
{
	char msg[128];
	pid_t pid;
	int err = sc_query_pid(query, srv->pid, &pid, msg, sizeof(msg));

	if (err) {
		sc_go_error(c, err == -ESRCH ? 404 : 400, msg);
		return 0;
	}
	return pid;
}

/* ---- dispatch ----------------------------------------------------------------- */

/* Compares in time that depends on the lengths only, not on where the
 * first difference is. */
static int token_ok(const char *token, const char *authorization)
{
	const char *given = authorization;
	size_t a, b;
	unsigned char diff = 0;

	if (strncasecmp(given, "Bearer ", 7))
		return 0;
	given += 7;
	a = strlen(token);
	b = strlen(given);
	for (size_t i = 0; i < a; i++)
		diff |= (unsigned char)(token[i] ^ given[i < b ? i : 0]);
	return !diff && a == b;
}

static const struct sc_route *find_route(const char *path)
{
	for (size_t i = 0; i < SC_ARRAY_LEN(routes); i++)
		if (!strcmp(routes[i].path, path))
			return &routes[i];
	return NULL;
}

/* An unknown name under /debug/pprof/ gets Go's 404 only for GET and
 * HEAD: for other methods Go 1.23's mux answers 405 first. */
static int method_ok(const struct sc_route *r, const struct sc_request *req)
{
	unsigned m = r ? r->flags : SC_ROUTE_GET;

	if (m & SC_ROUTE_ANY)
		return 1;
	if ((m & SC_ROUTE_GET) && (!strcmp(req->method, "GET") || req->head))
		return 1;
	return (m & SC_ROUTE_POST) && !strcmp(req->method, "POST");
}

static void on_request(struct sc_conn *c, const struct sc_request *req, void *arg)
{
	struct sc_server *srv = arg;
	const struct sc_route *r = find_route(req->path);

	log_debug("http: %s %s", req->method, req->path);
	if (r && (r->flags & SC_ROUTE_PUBLIC)) {
		r->handler(srv, c, req);
		return;
	}
	if (srv->token && !token_ok(srv->token, req->authorization)) {
		sc_http_respond(c, 401, "Content-Type: text/plain; charset=utf-8\r\nX-Go-Pprof: 1\r\n"
				"WWW-Authenticate: Bearer realm=\"podprof\"\r\n", "unauthorized\n", 13);
		return;
	}
	/* Disabled by the switch file: everything under /debug/pprof answers
	 * as a path nobody serves, Go's mux 404 (what Knative's profiling
	 * handler answers while profiling.enable is false). */
	if (!atomic_load(&srv->enabled) && !strncmp(req->path, "/debug/pprof", 12) &&
	    (!req->path[12] || req->path[12] == '/')) {
		sc_http_respond(c, 404, SC_TEXT_PLAIN, "404 page not found\n", 19);
		return;
	}
	if (!r && strncmp(req->path, SC_PPROF_PREFIX, strlen(SC_PPROF_PREFIX))) {
		sc_http_respond(c, 404, SC_TEXT_PLAIN, "404 page not found\n", 19);
		return;
	}
	if (!method_ok(r, req)) {
		sc_http_respond(c, 405, "Allow: GET, HEAD\r\nContent-Type: text/plain; charset=utf-8\r\n",
				"Method Not Allowed\n", 19);
		return;
	}
	if (!r) {
		sc_go_error(c, 404, "Unknown profile");   /* clients match these words */
		return;
	}
	r->handler(srv, c, req);
}

/* ---- jobs: sampler, then a work thread, then the loop ---------------------- */

/* Frees the result and the profile's part of j: on the work thread once
 * encoded, so that the loop never walks a large profile. */
static void job_release(struct sc_job *j)
{
	if (j->released)
		return;
	j->released = 1;
	pt_profile_free(j->req.profile);
	j->req.profile = NULL;
	if (j->ops->release)
		j->ops->release(j);
}

static void job_free(struct sc_job *j)
{
	if (!j)
		return;
	job_release(j);
	base_free(j->reply.body);
	base_free(j);
}

/* The last of the server goes when sc_server_free was called, the async
 * handle is closed and no encoding is left to report back. */
static void server_maybe_free(struct sc_server *s)
{
	if (!s->freeing || s->async_open || s->encoding)
		return;
	pthread_mutex_destroy(&s->lock);
	base_free(s->token);
	sc_index_cache_free(&s->index);
	base_free(s);
}

/* Sampler thread: the continuous watch ended. After an exec the process is
 * still there, running a new program: watch that one. */
static void watch_ended(struct sc_server *srv, struct pt_request *req)
{
	char path[64], buf[512];
	struct pt_stat st;

	atomic_store(&srv->watching, 0);
	if (req->err == -ECANCELED) {
		/* podprof is stopping, or the switch paused the sampler. If it
		 * was switched back on meanwhile, watch again, unless
		 * switch_changed already did (watching claims the request). */
		if (atomic_load(&srv->enabled) && !atomic_exchange(&srv->watching, 1))
			pt_sampler_submit(srv->sampler, req);
		return;
	}
	if (req->err) {
		log_warn("watch: the continuous watch of pid %d stopped: %s", (int)req->pid,
			 sc_strerror(req->err));
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)req->pid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, &st) ||
	    st.state == 'Z' || st.state == 'X') {
		log_warn("watch: pid %d is gone: the continuous watch ended", (int)req->pid);
		return;
	}
	log_info("watch: pid %d runs a new program: watching it from now on", (int)req->pid);
	atomic_store(&srv->watching, 1);
	pt_sampler_submit(srv->sampler, req);
}

/* Sampler thread: queue the finished request for the loop. */
static void on_sampler_done(struct pt_request *req, void *arg)
{
	struct sc_server *srv = arg;
	struct sc_job *j = req->user;

	if (req == &srv->watch) {   /* it has no client: it ended, or never began */
		watch_ended(srv, req);
		return;
	}

	pthread_mutex_lock(&srv->lock);
	j->next = srv->done;
	srv->done = j;
	pthread_mutex_unlock(&srv->lock);
	uv_async_send(&srv->async);
}

static void on_sampler_log(void *arg, int level, const char *msg)
{
	(void)arg;
	SC_LOG(level == 0 ? SC_LOG_DEBUG : level == 1 ? SC_LOG_INFO : SC_LOG_WARN, "%s", msg);
}

/* Loop thread, from the connection's close: the client went away. */
static void on_abort(struct sc_conn *c, void *arg)
{
	struct sc_job *j = arg;

	(void)c;
	j->conn = NULL;
	if (j->state == JOB_SAMPLING)
		pt_sampler_cancel(j->srv->sampler, &j->req);
	else
		uv_cancel((uv_req_t *)&j->work);   /* fails harmlessly once running */
}

/* Work thread. */
static void on_work(uv_work_t *w)
{
	struct sc_job *j = SC_CONTAINER_OF(w, struct sc_job, work);

	j->ops->encode(j, &j->reply);
	job_release(j);
}

/* Loop thread: the encoding finished, or was cancelled (UV_ECANCELED)
 * before it started because the client left or the server is closing. */
static void on_work_done(uv_work_t *w, int status)
{
	struct sc_job *j = SC_CONTAINER_OF(w, struct sc_job, work);
	struct sc_server *srv = j->srv;

	srv->encoding--;
	if (status == UV_ECANCELED) {
		log_debug("http: an encoding was cancelled before it started");
	} else if (!j->conn) {
		log_debug("http: client gone while its answer was encoded: dropped");
	} else {
		sc_http_respond_owned(j->conn, j->reply.status, j->reply.headers, j->reply.body,
				      j->reply.len);
		j->reply.body = NULL;
	}
	job_free(j);
	server_maybe_free(srv);
}

static void job_done(struct sc_server *srv, struct sc_job *j)
{
	int err;

	if (j->conn && !srv->freeing && !atomic_load(&srv->enabled)) {
		/* Switched off while it ran: the sampler cancelled it. */
		sc_http_respond(j->conn, 404, SC_TEXT_PLAIN, "404 page not found\n", 19);
		job_free(j);
		return;
	}
	if (!j->conn || srv->freeing || j->ops->done(j) == SC_JOB_ANSWERED) {
		job_free(j);
		return;
	}
	j->state = JOB_ENCODING;
	if ((err = uv_queue_work(srv->loop, &j->work, on_work, on_work_done))) {
		log_error("http: cannot queue an encoding: %s", uv_strerror(err));
		sc_go_error(j->conn, 500, "failed to encode profile");
		job_free(j);
		return;
	}
	srv->encoding++;
	log_debug("http: an answer is being encoded on a work thread (%d now)", srv->encoding);
}

static void on_async(uv_async_t *a)
{
	struct sc_server *srv = a->data;
	struct sc_job *list;

	/* Sends coalesce: take everything queued so far. */
	pthread_mutex_lock(&srv->lock);
	list = srv->done;
	srv->done = NULL;
	pthread_mutex_unlock(&srv->lock);
	while (list) {
		struct sc_job *j = list;

		list = list->next;
		job_done(srv, j);
	}
}

struct sc_job *sc_job_new(struct sc_server *srv, struct sc_conn *c, const struct sc_job_ops *ops,
			  size_t size)
{
	struct sc_job *j = base_calloc(1, size < sizeof(*j) ? sizeof(*j) : size);

	if (!j) {
		sc_go_error(c, 500, "out of memory");
		return NULL;
	}
	j->ops = ops;
	j->srv = srv;
	j->conn = c;
	j->state = JOB_SAMPLING;
	j->req.user = j;
	return j;
}

void sc_job_submit(struct sc_job *j)
{
	sc_http_on_abort(j->conn, on_abort, j);
	pt_sampler_submit(j->srv->sampler, &j->req);
}

const char *sc_job_strerror(int err)
{
	switch (err) {
	case -ESRCH: return "target process is gone";
	case -EPERM:
	case -EACCES:   /* /proc/<pid>/maps is refused before ptrace is even tried */
		return "ptrace not permitted: podprof needs CAP_SYS_PTRACE (and no_new_privs off for file capabilities)";
	case -EBUSY: return "too many profiles running at once";
	case -ECANCELED: return "podprof is shutting down";
	default: return NULL;
	}
}

enum sc_job_next sc_job_check(struct sc_job *j, const char *prefix)
{
	const char *m;
	char msg[256];

	if (!j->req.err)
		return SC_JOB_ENCODE;
	m = sc_job_strerror(j->req.err);
	if (!m) {
		snprintf(msg, sizeof(msg), "%s%s", prefix ? prefix : "", sc_strerror(j->req.err));
		m = msg;
	}
	return sc_job_error(j, j->req.err == -EBUSY ? 503 : 500, m);
}

enum sc_job_next sc_job_error(struct sc_job *j, int status, const char *msg)
{
	sc_go_error(j->conn, status, msg);
	return SC_JOB_ANSWERED;
}

/* ---- life cycle ------------------------------------------------------------- */

/* Reads the bearer token: the file's first line, at most 512 bytes, not
 * empty. Returns 0, or a negative errno after logging why (never the token). */
static int read_token(const char *path, char **out)
{
	char buf[1024];
	ssize_t n = pt_proc_slurp(path, buf, sizeof(buf));
	size_t len;

	*out = NULL;
	if (n < 0) {
		log_error("auth: cannot read --auth-token-file %s: %s", path, sc_strerror((int)n));
		return (int)n;
	}
	len = strcspn(buf, "\r\n");
	while (len && (buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		len--;
	if (!len || len > 512) {
		log_error("auth: --auth-token-file %s must hold one token of 1..512 bytes", path);
		return -EINVAL;
	}
	buf[len] = '\0';
	*out = base_strdup(buf);
	memset(buf, 0, sizeof(buf));
	return *out ? 0 : -ENOMEM;
}

static void sampler_opts(const struct sc_cfg *cfg, struct pt_sampler_opts *so)
{
	*so = (struct pt_sampler_opts){
		.stack_bytes = (size_t)cfg->stack_bytes,
		.max_frames = cfg->max_frames,
		.max_threads = cfg->max_threads,
		.max_per_tick = cfg->max_stopped,
		.spin_ns = (uint64_t)cfg->spin_us * 1000u,
		.max_cpu = cfg->max_cpu_percent / 100.0,
		.max_sessions = cfg->max_sessions,
		.max_stacks = cfg->max_stacks,
		.max_trace_events = cfg->max_trace_events,
		.detach_grace_ns = (uint64_t)cfg->detach_grace_ms * 1000000ull,
		.debug_dir = getenv("PODPROF_DEBUG_DIR"),
		.python = cfg->python,
	};
}

/* Starts the continuous watch unless it runs (watching claims it). */
static void watch_start(struct sc_server *s)
{
	if (!s->cfg->continuous || atomic_exchange(&s->watching, 1))
		return;
	/* For as long as the target lives (a century, in practice). */
	s->watch = (struct pt_request){ .kind = &pt_kind_watch, .pid = s->pid, .hz = s->cfg->continuous_hz,
					.duration_ns = 100ull * 365 * 86400 * 1000000000ull };
	pt_sampler_submit(s->sampler, &s->watch);
}

/* Loop thread: the switch file changed. Off: new requests get 404 at once,
 * the sampler cancels every session (their clients get 404 too), the watch
 * included, and detaches now. On: the sampler serves again, and the watch
 * starts again. The order matters to watch_ended (sampler thread), which
 * restarts the watch only when it sees enabled. */
static void on_switch(struct sc_switch *sw, int enabled, void *arg)
{
	struct sc_server *s = arg;

	(void)sw;
	if (!enabled) {
		atomic_store(&s->enabled, 0);
		pt_sampler_pause(s->sampler, 1);
		return;
	}
	pt_sampler_pause(s->sampler, 0);
	atomic_store(&s->enabled, 1);
	watch_start(s);
}

int sc_server_new(struct sc_server **out, uv_loop_t *loop, const struct sc_cfg *cfg, pid_t pid)
{
	struct pt_sampler_opts so;
	struct sc_server *s;
	int err;

	*out = NULL;
	s = base_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->cfg = cfg;
	s->pid = pid;
	if (cfg->auth_token_file && (err = read_token(cfg->auth_token_file, &s->token))) {
		base_free(s);
		return err;
	}
	pthread_mutex_init(&s->lock, NULL);
	if ((err = uv_async_init(loop, &s->async, on_async))) {
		pthread_mutex_destroy(&s->lock);
		base_free(s->token);
		base_free(s);
		return err;
	}
	s->async.data = s;
	s->async_open = 1;
	sampler_opts(cfg, &so);
	if ((err = pt_sampler_new(&s->sampler, &so, on_sampler_done, on_sampler_log, s)))
		goto fail;
	if ((err = sc_http_init(loop, &s->http, cfg, on_request, s))) {
		log_error("http: cannot listen on %s: %s", cfg->listen, sc_strerror(err));
		goto fail;
	}
	atomic_store(&s->enabled, 1);
	if (cfg->enable_file) {
		if ((err = sc_switch_new(&s->sw, loop, cfg->enable_file, on_switch, s)))
			goto fail;
		if (!sc_switch_enabled(s->sw)) {
			atomic_store(&s->enabled, 0);
			pt_sampler_pause(s->sampler, 1);
		}
	}
	if (cfg->continuous && atomic_load(&s->enabled)) {
		watch_start(s);
		log_info("watch: continuous mode: pid %d stays traced at %d Hz; block, mutex, allocs and "
			 "threadcreate count from now on", (int)pid, cfg->continuous_hz);
	}
	*out = s;
	return 0;
fail:
	sc_server_free(s);
	return err;
}

int sc_server_port(const struct sc_server *s)
{
	return sc_http_port(s->http);
}

const struct sc_cfg *sc_server_cfg(const struct sc_server *s)
{
	return s->cfg;
}

pid_t sc_server_target(const struct sc_server *s)
{
	return s->pid;
}

int sc_server_watching(struct sc_server *s)
{
	return atomic_load(&s->watching);
}

struct pt_sampler *sc_server_sampler(struct sc_server *s)
{
	return s->sampler;
}

struct sc_index_cache *sc_server_index_cache(struct sc_server *s)
{
	return &s->index;
}

static void on_async_closed(uv_handle_t *h)
{
	struct sc_server *s = h->data;

	s->async_open = 0;
	server_maybe_free(s);
}

void sc_server_free(struct sc_server *s)
{
	if (!s)
		return;
	s->freeing = 1;
	atomic_store(&s->enabled, 0);   /* the watch's cancel must not restart it */
	sc_switch_free(s->sw);
	s->sw = NULL;
	/* Close connections first: their abort callbacks cancel sessions and
	 * queued encodings (running ones finish, unanswered, later). */
	sc_http_close(s->http);
	s->http = NULL;
	pt_sampler_free(s->sampler);   /* joins; completes what was pending */
	s->sampler = NULL;
	on_async(&s->async);           /* free what the sampler handed back */
	uv_close((uv_handle_t *)&s->async, on_async_closed);
}
