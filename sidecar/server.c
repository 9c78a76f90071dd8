#include "sidecar/server.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "encoder/pprof.h"
#include "ptrace/proc.h"
#include "ptrace/sampler.h"
#include "sidecar/cfg.h"
#include "sidecar/http.h"
#include "sidecar/log.h"
#include "sidecar/util.h"

#define MAX_SYMBOL_ADDRS 100000
#define MAX_PROFILE_BYTES (256u << 20)

static const char TEXT[] = "Content-Type: text/plain; charset=utf-8\r\n";
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
	struct pending *done;
	int async_open;
	char *pod_html;              /* pod_panel's cache */
	size_t pod_len;
	pid_t pod_for;
	uint64_t pod_at;
};

/* A request handed to the sampler, and the connection waiting for it. */
struct pending {
	struct pt_request req;
	struct sc_server *srv;
	struct sc_conn *conn;        /* NULL once the client went away */
	uint64_t *addrs;
	int head;
	int debug;                   /* goroutine: 0 proto, 1 grouped text, 2 dump */
	struct pending *next;
};

static void go_error(struct sc_conn *c, int status, const char *msg)
{
	char body[512];
	int n = snprintf(body, sizeof(body), "%s\n", msg);

	/* A 503 is a "come back soon": say when, as scrapers honour it. */
	sc_http_respond(c, status, status == 503 ? GO_ERR_RETRY : GO_ERR, body, (size_t)n);
}

/* ---- query parsing -------------------------------------------------------- */

int sc_query_get(const char *q, const char *key, char *out, size_t len)
{
	size_t klen = strlen(key);

	while (q && *q) {
		const char *amp = strchr(q, '&'), *end = amp ? amp : q + strlen(q);
		const char *eq = memchr(q, '=', (size_t)(end - q));
		const char *kend = eq ? eq : end;

		if ((size_t)(kend - q) == klen && !memcmp(q, key, klen)) {
			size_t w = 0;

			for (const char *r = eq ? eq + 1 : end; r < end; r++) {
				int ch = *r;

				if (ch == '+') {
					ch = ' ';
				} else if (ch == '%' && end - r >= 3 && sc_hexval(r[1]) >= 0 &&
					   sc_hexval(r[2]) >= 0) {
					ch = sc_hexval(r[1]) * 16 + sc_hexval(r[2]);
					r += 2;
				}
				if (ch == 0)
					return -EINVAL;   /* %00 would cut the value short */
				if (w + 1 >= len)
					return -E2BIG;
				out[w++] = (char)ch;
			}
			out[w] = '\0';
			return 1;
		}
		q = amp ? amp + 1 : NULL;
	}
	return 0;
}

int sc_parse_profile_seconds(const char *query)
{
	char v[64];
	int64_t s;

	if (sc_query_get(query, "seconds", v, sizeof(v)) != 1 || sc_parse_go_int(v, &s) || s <= 0)
		return 30;
	return s > INT32_MAX ? INT32_MAX : (int)s;
}

int sc_parse_symbol_addrs(const char *s, size_t len, uint64_t *out, size_t max)
{
	size_t n = 0, i = 0;

	while (i < len) {
		char word[40];
		size_t w = 0;
		const char *p;
		int base = 10;

		while (i < len && s[i] != '+') {
			if (w + 1 >= sizeof(word))
				return -EINVAL;
			word[w++] = s[i++];
		}
		i++;   /* skip '+' */
		word[w] = '\0';
		if (!w)
			continue;
		p = word;
		/* strconv.ParseUint(word, 0, 64): 0x hex, 0o/0 octal, 0b binary. */
		if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
			base = 16;
			p += 2;
		} else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B')) {
			base = 2;
			p += 2;
		} else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O')) {
			base = 8;
			p += 2;
		} else if (p[0] == '0' && p[1]) {
			base = 8;
		}
		if (!*p || sc_hexval(*p) < 0 || sc_hexval(*p) >= base)
			return -EINVAL;
		if (n == max)
			return -E2BIG;
		if (sc_parse_u64(&p, base, UINT64_MAX, &out[n]) || *p)
			return -EINVAL;
		n++;
	}
	return (int)n;
}

/* ---- sampler hand-off ------------------------------------------------------- */

/* Sampler thread: queue the finished request for the loop. */
static void on_sampler_done(struct pt_request *req, void *arg)
{
	struct sc_server *srv = arg;
	struct pending *p = req->user;

	pthread_mutex_lock(&srv->lock);
	p->next = srv->done;
	srv->done = p;
	pthread_mutex_unlock(&srv->lock);
	uv_async_send(&srv->async);
}

static void on_sampler_log(void *arg, int level, const char *msg)
{
	(void)arg;
	SC_LOG(level == 0 ? SC_LOG_DEBUG : level == 1 ? SC_LOG_INFO : SC_LOG_WARN, "%s", msg);
}

static void pending_free(struct pending *p)
{
	if (!p)
		return;
	pt_profile_free(p->req.profile);
	if (p->req.names)
		for (size_t i = 0; i < p->req.naddrs; i++)
			free(p->req.names[i]);
	free(p->req.names);
	free(p->addrs);
	free(p);
}

static void on_abort(struct sc_conn *c, void *arg)
{
	struct pending *p = arg;

	(void)c;
	p->conn = NULL;
	pt_sampler_cancel(p->srv->sampler, &p->req);
}

static const char *req_error(int err)
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

static const char *state_name(char state)
{
	switch (state) {
	case 'R': return "running";
	case 'S': return "sleeping";
	case 'D': return "uninterruptible";
	case 'T': return "stopped";
	case 't': return "traced";
	case 'Z': return "zombie";
	default: return "unknown";
	}
}

/* The profile.proto of a CPU profile (kind PT_REQ_CPU) or of a thread dump
 * (PT_REQ_SNAPSHOT: Go's goroutine profile, one sample per thread). */
static int encode_profile(const struct pt_profile *pr, enum pt_req_kind kind, pid_t pid,
			  uint8_t **out, size_t *len)
{
	struct enc_pprof *e = NULL;
	int64_t *map_ids = NULL;
	uint64_t *loc_ids = NULL, *stack = NULL;
	size_t maxn = 0;
	int err;
	char comment[256];

	if ((err = enc_pprof_new(&e)))
		return err;
	map_ids = calloc(pr->nmaps + 1, sizeof(*map_ids));
	loc_ids = calloc(pr->nlocs + 1, sizeof(*loc_ids));
	for (size_t i = 0; i < pr->nsamples; i++)
		if (pr->samples[i].n > maxn)
			maxn = pr->samples[i].n;
	stack = calloc(maxn + 1, sizeof(*stack));
	err = -ENOMEM;
	if (!map_ids || !loc_ids || !stack)
		goto out;
	if (kind == PT_REQ_CPU) {
		if ((err = enc_pprof_sample_type(e, "samples", "count")) ||
		    (err = enc_pprof_sample_type(e, "cpu", "nanoseconds")) ||
		    (err = enc_pprof_period(e, "cpu", "nanoseconds", 1000000000ll / pr->hz)))
			goto out;
		enc_pprof_time(e, (int64_t)pr->time_ns, (int64_t)pr->duration_ns);
		snprintf(comment, sizeof(comment),
			 "podprof: on-CPU thread samples taken with ptrace at %d Hz; thread_samples=%" PRIu64
			 " dropped_stacks=%" PRIu64, pr->hz, pr->thread_samples, pr->dropped_stacks);
	} else {
		if ((err = enc_pprof_sample_type(e, "goroutine", "count")) ||
		    (err = enc_pprof_period(e, "goroutine", "count", 1)))
			goto out;
		enc_pprof_time(e, (int64_t)pr->time_ns, 0);
		snprintf(comment, sizeof(comment),
			 "podprof: every thread of pid %d, one sample each; threads=%zu stopped=%" PRIu64
			 " (the others were blocked, unchanged since their last snapshot)",
			 (int)pid, pr->nsamples, pr->threads_stopped);
	}
	if ((err = enc_pprof_comment(e, comment)))
		goto out;
	for (size_t i = 0; i < pr->nmaps; i++) {
		const struct pt_profile_map *m = &pr->maps[i];

		/* Every location of ours carries a function name (a symbol or
		 * an honest "lib.so+0x..."), so clients never re-symbolize from
		 * their own, possibly different, copy of the file. */
		map_ids[i] = enc_pprof_mapping(e, m->start, m->limit, m->offset, m->path, m->build_id, 1);
		if (map_ids[i] < 0) {
			err = (int)map_ids[i];
			goto out;
		}
	}
	for (size_t i = 0; i < pr->nlocs; i++) {
		const struct pt_profile_loc *l = &pr->locs[i];
		int64_t fn = enc_pprof_function(e, l->name), id;

		if (fn < 0) {
			err = (int)fn;
			goto out;
		}
		id = enc_pprof_location(e, l->map >= 0 ? (uint64_t)map_ids[l->map] : 0, l->addr,
					(uint64_t)fn);
		if (id < 0) {
			err = (int)id;
			goto out;
		}
		loc_ids[i] = (uint64_t)id;
	}
	for (size_t i = 0; i < pr->nsamples; i++) {
		const struct pt_profile_sample *s = &pr->samples[i];
		int64_t v[2] = { s->count, s->cpu_ns };
		const char *sc = s->syscall >= 0 ? pt_syscall_name(s->syscall) : NULL;
		/* Which thread: pprof -tagfocus=thread=NAME or -tagfocus=tid=N. */
		struct enc_label lab[4] = {
			{ .key = "thread", .str = s->thread[0] ? s->thread : "?" },
			{ .key = "tid", .num = s->tid },
			{ .key = "state", .str = state_name(s->state) },
			{ .key = "syscall", .str = sc ? sc : "?" },
		};
		size_t nl = kind == PT_REQ_CPU ? 2 : s->syscall >= 0 ? 4 : 3;

		for (uint32_t k = 0; k < s->n; k++)
			stack[k] = loc_ids[pr->loc_ids[s->first + k]];
		if ((err = enc_pprof_sample_labels(e, stack, s->n, v, kind == PT_REQ_CPU ? 2 : 1,
						   lab, nl)))
			goto out;
	}
	err = enc_pprof_encode(e, MAX_PROFILE_BYTES, out, len);
out:
	free(map_ids);
	free(loc_ids);
	free(stack);
	enc_pprof_free(e);
	return err;
}

/* Answers a request the sampler failed (503 when busy, else 500; `what`
 * prefixes errors without a message of their own). Returns 1 if it did. */
static int answer_failed(struct pending *p, const char *what)
{
	const char *m;
	char msg[256];

	if (!p->req.err)
		return 0;
	m = req_error(p->req.err);
	if (!m) {
		snprintf(msg, sizeof(msg), "%s%s", what ? what : "", sc_strerror(p->req.err));
		m = msg;
	}
	go_error(p->conn, p->req.err == -EBUSY ? 503 : 500, m);
	return 1;
}

/* Sends the request's profile as Go does: gzipped profile.proto, a download
 * named after the endpoint. */
static void respond_profile(struct pending *p, const char *filename)
{
	char headers[160];
	uint8_t *body;
	size_t len;
	int err = encode_profile(p->req.profile, p->req.kind, p->req.pid, &body, &len);

	if (err) {
		log_error("pprof: encoding %s failed: %s", filename, sc_strerror(err));
		go_error(p->conn, 500, "failed to encode profile");
		return;
	}
	snprintf(headers, sizeof(headers), "Content-Type: application/octet-stream\r\n"
		 "Content-Disposition: attachment; filename=\"%s\"\r\n", filename);
	sc_http_respond_owned(p->conn, 200, headers, body, len);
}

static void answer_cpu(struct pending *p)
{
	if (!answer_failed(p, "Could not enable CPU profiling: "))
		respond_profile(p, "profile");
}

/* Where a location lives, for the text formats: "<file> +0x<file offset>"
 * of its mapping, or "?" for anonymous memory. */
static void loc_where(const struct pt_profile *pr, const struct pt_profile_loc *l, struct sc_buf *b)
{
	if (l->map >= 0) {
		const struct pt_profile_map *m = &pr->maps[l->map];

		sc_buf_printf(b, "%s +%#" PRIx64, m->path, l->addr - m->start + m->offset);
	} else {
		sc_buf_printf(b, "?");
	}
}

static int cmp_tid(const void *a, const void *b)
{
	const struct pt_profile_sample *x = *(const struct pt_profile_sample *const *)a;
	const struct pt_profile_sample *y = *(const struct pt_profile_sample *const *)b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

/* debug=2: one block per thread, shaped like Go's panic output. */
static void dump_threads(const struct pt_profile *pr, struct sc_buf *b,
			 const struct pt_profile_sample **order)
{
	for (size_t i = 0; i < pr->nsamples; i++)
		order[i] = &pr->samples[i];
	qsort(order, pr->nsamples, sizeof(*order), cmp_tid);
	for (size_t i = 0; i < pr->nsamples; i++) {
		const struct pt_profile_sample *s = order[i];
		const char *sc = s->syscall >= 0 ? pt_syscall_name(s->syscall) : NULL;

		sc_buf_printf(b, "goroutine %d [%s", (int)s->tid, state_name(s->state));
		if (s->syscall >= 0)
			sc_buf_printf(b, ", syscall %s", sc ? sc : "?");
		sc_buf_printf(b, ", thread \"%s\"]:\n", s->thread);
		if (!s->n)
			sc_buf_printf(b, "(stack not captured)\n");
		for (uint32_t k = 0; k < s->n; k++) {
			const struct pt_profile_loc *l = &pr->locs[pr->loc_ids[s->first + k]];

			sc_buf_printf(b, "%s(...)\n\t", l->name);
			loc_where(pr, l, b);
			sc_buf_printf(b, "\n");
		}
		sc_buf_printf(b, "\n");
	}
}

struct stack_group {
	const struct pt_profile_sample *s;
	int64_t count;
};

static int cmp_stack(const struct pt_profile *pr, const struct pt_profile_sample *x,
		     const struct pt_profile_sample *y)
{
	for (uint32_t k = 0; k < x->n && k < y->n; k++) {
		uint64_t a = pr->locs[pr->loc_ids[x->first + k]].addr;
		uint64_t c = pr->locs[pr->loc_ids[y->first + k]].addr;

		if (a != c)
			return a < c ? -1 : 1;
	}
	return (x->n > y->n) - (x->n < y->n);
}

static int cmp_sample_stack(const void *a, const void *b, void *pr)
{
	return cmp_stack(pr, *(const struct pt_profile_sample *const *)a,
			 *(const struct pt_profile_sample *const *)b);
}

static int cmp_group(const void *a, const void *b, void *pr)
{
	const struct stack_group *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return cmp_stack(pr, x->s, y->s);
}

/* debug=1: Go's count profile: threads grouped by identical stack, most
 * common first ("N @ pc pc ...", then "#\tpc\tname\twhere" per frame). */
static int count_profile(const struct pt_profile *pr, struct sc_buf *b,
			 const struct pt_profile_sample **order)
{
	struct stack_group *g = calloc(pr->nsamples + 1, sizeof(*g));
	size_t ng = 0;

	if (!g)
		return -ENOMEM;
	for (size_t i = 0; i < pr->nsamples; i++)
		order[i] = &pr->samples[i];
	qsort_r(order, pr->nsamples, sizeof(*order), cmp_sample_stack, (void *)pr);
	for (size_t i = 0; i < pr->nsamples; i++) {
		if (ng && !cmp_stack(pr, g[ng - 1].s, order[i]))
			g[ng - 1].count += order[i]->count;
		else
			g[ng++] = (struct stack_group){ order[i], order[i]->count };
	}
	qsort_r(g, ng, sizeof(*g), cmp_group, (void *)pr);
	sc_buf_printf(b, "goroutine profile: total %zu\n", pr->nsamples);
	for (size_t i = 0; i < ng; i++) {
		const struct pt_profile_sample *s = g[i].s;

		sc_buf_printf(b, "%" PRId64 " @", g[i].count);
		for (uint32_t k = 0; k < s->n; k++)
			sc_buf_printf(b, " %#" PRIx64, pr->locs[pr->loc_ids[s->first + k]].addr);
		sc_buf_printf(b, "\n");
		for (uint32_t k = 0; k < s->n; k++) {
			const struct pt_profile_loc *l = &pr->locs[pr->loc_ids[s->first + k]];

			sc_buf_printf(b, "#\t%#" PRIx64 "\t%s\t", l->addr, l->name);
			loc_where(pr, l, b);
			sc_buf_printf(b, "\n");
		}
		sc_buf_printf(b, "\n");
	}
	free(g);
	return 0;
}

static void answer_goroutine(struct pending *p)
{
	const struct pt_profile *pr = p->req.profile;
	const struct pt_profile_sample **order;
	struct sc_buf b;

	if (answer_failed(p, NULL))
		return;
	if (p->debug == 0) {
		respond_profile(p, "goroutine");
		return;
	}
	order = calloc(pr->nsamples + 1, sizeof(*order));
	if (!order) {
		go_error(p->conn, 500, "out of memory");
		return;
	}
	sc_buf_init(&b, MAX_PROFILE_BYTES);
	if (p->debug >= 2)
		dump_threads(pr, &b, order);
	else if (count_profile(pr, &b, order))
		b.err = -ENOMEM;
	free(order);
	if (b.err) {
		sc_buf_free(&b);
		go_error(p->conn, 500, b.err == -E2BIG ? "thread dump too large" : "out of memory");
		return;
	}
	sc_http_respond_owned(p->conn, 200, TEXT, b.data, b.len);
}

static void answer_symbol(struct pending *p)
{
	struct sc_buf b;

	if (p->req.err) {
		const char *m = req_error(p->req.err);

		go_error(p->conn, 500, m ? m : sc_strerror(p->req.err));
		return;
	}
	sc_buf_init(&b, 64u << 20);
	sc_buf_printf(&b, "num_symbols: 1\n");
	for (size_t i = 0; i < p->req.naddrs; i++)
		if (p->req.names[i])
			sc_buf_printf(&b, "%#" PRIx64 " %s\n", p->addrs[i], p->req.names[i]);
	sc_http_respond_owned(p->conn, 200, TEXT, b.data, b.len);
}

static void on_async(uv_async_t *a)
{
	struct sc_server *srv = a->data;
	struct pending *list;

	/* Sends coalesce: take everything queued so far. */
	pthread_mutex_lock(&srv->lock);
	list = srv->done;
	srv->done = NULL;
	pthread_mutex_unlock(&srv->lock);
	while (list) {
		struct pending *p = list;

		list = list->next;
		if (p->conn) {
			if (p->req.kind == PT_REQ_CPU)
				answer_cpu(p);
			else if (p->req.kind == PT_REQ_SNAPSHOT)
				answer_goroutine(p);
			else
				answer_symbol(p);
		}
		pending_free(p);
	}
}

static struct pending *pending_new(struct sc_server *srv, struct sc_conn *c, enum pt_req_kind kind,
				   pid_t pid)
{
	struct pending *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->srv = srv;
	p->conn = c;
	p->req.kind = kind;
	p->req.pid = pid;
	p->req.user = p;
	return p;
}

/* ---- handlers ----------------------------------------------------------- */

/* The process a request is about: ?pid=N if given (every endpoint takes it,
 * to profile another process of the pod), else the default target. A bad
 * pid is answered here in Go's error shape, and 0 is returned. */
static pid_t request_pid(struct sc_server *srv, struct sc_conn *c, const char *query)
{
	char v[32], path[64], buf[1024], msg[128];
	struct pt_stat st;
	int64_t pid;
	int rc = sc_query_get(query, "pid", v, sizeof(v));

	if (rc == 0)
		return srv->pid;
	if (rc < 0 || sc_parse_go_int(v, &pid) || pid <= 0 || pid > INT32_MAX) {
		go_error(c, 400, "invalid value for \"pid\" - must be a positive integer");
		return 0;
	}
	if (pid == getpid()) {
		go_error(c, 400, "pid is podprof itself");
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, &st) ||
	    st.state == 'Z' || st.state == 'X') {
		snprintf(msg, sizeof(msg), "no process with pid %d in this pod", (int)pid);
		go_error(c, 404, msg);
		return 0;
	}
	if (st.flags & PT_PF_KTHREAD) {
		snprintf(msg, sizeof(msg), "pid %d is a kernel thread", (int)pid);
		go_error(c, 400, msg);
		return 0;
	}
	return (pid_t)pid;
}

static void handle_profile(struct sc_server *srv, struct sc_conn *c, const char *query)
{
	struct pending *p;
	char v[64];
	int64_t hz = srv->cfg->default_hz;
	int seconds = sc_parse_profile_seconds(query), rc;
	pid_t pid = request_pid(srv, c, query);

	if (!pid)
		return;
	rc = sc_query_get(query, "hz", v, sizeof(v));
	if (rc != 0 && (rc < 0 || sc_parse_go_int(v, &hz) || hz < 1 || hz > 1000)) {
		go_error(c, 400, "invalid value for \"hz\" - must be an integer from 1 to 1000");
		return;
	}
	if (seconds > srv->cfg->max_seconds) {
		char msg[128];

		snprintf(msg, sizeof(msg), "profile duration exceeds the limit of %d seconds",
			 srv->cfg->max_seconds);
		go_error(c, 400, msg);
		return;
	}
	p = pending_new(srv, c, PT_REQ_CPU, pid);
	if (!p) {
		go_error(c, 500, "out of memory");
		return;
	}
	p->req.seconds = seconds;
	p->req.hz = (int)hz;
	sc_http_on_abort(c, on_abort, p);
	pt_sampler_submit(srv->sampler, &p->req);
}

/* /debug/pprof/goroutine: every thread's stack now. debug follows Go's
 * strconv.Atoi (anything unparsable is 0). */
static void handle_goroutine(struct sc_server *srv, struct sc_conn *c, const char *query)
{
	struct pending *p;
	char v[32];
	int64_t debug = 0;
	pid_t pid;

	if (sc_query_get(query, "seconds", v, sizeof(v)) != 0) {
		go_error(c, 400, "\"seconds\" parameter is not supported for this profile type "
			 "by podprof yet (ask again without it for the threads now)");
		return;
	}
	if (!(pid = request_pid(srv, c, query)))
		return;
	if (sc_query_get(query, "debug", v, sizeof(v)) != 1 || sc_parse_go_int(v, &debug))
		debug = 0;
	p = pending_new(srv, c, PT_REQ_SNAPSHOT, pid);
	if (!p) {
		go_error(c, 500, "out of memory");
		return;
	}
	p->debug = debug < 0 ? 1 : debug > 2 ? 2 : (int)debug;
	sc_http_on_abort(c, on_abort, p);
	pt_sampler_submit(srv->sampler, &p->req);
}

static void handle_symbol(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req)
{
	/* pprof's symbolz puts addresses in the raw query: a pid= for another
	 * process comes only with POST (body = addresses). */
	int post = !strcmp(req->method, "POST");
	const char *in = post ? req->body : req->query;
	size_t len = post ? req->body_len : strlen(req->query);
	pid_t pid = post ? request_pid(srv, c, req->query) : srv->pid;
	struct pending *p;
	uint64_t *addrs;
	int n;

	if (!pid)
		return;
	addrs = malloc(sizeof(*addrs) * (len / 2 + 1 < MAX_SYMBOL_ADDRS ? len / 2 + 1 : MAX_SYMBOL_ADDRS));
	if (!addrs) {
		go_error(c, 500, "out of memory");
		return;
	}
	n = sc_parse_symbol_addrs(in, len, addrs, len / 2 + 1 < MAX_SYMBOL_ADDRS ? len / 2 + 1 : MAX_SYMBOL_ADDRS);
	if (n < 0) {
		free(addrs);
		go_error(c, 400, n == -E2BIG ? "too many addresses" : "malformed address list");
		return;
	}
	if (n == 0) {
		free(addrs);
		sc_http_respond(c, 200, TEXT, "num_symbols: 1\n", 15);
		return;
	}
	p = pending_new(srv, c, PT_REQ_SYMBOLIZE, pid);
	if (!p) {
		free(addrs);
		go_error(c, 500, "out of memory");
		return;
	}
	p->addrs = addrs;
	p->req.addrs = addrs;
	p->req.naddrs = (size_t)n;
	sc_http_on_abort(c, on_abort, p);
	pt_sampler_submit(srv->sampler, &p->req);
}

static void handle_cmdline(struct sc_server *srv, struct sc_conn *c, const char *query)
{
	char path[64], *text;
	size_t len;
	int err;
	pid_t pid = request_pid(srv, c, query);

	if (!pid)
		return;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	err = pt_proc_slurp_alloc(path, 1u << 20, &text, &len);
	if (err) {
		go_error(c, err == -ESRCH ? 404 : 500,
			 err == -ESRCH ? "target process is gone" : sc_strerror(err));
		return;
	}
	/* /proc ends each argument with NUL; Go joins with NUL, nothing after. */
	if (len && text[len - 1] == '\0')
		len--;
	sc_http_respond_owned(c, 200, TEXT, text, len);
}

struct profile_row {
	const char *name;
	const char *desc;
};

/* The profiles this build serves, sorted by name as Go's index is. */
static const struct profile_row rows[] = {
	{ "cmdline", "The command line invocation of the current program" },
	{ "goroutine", "Stack traces of all current goroutines (here: every thread of the target). "
		       "Use debug=2 as a query parameter to export in the same format as an "
		       "unrecovered panic." },
	{ "profile", "CPU profile. You can specify the duration in the seconds GET parameter. "
		     "After you get the profile file, use the go tool pprof command to investigate "
		     "the profile." },
	{ "symbol", "Maps given program counters to function names. Counters can be specified "
		    "in a GET raw query or POST body, multiple counters are separated by '+'." },
};

static void target_panel(pid_t pid, struct sc_buf *b)
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
		sc_buf_printf(b, "<p>Target pid %d: gone</p>\n", (int)pid);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) > 0)
		pt_proc_status_value(buf, "VmRSS", &rss);
	sc_buf_printf(b, "<p>\nTarget process:\n<table>\n<tr><td>pid</td><td>%d</td></tr>\n"
		      "<tr><td>comm</td><td>", (int)pid);
	sc_buf_html(b, st.comm);
	sc_buf_printf(b, "</td></tr>\n<tr><td>exe</td><td>");
	sc_buf_html(b, exe[0] ? exe : "?");
	sc_buf_printf(b, "</td></tr>\n<tr><td>threads</td><td>%ld</td></tr>\n"
		      "<tr><td>RSS</td><td>%lld kB</td></tr>\n"
		      "<tr><td>CPU</td><td>%.2f s</td></tr>\n</table>\n</p>\n",
		      st.num_threads, rss, (double)(st.utime + st.stime) / (double)(hz > 0 ? hz : 100));
}

/* The other processes of the pod (our PID namespace), each with a link. */
/* The pod's processes: one /proc scan, kept for POD_PANEL_TTL_NS so that a
 * flood of index requests does not rescan /proc for each. */
#define POD_PANEL_TTL_NS 1000000000ull

static void pod_panel(struct sc_server *srv, pid_t current, struct sc_buf *out)
{
	struct sc_buf fresh, *b = &fresh;
	struct dirent *de;
	DIR *d;
	int shown = 0;
	uint64_t now = uv_hrtime();

	if (srv->pod_html && srv->pod_for == current && now - srv->pod_at < POD_PANEL_TTL_NS) {
		sc_buf_append(out, srv->pod_html, srv->pod_len);
		return;
	}
	if (!(d = opendir("/proc")))
		return;
	sc_buf_init(&fresh, 1u << 20);
	sc_buf_printf(b, "<p>\nProcesses in this pod:\n<table>\n<thead><td>pid</td><td>comm</td></thead>\n");
	while ((de = readdir(d)) && shown < 200) {
		char path[64], buf[1024], *end;
		struct pt_stat st;
		long v = strtol(de->d_name, &end, 10);

		if (*end || v <= 0 || v == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", v);
		if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, &st) ||
		    (st.flags & PT_PF_KTHREAD))
			continue;
		sc_buf_printf(b, "<tr><td><a href='?pid=%ld'>%ld</a>%s</td><td>", v, v,
			      v == current ? " (shown)" : "");
		sc_buf_html(b, st.comm);
		sc_buf_printf(b, "</td></tr>\n");
		shown++;
	}
	closedir(d);
	sc_buf_printf(b, "</table>\n</p>\n");
	if (fresh.err) {
		sc_buf_free(&fresh);
		return;
	}
	sc_buf_append(out, fresh.data, fresh.len);
	free(srv->pod_html);
	srv->pod_html = sc_buf_steal(&fresh, &srv->pod_len);
	srv->pod_for = current;
	srv->pod_at = now;
}

static void handle_index(struct sc_server *srv, struct sc_conn *c, const char *query)
{
	struct sc_buf b;
	char extra[32] = "";
	pid_t pid = request_pid(srv, c, query);

	if (!pid)
		return;
	if (pid != srv->pid)
		snprintf(extra, sizeof(extra), "&pid=%d", (int)pid);

	sc_buf_init(&b, 1u << 20);
	sc_buf_printf(&b, "<html>\n<head>\n<title>/debug/pprof/</title>\n<style>\n.profile-name{\n"
		      "\tdisplay:inline-block;\n\twidth:6rem;\n}\n</style>\n</head>\n<body>\n"
		      "/debug/pprof/\n<br>\n<p>Set debug=1 as a query parameter to export in legacy "
		      "text format</p>\n<br>\nTypes of profiles available:\n<table>\n"
		      "<thead><td>Count</td><td>Profile</td></thead>\n");
	for (size_t i = 0; i < SC_ARRAY_LEN(rows); i++)
		sc_buf_printf(&b, "<tr><td>0</td><td><a href='%s?debug=1%s'>%s</a></td></tr>\n",
			      rows[i].name, extra, rows[i].name);
	sc_buf_printf(&b, "</table>\n<br>\n<p>\nProfile Descriptions:\n<ul>\n");
	for (size_t i = 0; i < SC_ARRAY_LEN(rows); i++) {
		sc_buf_printf(&b, "<li><div class=profile-name>%s: </div> ", rows[i].name);
		sc_buf_html(&b, rows[i].desc);
		sc_buf_printf(&b, "</li>\n");
	}
	sc_buf_printf(&b, "</ul>\n</p>\n");
	target_panel(pid, &b);
	pod_panel(srv, pid, &b);
	sc_buf_printf(&b, "</body>\n</html>\n");
	sc_http_respond_owned(c, 200, "Content-Type: text/html; charset=utf-8\r\n", b.data, b.len);
}

static void metric(struct sc_buf *b, const char *name, const char *type, const char *help,
		   double v)
{
	sc_buf_printf(b, "# HELP podprof_%s %s\n# TYPE podprof_%s %s\npodprof_%s %.9g\n", name, help,
		      name, type, name, v);
}

/* /metrics: Prometheus text format 0.0.4. The sampler's counters, recent
 * pause and unwind quantiles, and the default target's threads, RSS and CPU. */
static void handle_metrics(struct sc_server *srv, struct sc_conn *c)
{
	struct pt_sampler_stats st;
	struct pt_stat ps;
	struct sc_buf b;
	char path[64], buf[1024];
	long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);

	pt_sampler_stats(srv->sampler, &st);
	sc_buf_init(&b, 1u << 20);
	metric(&b, "thread_samples_total", "counter", "Thread stacks captured by CPU ticks and snapshots.",
	       (double)st.thread_samples);
	metric(&b, "stops_total", "counter", "Threads stopped (one at a time) to capture a stack.",
	       (double)st.stops);
	metric(&b, "late_stops_total", "counter",
	       "Threads that stopped after their tick (runnable but not on a core): a CPU tick's are "
	       "captured when they stop, a thread dump's resumed without a stack.",
	       (double)st.late_stops);
	metric(&b, "incomplete_stacks_total", "counter",
	       "Stacks whose unwind ended before the outermost frame.", (double)st.incomplete_stacks);
	metric(&b, "signals_reinjected_total", "counter",
	       "Signals that arrived while the target was traced, passed on to it.",
	       (double)st.signals_reinjected);
	metric(&b, "group_stops_total", "counter", "Group stops (SIGSTOP and the like) honoured.",
	       (double)st.group_stops);
	metric(&b, "snapshot_reused_total", "counter",
	       "Thread-dump stacks reused because the thread stayed blocked (no stop).",
	       (double)st.snapshot_reused);
	metric(&b, "maps_rereads_total", "counter",
	       "Reads of the target's maps forced by an address outside them.", (double)st.maps_rereads);
	metric(&b, "stack_copies_short_total", "counter",
	       "Stacks cut short because the unwind needed more than was copied (the next copy is whole).",
	       (double)st.short_copies);
	metric(&b, "ticks_total", "counter", "Sampling ticks run.", (double)st.ticks);
	metric(&b, "ticks_late_total", "counter",
	       "Ticks that started a period or more late (the sampler fell behind; never queued).",
	       (double)st.ticks_late);
	metric(&b, "pause_seconds_total", "counter",
	       "Time target threads spent stopped by podprof, summed over stops.",
	       (double)st.pause_ns_total / 1e9);
	metric(&b, "unwind_seconds_total", "counter", "Time spent unwinding captured stacks.",
	       (double)st.unwind_ns_total / 1e9);
	sc_buf_printf(&b, "# HELP podprof_pause_seconds Pause per thread-sample, recent samples.\n"
		      "# TYPE podprof_pause_seconds summary\n"
		      "podprof_pause_seconds{quantile=\"0.5\"} %.9g\n"
		      "podprof_pause_seconds{quantile=\"0.99\"} %.9g\n",
		      (double)st.pause_p50_ns / 1e9, (double)st.pause_p99_ns / 1e9);
	metric(&b, "rate_divisor", "gauge",
	       "1, or the factor the sampling rate is lowered by while the sampler is over its CPU budget.",
	       (double)st.rate_div);
	metric(&b, "rate_changes_total", "counter",
	       "Times the sampler lowered or restored its rate.", (double)st.rate_changes);
	metric(&b, "sessions_done_total", "counter", "Profiles finished.", (double)st.sessions_done);
	metric(&b, "sessions_active", "gauge", "Profiles running now.", (double)st.sessions_active);
	metric(&b, "targets_attached", "gauge", "Processes traced now (0 when idle).",
	       (double)st.targets_attached);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)srv->pid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) > 0 && !pt_proc_parse_stat(buf, &ps)) {
		metric(&b, "target_threads", "gauge", "Threads of the default target.",
		       (double)ps.num_threads);
		metric(&b, "target_resident_bytes", "gauge", "Resident memory of the default target.",
		       (double)ps.rss_pages * (double)page);
		metric(&b, "target_cpu_seconds_total", "counter", "CPU time of the default target.",
		       (double)(ps.utime + ps.stime) / (double)hz);
	}
	if (b.err) {
		sc_buf_free(&b);
		go_error(c, 500, "out of memory");
		return;
	}
	sc_http_respond_owned(c, 200, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n",
			      b.data, b.len);
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

static void on_request(struct sc_conn *c, const struct sc_request *req, void *arg)
{
	struct sc_server *srv = arg;
	const char *path = req->path, *name;
	int get = !strcmp(req->method, "GET") || req->head, metrics;

	log_debug("http: %s %s", req->method, path);
	if (!strcmp(path, "/healthz")) {
		sc_http_respond(c, 200, TEXT, "ok\n", 3);
		return;
	}
	if (srv->token && !token_ok(srv->token, req->authorization)) {
		sc_http_respond(c, 401, "Content-Type: text/plain; charset=utf-8\r\nX-Go-Pprof: 1\r\n"
				"WWW-Authenticate: Bearer realm=\"podprof\"\r\n", "unauthorized\n", 13);
		return;
	}
	if (!strcmp(path, "/debug/pprof")) {
		sc_http_respond(c, 301, "Location: /debug/pprof/\r\nContent-Type: text/html; charset=utf-8\r\n",
				"<a href=\"/debug/pprof/\">Moved Permanently</a>.\n\n", 48);
		return;
	}
	metrics = !strcmp(path, "/metrics");
	if (!metrics && strncmp(path, "/debug/pprof/", 13)) {
		sc_http_respond(c, 404, TEXT, "404 page not found\n", 19);
		return;
	}
	name = metrics ? "" : path + 13;
	if (!get && !(strcmp(name, "symbol") == 0 && !strcmp(req->method, "POST"))) {
		sc_http_respond(c, 405, "Allow: GET, HEAD\r\nContent-Type: text/plain; charset=utf-8\r\n",
				"Method Not Allowed\n", 19);
		return;
	}
	if (metrics)
		handle_metrics(srv, c);
	else if (!*name)
		handle_index(srv, c, req->query);
	else if (!strcmp(name, "profile"))
		handle_profile(srv, c, req->query);
	else if (!strcmp(name, "cmdline"))
		handle_cmdline(srv, c, req->query);
	else if (!strcmp(name, "goroutine"))
		handle_goroutine(srv, c, req->query);
	else if (!strcmp(name, "symbol"))
		handle_symbol(srv, c, req);
	else
		go_error(c, 404, "Unknown profile");
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
	*out = strdup(buf);
	memset(buf, 0, sizeof(buf));
	return *out ? 0 : -ENOMEM;
}

int sc_server_new(struct sc_server **out, uv_loop_t *loop, const struct sc_cfg *cfg, pid_t pid)
{
	struct pt_sampler_opts so = {
		.stack_bytes = (size_t)cfg->stack_bytes,
		.max_frames = cfg->max_frames,
		.max_threads = cfg->max_threads,
		.max_per_tick = cfg->max_stopped,
		.spin_ns = (uint64_t)cfg->spin_us * 1000u,
		.max_cpu = cfg->max_cpu_percent / 100.0,
		.max_sessions = cfg->max_sessions,
		.max_stacks = cfg->max_stacks,
		.detach_grace_ns = (uint64_t)cfg->detach_grace_ms * 1000000ull,
		.debug_dir = getenv("PODPROF_DEBUG_DIR"),
	};
	struct sc_server *s;
	int err;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->cfg = cfg;
	s->pid = pid;
	if (cfg->auth_token_file && (err = read_token(cfg->auth_token_file, &s->token))) {
		free(s);
		return err;
	}
	pthread_mutex_init(&s->lock, NULL);
	if ((err = uv_async_init(loop, &s->async, on_async))) {
		pthread_mutex_destroy(&s->lock);
		free(s->token);
		free(s);
		return err;
	}
	s->async.data = s;
	s->async_open = 1;
	if ((err = pt_sampler_new(&s->sampler, &so, on_sampler_done, on_sampler_log, s)))
		goto fail;
	if ((err = sc_http_init(loop, &s->http, cfg, on_request, s))) {
		log_error("http: cannot listen on %s: %s", cfg->listen, sc_strerror(err));
		goto fail;
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

static void on_async_closed(uv_handle_t *h)
{
	struct sc_server *s = h->data;

	pthread_mutex_destroy(&s->lock);
	free(s->token);
	free(s->pod_html);
	free(s);
}

void sc_server_free(struct sc_server *s)
{
	if (!s)
		return;
	/* Close connections first: their abort callbacks cancel sessions. */
	sc_http_close(s->http);
	s->http = NULL;
	pt_sampler_free(s->sampler);   /* joins; completes what was pending */
	s->sampler = NULL;
	on_async(&s->async);           /* free what the sampler handed back */
	uv_close((uv_handle_t *)&s->async, on_async_closed);
}
