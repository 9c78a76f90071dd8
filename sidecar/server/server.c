/* The pprof server (see server.h): its life (the sampler, the jobs, the
 * listener, the switch file, the continuous watch) and the dispatch of
 * each request by the route table it was given: auth, the switch, Go's
 * mux answers for unknown paths and methods. Loop thread, except where
 * noted. */
#include "sidecar/server/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"
#include "ptrace/proc/proc.h"
#include "ptrace/sessions/watch.h"
#include "sidecar/server/cfg.h"
#include "sidecar/server/http.h"
#include "sidecar/server/job.h"
#include "sidecar/server/log.h"
#include "sidecar/server/params.h"
#include "sidecar/server/pod.h"
#include "sidecar/server/procs.h"
#include "sidecar/server/query.h"
#include "sidecar/server/reply.h"
#include "sidecar/server/switch.h"
#include "sidecar/server/util.h"

struct sc_server {
	uv_loop_t *loop;
	const struct sc_cfg *cfg;
	pid_t pid;
	const struct sc_route *routes;   /* the route table (sidecar/routes.h) */
	size_t nroutes;
	char *token;                 /* --auth-token-file's token, or NULL */
	struct sc_http *http;
	struct pt_sampler *sampler;
	struct sc_jobs *jobs;
	struct sc_pod pod;           /* the pod's processes, for the index */
	struct pt_request watch;     /* --continuous: the sampler's watch of the target */
	atomic_int watching;         /* the watch runs (sampler thread ends it) */
	struct sc_switch *sw;        /* --enable-file, or NULL */
	atomic_int enabled;          /* profiling on (the switch); read by the sampler thread */
};

/* ---- dispatch ----------------------------------------------------------------- */

/* Parses every parameter r takes, once, and runs its handler; a bad one is
 * answered here, in Go's shape. */
static void run_route(struct sc_server *srv, const struct sc_route *r, struct sc_conn *c,
		      const struct sc_request *req)
{
	struct sc_params_ctx ctx = { srv->cfg, srv->pid };
	struct sc_params p;
	char msg[192];
	int status = sc_params_parse(&ctx, r->params, !!(r->flags & SC_ROUTE_FORMATS), req, &p, msg,
				     sizeof(msg));

	if (status) {
		sc_go_error(c, status, msg);
		return;
	}
	r->handler(srv, c, req, &p);
	sc_procs_free(&p.target.procs);   /* unless the handler's job took them */
}

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

static const struct sc_route *find_route(const struct sc_server *srv, const char *path)
{
	for (size_t i = 0; i < srv->nroutes; i++)
		if (!strcmp(srv->routes[i].path, path))
			return &srv->routes[i];
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
	const struct sc_route *r = find_route(srv, req->path);

	log_debug("http: %s %s", req->method, req->path);
	if (r && (r->flags & SC_ROUTE_PUBLIC)) {
		run_route(srv, r, c, req);
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
	run_route(srv, r, c, req);
}

/* ---- life cycle ------------------------------------------------------------- */

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

/* Sampler thread: a request is answered. */
static void on_sampler_done(struct pt_request *req, void *arg)
{
	struct sc_server *srv = arg;

	if (req == &srv->watch)   /* it has no client: it ended, or never began */
		watch_ended(srv, req);
	else
		sc_jobs_answered(srv->jobs, req);
}

static void on_sampler_log(void *arg, int level, const char *msg)
{
	(void)arg;
	SC_LOG(level == 0 ? SC_LOG_DEBUG : level == 1 ? SC_LOG_INFO : SC_LOG_WARN, "%s", msg);
}

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
		.draw_threads = cfg->draw_threads,
		.backend = sc_cfg_backend(cfg),
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
		sc_jobs_set_enabled(s->jobs, 0);
		pt_sampler_pause(s->sampler, 1);
		return;
	}
	pt_sampler_pause(s->sampler, 0);
	atomic_store(&s->enabled, 1);
	sc_jobs_set_enabled(s->jobs, 1);
	watch_start(s);
}

int sc_server_new(struct sc_server **out, uv_loop_t *loop, const struct sc_cfg *cfg, pid_t pid,
		  const struct sc_route *routes, size_t nroutes)
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
	s->routes = routes;
	s->nroutes = nroutes;
	if (cfg->auth_token_file && (err = read_token(cfg->auth_token_file, &s->token))) {
		base_free(s);
		return err;
	}
	sampler_opts(cfg, &so);
	if ((err = pt_sampler_new(&s->sampler, &so, on_sampler_done, on_sampler_log, s)) ||
	    (err = sc_jobs_new(&s->jobs, loop, s->sampler)))
		goto fail;
	if ((err = sc_http_init(loop, &s->http, cfg, on_request, s))) {
		if (err == -EADDRINUSE)
			log_error("http: cannot listen on %s: the address is in use (another server holds "
				  "the port; in a Knative Service's pod, queue-proxy holds 8008): choose "
				  "another with --listen HOST:PORT or PODPROF_LISTEN", cfg->listen);
		else
			log_error("http: cannot listen on %s: %s (--listen HOST:PORT or PODPROF_LISTEN)",
				  cfg->listen, sc_strerror(err));
		goto fail;
	}
	atomic_store(&s->enabled, 1);
	if (cfg->enable_file) {
		if ((err = sc_switch_new(&s->sw, loop, cfg->enable_file, on_switch, s)))
			goto fail;
		if (!sc_switch_enabled(s->sw)) {
			atomic_store(&s->enabled, 0);
			sc_jobs_set_enabled(s->jobs, 0);
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

struct sc_jobs *sc_server_jobs(struct sc_server *s)
{
	return s->jobs;
}

struct sc_pod *sc_server_pod(struct sc_server *s)
{
	return &s->pod;
}

const struct sc_route *sc_server_routes(const struct sc_server *s, size_t *n)
{
	*n = s->nroutes;
	return s->routes;
}

/* The last of the server goes once its jobs are closed (the last encoding
 * still running has finished). */
static void on_jobs_closed(void *arg)
{
	struct sc_server *s = arg;

	base_free(s->token);
	sc_pod_free(&s->pod);
	base_free(s);
}

void sc_server_free(struct sc_server *s)
{
	if (!s)
		return;
	atomic_store(&s->enabled, 0);   /* the watch's cancel must not restart it */
	sc_switch_free(s->sw);
	s->sw = NULL;
	/* Close connections first: their abort callbacks cancel sessions and
	 * queued encodings (running ones finish, unanswered, later). */
	sc_http_close(s->http);
	s->http = NULL;
	pt_sampler_free(s->sampler);   /* joins; completes what was pending */
	s->sampler = NULL;
	sc_jobs_close(s->jobs, on_jobs_closed, s);
}
