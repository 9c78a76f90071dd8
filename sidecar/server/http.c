/* The HTTP/1.1 server (see http.h): the listening socket, the connections
 * with their bounded request buffers, and the responses being written,
 * each owned by its connection until its write completes. Loop thread
 * only. */
#include "sidecar/server/http.h"

#include <errno.h>
#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"
#include "sidecar/server/cfg.h"
#include "sidecar/server/log.h"
#include "sidecar/server/util.h"

#define CONN_F_BUSY      0x01u   /* a handler owns the current request */
#define CONN_F_CLOSING   0x02u
#define CONN_F_KEEPALIVE 0x04u
#define CONN_F_DRAINING  0x10u   /* drain() is on the stack */
#define CONN_F_PARTIAL   0x20u   /* some of a request has arrived, not all */
#define CONN_F_OOM       0x40u   /* the server's reserve, taken when memory ran out */

struct sc_http {
	uv_loop_t *loop;
	uv_tcp_t tcp;
	const struct sc_cfg *cfg;
	sc_handler_cb handler;
	void *arg;
	llhttp_settings_t settings;
	struct sc_conn *conns;      /* list */
	int nconns;
	int closing;
	int port;
	/* A connection kept for when memory runs out as a client connects:
	 * libuv accepts nothing more until the pending client is taken, so it
	 * is taken into this one and answered 503 (see on_connection). */
	struct sc_conn *reserve;
	int live;                   /* connections not yet freed */
	int tcp_closed;             /* the listener's handle is closed */
	char slab[65536];           /* read buffer: consumed before the next read */
};

struct write_req {
	uv_write_t w;
	struct sc_conn *c;
	char *head;
	void *body;             /* freed with base_free */
	int close_after;
	int spare;              /* the connection's own (struct sc_conn spare) */
};

/* A short answer (an error's) needs no allocation: when memory runs out it
 * is written from the connection's own room, so that a client learns why
 * (a 500 and its one line) rather than see its connection close. */
#define SPARE_BYTES 1024

struct sc_conn {
	uv_tcp_t tcp;
	uv_timer_t timer;
	int open_handles;
	unsigned int flags;
	struct sc_http *srv;
	llhttp_t parser;
	/* A failed append closes the connection (a 4xx, then close), so these
	 * buffers' sticky errors never outlive the request that set them. */
	struct base_buf url, body, in;
	size_t header_bytes;
	char field[32];             /* current header name (truncated), lowercase */
	size_t field_len;
	int in_auth;                /* the current value belongs to Authorization */
	char auth[1024];            /* its value (longer values are refused: 401) */
	size_t auth_len;
	int status_on_error;        /* 0, or the status to answer a bad request with */
#ifdef PODPROF_TORTURE
	/* make torture: X-Podprof-Fail-Alloc: N makes the Nth allocation
	 * from this request's dispatch on fail (0: count only); its answer
	 * says how many were counted (X-Podprof-Allocs). */
	int in_fail;
	long long fail_at;          /* -1: not asked */
	int armed;                  /* this request armed it: its answer disarms */
	char fail_val[24];
	size_t fail_len;
#endif
	sc_abort_cb abort_cb;
	void *abort_arg;
	struct sc_conn *next, **pprev;
	struct write_req spare;     /* in use while spare.c is set */
	char spare_buf[SPARE_BYTES];
};

static const char *status_text(int s)
{
	switch (s) {
	case 200: return "OK";
	case 301: return "Moved Permanently";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Request Entity Too Large";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	default: return "Unknown";
	}
}

static void conn_close(struct sc_conn *c);
static void on_server_closed(uv_handle_t *h);

/* The server goes once its listener and every connection are closed (in
 * whatever order libuv runs their close callbacks). */
static void server_maybe_free(struct sc_http *srv)
{
	if (!srv->tcp_closed || srv->live)
		return;
	base_free(srv->reserve);
	base_free(srv);
}

static void on_handle_closed(uv_handle_t *h)
{
	struct sc_conn *c = h->data;
	struct sc_http *srv = c->srv;

	if (--c->open_handles > 0)
		return;
	base_buf_free(&c->url);
	base_buf_free(&c->body);
	base_buf_free(&c->in);
	base_free(c);
	srv->live--;
	/* The reserve used up: make another, now that memory may be back. */
	if (!srv->reserve && !srv->closing)
		srv->reserve = base_calloc(1, sizeof(*srv->reserve));
	server_maybe_free(srv);
}

static void conn_close(struct sc_conn *c)
{
	if (c->flags & CONN_F_CLOSING)
		return;
	c->flags |= CONN_F_CLOSING;
	if ((c->flags & CONN_F_BUSY) && c->abort_cb) {
		sc_abort_cb cb = c->abort_cb;

		c->abort_cb = NULL;
		cb(c, c->abort_arg);
	}
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	c->srv->nconns--;
	uv_close((uv_handle_t *)&c->timer, on_handle_closed);
	uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
}

static void on_timeout(uv_timer_t *t)
{
	struct sc_conn *c = t->data;

	if (c->flags & CONN_F_BUSY)
		return;
	if (c->flags & CONN_F_PARTIAL) {
		log_info("http: request headers not received within %d ms, closing",
			 c->srv->cfg->header_timeout_ms);
		sc_http_respond(c, 408, "X-Go-Pprof: 1\r\nContent-Type: text/plain; charset=utf-8\r\n",
				"request header timeout\n", 23);
		c->flags &= ~CONN_F_KEEPALIVE;
		return;
	}
	conn_close(c);
}

static void arm_timer(struct sc_conn *c, int idle)
{
	const struct sc_cfg *cfg = c->srv->cfg;

	uv_timer_start(&c->timer, on_timeout,
		       (uint64_t)(idle ? cfg->idle_timeout_ms : cfg->header_timeout_ms), 0);
}

/* ---- llhttp callbacks: bounded accumulation (CONVENTIONS H11) ---- */

static struct sc_conn *conn_of(llhttp_t *p)
{
	return SC_CONTAINER_OF(p, struct sc_conn, parser);
}

static int count_header(struct sc_conn *c, size_t n)
{
	c->header_bytes += n;
	if (c->header_bytes > (size_t)c->srv->cfg->max_header_bytes) {
		c->status_on_error = 431;
		return -1;
	}
	return 0;
}

static int on_message_begin(llhttp_t *p)
{
	struct sc_conn *c = conn_of(p);

	c->flags |= CONN_F_PARTIAL;
	c->url.len = 0;
	c->body.len = 0;
	c->header_bytes = 0;
	c->field_len = 0;
	c->in_auth = 0;
	c->auth_len = 0;
#ifdef PODPROF_TORTURE
	c->in_fail = 0;
	c->fail_at = -1;
#endif
	return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
	struct sc_conn *c = conn_of(p);
	int err;

	if (count_header(c, n))
		return -1;
	if ((err = base_buf_put(&c->url, at, n))) {
		c->status_on_error = err == -ENOMEM ? 503 : 431;   /* out of memory: come back */
		return -1;
	}
	return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
	struct sc_conn *c = conn_of(p);

	if (count_header(c, n))
		return -1;
	for (size_t i = 0; i < n && c->field_len + 1 < sizeof(c->field); i++) {
		char ch = at[i];

		c->field[c->field_len++] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
	}
	c->field[c->field_len] = '\0';
	return 0;
}

static int on_header_field_complete(llhttp_t *p)
{
	struct sc_conn *c = conn_of(p);

	c->in_auth = !strcmp(c->field, "authorization");
#ifdef PODPROF_TORTURE
	c->in_fail = !strcmp(c->field, "x-podprof-fail-alloc");
	if (c->in_fail)
		c->fail_len = 0;
#endif
	c->field_len = 0;
	if (c->in_auth)
		c->auth_len = 0;
	return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
	struct sc_conn *c = conn_of(p);

	if (count_header(c, n))
		return -1;
#ifdef PODPROF_TORTURE
	if (c->in_fail) {
		size_t room = sizeof(c->fail_val) - 1 - c->fail_len;

		memcpy(c->fail_val + c->fail_len, at, n < room ? n : room);
		c->fail_len += n < room ? n : room;
		c->fail_val[c->fail_len] = '\0';
		c->fail_at = strtoll(c->fail_val, NULL, 10);
	}
#endif
	if (c->in_auth) {
		size_t room = sizeof(c->auth) - 1 - (c->auth_len < sizeof(c->auth) ? c->auth_len : sizeof(c->auth) - 1);

		memcpy(c->auth + c->auth_len, at, n < room ? n : room);
		c->auth_len += n;   /* past the buffer: marked too long below */
		if (c->auth_len >= sizeof(c->auth))
			c->auth_len = sizeof(c->auth);
	}
	return 0;
}

static int on_headers_complete(llhttp_t *p)
{
	struct sc_conn *c = conn_of(p);

	if (p->content_length > (uint64_t)c->srv->cfg->max_body_bytes &&
	    p->content_length != ULLONG_MAX) {
		c->status_on_error = 413;
		return -1;
	}
	return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
	struct sc_conn *c = conn_of(p);
	int err;

	if ((err = base_buf_put(&c->body, at, n))) {
		c->status_on_error = err == -ENOMEM ? 503 : 413;
		return -1;
	}
	return 0;
}

static int on_message_complete(llhttp_t *p)
{
	struct sc_conn *c = conn_of(p);

	c->flags &= ~CONN_F_PARTIAL;
	if (llhttp_should_keep_alive(p))
		c->flags |= CONN_F_KEEPALIVE;
	else
		c->flags &= ~CONN_F_KEEPALIVE;
	/* One request at a time: stop here, resume after the response. */
	return HPE_PAUSED;
}

/* Percent-decodes the path in place; returns -EINVAL on a bad escape or NUL. */
static int decode_path(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (*r == '%') {
			int h = sc_hexval(r[1]), l = h >= 0 ? sc_hexval(r[2]) : -1;

			if (l < 0 || (h == 0 && l == 0))
				return -EINVAL;
			*w++ = (char)(h * 16 + l);
			r += 2;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
	return 0;
}

static void dispatch(struct sc_conn *c)
{
	struct sc_request req = { 0 };
	char *url = c->url.data ? c->url.data : (char *)"", *q;

	c->flags |= CONN_F_BUSY;
	uv_timer_stop(&c->timer);
	req.method = llhttp_method_name((llhttp_method_t)c->parser.method);
	req.head = c->parser.method == HTTP_HEAD;
	q = strchr(url, '?');
	if (q)
		*q++ = '\0';
	req.query = q ? q : "";
	req.path = url;
	req.body = c->body.data ? c->body.data : "";
	req.body_len = c->body.len;
	/* An oversized value never matches a token: keep it unterminated-safe. */
	c->auth[c->auth_len < sizeof(c->auth) ? c->auth_len : sizeof(c->auth) - 1] = '\0';
	req.authorization = c->auth_len < sizeof(c->auth) ? c->auth : "\x01too-long";
#ifdef PODPROF_TORTURE
	if (c->fail_at >= 0) {
		base_mem_fail_at((uint64_t)c->fail_at);
		c->armed = 1;
	}
	c->fail_at = -1;
#endif
	if (url[0] != '/' || decode_path(url)) {
		sc_http_respond(c, 400, "Content-Type: text/plain; charset=utf-8\r\n",
				"400 Bad Request\n", 16);
		return;
	}
	c->srv->handler(c, &req, c->srv->arg);
}

/* Runs the parser over the bytes waiting in c->in, one request at a time.
 * A loop, not recursion: a handler that answers at once lets the next
 * pipelined request through on the next iteration, so a client pipelining
 * thousands of tiny requests cannot grow our stack. */
static void drain(struct sc_conn *c)
{
	if (c->flags & CONN_F_DRAINING)
		return;
	c->flags |= CONN_F_DRAINING;
	while (c->in.len && !(c->flags & (CONN_F_BUSY | CONN_F_CLOSING))) {
		llhttp_errno_t e = llhttp_execute(&c->parser, c->in.data, c->in.len);
		size_t used = c->in.len;

		if (e == HPE_PAUSED) {
			used = (size_t)(llhttp_get_error_pos(&c->parser) - c->in.data);
			llhttp_resume(&c->parser);
		}
		memmove(c->in.data, c->in.data + used, c->in.len - used);
		c->in.len -= used;
		if (e == HPE_PAUSED) {
			dispatch(c);
			continue;
		}
		if (e != HPE_OK) {
			int status = c->status_on_error ? c->status_on_error : 400;
			char body[128];
			int len = snprintf(body, sizeof(body), "%d %s\n", status, status_text(status));

			log_info("http: bad request (%s): %s", llhttp_errno_name(e),
				 c->status_on_error ? "limit exceeded" : llhttp_get_error_reason(&c->parser));
			c->in.len = 0;
			c->flags &= ~CONN_F_KEEPALIVE;
			c->flags |= CONN_F_BUSY;
			sc_http_respond(c, status, status == 503 ?
					"Content-Type: text/plain; charset=utf-8\r\nRetry-After: 5\r\n" :
					"Content-Type: text/plain; charset=utf-8\r\n", body, (size_t)len);
		}
	}
	c->flags &= ~CONN_F_DRAINING;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	/* One buffer serves every connection: on_read copies what it keeps
	 * (into the connection's input buffer) before the loop reads again. */
	struct sc_conn *c = h->data;

	(void)suggested;
	buf->base = c->srv->slab;
	buf->len = sizeof(c->srv->slab);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct sc_conn *c = s->data;

	if (n < 0) {
		conn_close(c);   /* EOF or error: aborts a pending handler */
		return;
	}
	if (n > 0) {
		/* Bytes wait here while a request is being answered (pipelining). */
		int err = base_buf_put(&c->in, buf->base, (size_t)n);

		if (err == -ENOMEM && !(c->flags & CONN_F_BUSY)) {
			/* No memory to hold the request: say so (no allocation
			 * needed: see respond_spare), then close. */
			c->flags |= CONN_F_BUSY;
			c->flags &= ~CONN_F_KEEPALIVE;
			uv_read_stop(s);
			sc_http_respond(c, 503, "Retry-After: 5\r\nContent-Type: text/plain; charset=utf-8\r\n",
					"503 Service Unavailable\n", 24);
			return;
		}
		if (err) {
			conn_close(c);
			return;
		}
		drain(c);
	}
}

static void on_written(uv_write_t *w, int status)
{
	struct write_req *wr = SC_CONTAINER_OF(w, struct write_req, w);
	struct sc_conn *c = wr->c;

	if (wr->spare) {
		wr->c = NULL;   /* free again */
		conn_close(c);  /* memory ran out: this connection is done */
		return;
	}
	base_free(wr->head);
	base_free(wr->body);
	if (status < 0 || wr->close_after) {
		base_free(wr);
		conn_close(c);
		return;
	}
	base_free(wr);
}

/* Writes a short answer from the connection's own room, with no
 * allocation, and closes the connection after it (memory ran out).
 * Returns 0, or -ENOMEM when it does not fit or the room is taken. */
static int respond_spare(struct sc_conn *c, int status, const char *headers, const void *body,
			 size_t len)
{
	struct write_req *wr = &c->spare;
	uv_buf_t buf;
	int n;

	if (wr->c)
		return -ENOMEM;   /* taken: a pipelined request's answer is on its way */
	n = snprintf(c->spare_buf, sizeof(c->spare_buf), "HTTP/1.1 %d %s\r\n%sX-Content-Type-Options: "
		     "nosniff\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", status,
		     status_text(status), headers ? headers : "", len);
	if (n < 0 || (size_t)n + len > sizeof(c->spare_buf))
		return -ENOMEM;
	if (c->parser.method == HTTP_HEAD)
		len = 0;   /* its Content-Length is the body's all the same */
	if (len)
		memcpy(c->spare_buf + n, body, len);
	*wr = (struct write_req){ .c = c, .close_after = 1, .spare = 1 };
	buf = uv_buf_init(c->spare_buf, (unsigned int)((size_t)n + len));
	c->flags &= ~(CONN_F_BUSY | CONN_F_KEEPALIVE);
	c->abort_cb = NULL;
	if (uv_write(&wr->w, (uv_stream_t *)&c->tcp, &buf, 1, on_written)) {
		wr->c = NULL;
		return -EIO;
	}
	return 0;
}

/* Memory ran out sending an answer: it goes out whole from the
 * connection's own room if it is short, else a 500 saying so (a profile
 * already made is lost, but the client learns why). Returns 0, or an error
 * when even that cannot be written (the caller closes). */
static int respond_oom(struct sc_conn *c, int status, const char *headers, const void *body,
		       size_t len)
{
	static const char msg[] = "out of memory sending the answer\n";

	if (!respond_spare(c, status, headers, body, len))
		return 0;
	return respond_spare(c, 500, "Content-Type: text/plain; charset=utf-8\r\nX-Go-Pprof: 1\r\n",
			     msg, sizeof(msg) - 1);
}

int sc_http_respond_owned(struct sc_conn *c, int status, const char *headers, void *body,
			  size_t len)
{
	struct write_req *wr;
	struct base_buf head;
	uv_buf_t bufs[2];
	size_t hlen;
	int err, keep;

	if (c->flags & CONN_F_CLOSING) {
		base_free(body);
		return -ECONNRESET;
	}
#ifdef PODPROF_TORTURE
	/* The request's count ends here: the answer's own allocations are
	 * not the request's. */
	unsigned long long counted = (unsigned long long)base_mem_counted();
	int failed = base_mem_failed(), armed = c->armed;

	if (armed)
		base_mem_fail_off();
	c->armed = 0;
#endif
	keep = (c->flags & CONN_F_KEEPALIVE) && !c->srv->closing;
	base_buf_init(&head, 65536);
	err = base_buf_printf(&head, "HTTP/1.1 %d %s\r\n%sX-Content-Type-Options: nosniff\r\n"
			      "Content-Length: %zu\r\nConnection: %s\r\n",
			      status, status_text(status), headers ? headers : "", len,
			      keep ? "keep-alive" : "close");
#ifdef PODPROF_TORTURE
	if (!err && armed)
		err = base_buf_printf(&head, "X-Podprof-Allocs: %llu%s\r\n", counted,
				      failed ? " (one failed)" : "");
#endif
	if (!err)
		err = base_buf_str(&head, "\r\n");
	wr = base_calloc(1, sizeof(*wr));
	if (!err && !wr)
		err = -ENOMEM;
	if (!err)
		err = base_buf_take(&head, &wr->head, &hlen);
	if (err) {
		base_free(wr);
		base_buf_free(&head);
		/* Out of memory for the head: a short answer still goes out
		 * whole, from the connection's own room; a long one as a 500. */
		if (err != -ENOMEM || respond_oom(c, status, headers, body, len))
			conn_close(c);
		base_free(body);
		return err;
	}
	wr->c = c;
	wr->close_after = !keep;
	bufs[0] = uv_buf_init(wr->head, (unsigned int)hlen);
	if (c->parser.method == HTTP_HEAD) {
		base_free(body);
		body = NULL;
		len = 0;
	}
	bufs[1] = uv_buf_init(body, (unsigned int)len);
	wr->body = body;
	c->flags &= ~CONN_F_BUSY;
	c->abort_cb = NULL;
	if ((err = uv_write(&wr->w, (uv_stream_t *)&c->tcp, bufs, len ? 2 : 1, on_written))) {
		base_free(wr->head);
		base_free(wr->body);
		base_free(wr);
		conn_close(c);
		return err;
	}
	if (keep) {
		/* Serve pipelined requests that arrived meanwhile. */
		arm_timer(c, c->in.len ? 0 : 1);
		drain(c);
	}
	return 0;
}

int sc_http_respond(struct sc_conn *c, int status, const char *headers, const void *body,
		    size_t len)
{
	void *copy = base_memdup(body, len);

	if (!copy) {
		if (respond_oom(c, status, headers, body, len))
			conn_close(c);
		return -ENOMEM;
	}
	return sc_http_respond_owned(c, status, headers, copy, len);
}

void sc_http_on_abort(struct sc_conn *c, sc_abort_cb cb, void *arg)
{
	c->abort_cb = cb;
	c->abort_arg = arg;
}

static void on_connection(uv_stream_t *server, int status)
{
	struct sc_http *srv = server->data;
	struct sc_conn *c;
	size_t cap;

	if (status < 0)
		return;
	c = base_calloc(1, sizeof(*c));
	if (!c && (c = srv->reserve)) {
		/* Out of memory: the client is taken and told (503), so that
		 * the listener goes on accepting. */
		srv->reserve = NULL;
		c->flags |= CONN_F_OOM;
	}
	if (!c) {
		log_error("http: out of memory for a new connection: not accepting until memory is back");
		return;
	}
	c->srv = srv;
	srv->live++;
	uv_tcp_init(srv->loop, &c->tcp);
	uv_timer_init(srv->loop, &c->timer);
	c->tcp.data = c->timer.data = c;
	c->open_handles = 2;
	cap = (size_t)srv->cfg->max_header_bytes;
	base_buf_init(&c->url, cap);
	base_buf_init(&c->body, (size_t)srv->cfg->max_body_bytes);
	base_buf_init(&c->in, cap + (size_t)srv->cfg->max_body_bytes);
	llhttp_init(&c->parser, HTTP_REQUEST, &srv->settings);
	c->next = srv->conns;
	if (c->next)
		c->next->pprev = &c->next;
	c->pprev = &srv->conns;
	srv->conns = c;
	srv->nconns++;
	if (uv_accept(server, (uv_stream_t *)&c->tcp)) {
		conn_close(c);
		return;
	}
	if (srv->nconns > srv->cfg->max_conns || (c->flags & CONN_F_OOM)) {
		int oom = c->flags & CONN_F_OOM;

		if (oom)
			log_warn("http: out of memory for a new connection: answered 503");
		else
			log_warn("http: connection limit %d reached, refusing a client", srv->cfg->max_conns);
		c->flags |= CONN_F_BUSY;
		sc_http_respond(c, 503, "Retry-After: 1\r\nContent-Type: text/plain; charset=utf-8\r\n",
				oom ? "out of memory\n" : "too many connections\n", oom ? 14 : 21);
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	arm_timer(c, 0);
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int sc_http_init(uv_loop_t *loop, struct sc_http **out, const struct sc_cfg *cfg,
		 sc_handler_cb handler, void *arg)
{
	struct sockaddr_storage ss;
	struct sc_http *srv;
	char host[256];
	int port, err, len = sizeof(ss);

	*out = NULL;
	if (sc_parse_hostport(cfg->listen, host, sizeof(host), &port))
		return -EINVAL;
	if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) &&
	    uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss))
		return -EINVAL;
	srv = base_calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->loop = loop;
	srv->cfg = cfg;
	srv->handler = handler;
	srv->arg = arg;
	llhttp_settings_init(&srv->settings);
	srv->settings.on_message_begin = on_message_begin;
	srv->settings.on_url = on_url;
	srv->settings.on_header_field = on_header_field;
	srv->settings.on_header_field_complete = on_header_field_complete;
	srv->settings.on_header_value = on_header_value;
	srv->settings.on_headers_complete = on_headers_complete;
	srv->settings.on_body = on_body;
	srv->settings.on_message_complete = on_message_complete;
	srv->reserve = base_calloc(1, sizeof(*srv->reserve));
	uv_tcp_init(loop, &srv->tcp);
	srv->tcp.data = srv;
	if ((err = uv_tcp_bind(&srv->tcp, (struct sockaddr *)&ss, 0)) ||
	    (err = uv_listen((uv_stream_t *)&srv->tcp, 128, on_connection))) {
		/* srv goes once its handle is closed. */
		uv_close((uv_handle_t *)&srv->tcp, on_server_closed);
		return err;
	}
	uv_tcp_getsockname(&srv->tcp, (struct sockaddr *)&ss, &len);
	srv->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						   : ((struct sockaddr_in *)&ss)->sin_port);
	*out = srv;
	return 0;
}

int sc_http_port(const struct sc_http *srv)
{
	return srv->port;
}

static void on_server_closed(uv_handle_t *h)
{
	struct sc_http *srv = h->data;

	srv->tcp_closed = 1;
	server_maybe_free(srv);
}

void sc_http_close(struct sc_http *srv)
{
	if (!srv)
		return;
	srv->closing = 1;
	while (srv->conns)
		conn_close(srv->conns);
	uv_close((uv_handle_t *)&srv->tcp, on_server_closed);
}
