/* HTTP/1.1 server on libuv + llhttp. Loop thread only. Requests are bounded
 * (request line + headers, body), a connection must send its headers within
 * the header timeout, and the number of connections is capped. A handler
 * answers now or later with sc_http_respond(); if the client goes away first
 * the connection's abort callback runs and the handler must not respond. */
#ifndef SC_HTTP_H
#define SC_HTTP_H

#include <stddef.h>
#include <uv.h>

struct sc_cfg;
struct sc_conn;
struct sc_http;

struct sc_request {
	const char *method;     /* "GET", "POST", ... */
	const char *path;       /* decoded path, without the query */
	const char *query;      /* raw query after '?', "" if none */
	const char *body;
	size_t body_len;
	int head;               /* HEAD: headers only */
	const char *authorization;  /* the Authorization header's value, "" if none */
};

typedef void (*sc_handler_cb)(struct sc_conn *c, const struct sc_request *req, void *arg);
typedef void (*sc_abort_cb)(struct sc_conn *c, void *arg);

/* Binds and listens on cfg->listen. Returns 0 or a negative errno (libuv's
 * codes are negative errnos). */
int sc_http_init(uv_loop_t *loop, struct sc_http **out, const struct sc_cfg *cfg,
		 sc_handler_cb handler, void *arg);
/* Stops listening and closes every connection (aborting pending handlers). */
void sc_http_close(struct sc_http *srv);
/* The bound port (useful with port 0). */
int sc_http_port(const struct sc_http *srv);

/* Sends a response. `headers` is "Name: value\r\n"... (may be NULL); the body
 * is copied. Content-Length and Connection are added. Returns 0 or -errno. */
int sc_http_respond(struct sc_conn *c, int status, const char *headers, const void *body,
		    size_t len);
/* As above, taking ownership of body (freed with base_free). */
int sc_http_respond_owned(struct sc_conn *c, int status, const char *headers, void *body,
			  size_t len);
/* Registers the callback run if the client disconnects before a response. */
void sc_http_on_abort(struct sc_conn *c, sc_abort_cb cb, void *arg);

#endif
