/* The pprof server: connections, auth, the route table (the one list of
 * endpoints: dispatch, the index, 404s and --help read it), and the life
 * of a request that needs the sampler: a job handed to the sampler thread,
 * then encoded on a libuv work thread, then sent from the loop thread.
 * Loop thread only, except where noted.
 *
 * A new endpoint is a file in sidecar/profiles/ (its handler: parameters,
 * sc_job_new/sc_job_submit, ops that encode the result), its handler's
 * declaration in sidecar/profiles/profiles.h, and a row in the route table
 * in server.c. */
#ifndef SC_SERVER_H
#define SC_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <uv.h>

#include "ptrace/sampler.h"

struct enc_pprof;
struct sc_cfg;
struct sc_conn;
struct sc_index_cache;
struct sc_request;
struct sc_server;

#define SC_PPROF_PREFIX "/debug/pprof/"
/* The largest body a profile may be encoded to (before and after gzip). */
#define SC_MAX_PROFILE_BYTES (256u << 20)
#define SC_TEXT_PLAIN "Content-Type: text/plain; charset=utf-8\r\n"

/* ---- life cycle ---------------------------------------------------------- */

/* Creates the sampler thread and the HTTP listener for target `pid`.
 * Returns 0 or a negative errno (a listen error names the address in logs). */
int sc_server_new(struct sc_server **out, uv_loop_t *loop, const struct sc_cfg *cfg, pid_t pid);
/* Closes the listener and connections, cancels sessions and queued
 * encodings, detaches. The memory goes once the last running encoding has
 * finished, so the loop must run afterwards (uv_run) before uv_loop_close.
 * NULL-safe. */
void sc_server_free(struct sc_server *s);
/* The bound port. */
int sc_server_port(const struct sc_server *s);

/* What the handlers read. Never fail. */
const struct sc_cfg *sc_server_cfg(const struct sc_server *s);
pid_t sc_server_target(const struct sc_server *s);          /* the default target */
struct pt_sampler *sc_server_sampler(struct sc_server *s);
/* 1 while the continuous watch (--continuous) of the default target runs. */
int sc_server_watching(struct sc_server *s);
struct sc_index_cache *sc_server_index_cache(struct sc_server *s);

/* ---- the route table ------------------------------------------------------ */

/* Answers req on c now (sc_http_respond*, sc_go_error) or later (a job). */
typedef void (*sc_route_cb)(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);
/* The index's Count column for the target pid; cheap, loop thread. */
typedef int64_t (*sc_count_cb)(struct sc_server *srv, pid_t pid);

#define SC_ROUTE_GET    0x01u   /* GET and HEAD (others get Go's 405) */
#define SC_ROUTE_POST   0x02u
#define SC_ROUTE_ANY    0x04u   /* every method */
#define SC_ROUTE_PUBLIC 0x08u   /* answered without the bearer token */
#define SC_ROUTE_LISTED 0x10u   /* a profile: a row of the index */

struct sc_route {
	const char *path;       /* exact, query excluded */
	unsigned flags;         /* SC_ROUTE_* */
	const char *desc;       /* index and --help text; NULL: not in --help */
	sc_route_cb handler;
	sc_count_cb count;      /* NULL: the index shows 0 */
	const char *also;       /* a second form the index links ("format=json"), or NULL */
};

/* The route table, sorted by path (the index lists profiles in this
 * order, as Go sorts them by name). Any thread; never fails. */
const struct sc_route *sc_server_routes(size_t *n);
/* Writes the endpoint list of --help. Any thread, start-up. */
void sc_server_help(FILE *out);

/* ---- answers --------------------------------------------------------------- */

/* Go's serveError: status, text/plain, X-Go-Pprof: 1, msg and a newline
 * (a 503 also says Retry-After). */
void sc_go_error(struct sc_conn *c, int status, const char *msg);
/* The process a request is about: ?pid=N or the default target. A bad
 * pid is answered here (400/404 in Go's shape) and 0 returned. */
pid_t sc_request_pid(struct sc_server *srv, struct sc_conn *c, const char *query);

/* A response built off the loop thread, sent by the loop. */
struct sc_reply {
	int status;
	char headers[256];      /* "Name: value\r\n"... */
	void *body;             /* owned by the reply until sent; freed with base_free */
	size_t len;
};

/* Any thread. Each fills r, freeing what r held; never fails (on OOM the
 * body is left empty). sc_reply_error: Go's serveError, as sc_go_error.
 * sc_reply_body: takes body. sc_reply_pprof: if err is 0, encodes e
 * (gzip, at most SC_MAX_PROFILE_BYTES) as a download named filename; on
 * err or an encoding failure logs and answers 500. */
void sc_reply_error(struct sc_reply *r, int status, const char *msg);
void sc_reply_body(struct sc_reply *r, int status, const char *headers, void *body, size_t len);
void sc_reply_pprof(struct sc_reply *r, struct enc_pprof *e, int err, const char *filename);

/* ---- jobs: requests that need the sampler ---------------------------------- */

struct sc_job;

enum sc_job_next {
	SC_JOB_ANSWERED,        /* done() answered (an error): nothing to encode */
	SC_JOB_ENCODE,          /* run encode() on a work thread, then send */
};

struct sc_job_ops {
	/* Loop thread, once the sampler has answered and the client still
	 * waits: answers a failure now (sc_job_check, sc_job_error), or asks
	 * for encode(). */
	enum sc_job_next (*done)(struct sc_job *j);
	/* Work thread: turns j->req's result into r. Must not touch the
	 * connection, the server or anything of the loop's. */
	void (*encode)(struct sc_job *j, struct sc_reply *r);
	/* Any thread, at most once: frees what the profile's part of the job
	 * holds beyond req.profile (which the job frees). May be NULL. */
	void (*release)(struct sc_job *j);
};

/* Embedded first in a profile's own job structure (sc_job_new's size). */
struct sc_job {
	struct pt_request req;  /* filled by the profile before sc_job_submit */
	/* private */
	const struct sc_job_ops *ops;
	struct sc_server *srv;
	struct sc_conn *conn;   /* NULL once the client went away */
	int state;
	int released;           /* job_release ran */
	uv_work_t work;
	struct sc_reply reply;
	struct sc_job *next;
};

/* A zeroed job of `size` bytes (at least sizeof(struct sc_job)) for c.
 * Returns NULL after answering 500 (out of memory) to c. */
struct sc_job *sc_job_new(struct sc_server *srv, struct sc_conn *c, const struct sc_job_ops *ops,
			  size_t size);
/* Hands j to the sampler; from here the server owns j. If the client goes
 * away, the sampler request is cancelled, a queued encoding too, and j
 * freed without an answer. */
void sc_job_submit(struct sc_job *j);
/* For done(): if the sampler failed the request, answers in Go's shape
 * (503 when too busy, else 500; `prefix` leads messages of errors without
 * words of their own) and returns SC_JOB_ANSWERED; else SC_JOB_ENCODE. */
enum sc_job_next sc_job_check(struct sc_job *j, const char *prefix);
/* For done(): answers j's client with sc_go_error; returns SC_JOB_ANSWERED. */
enum sc_job_next sc_job_error(struct sc_job *j, int status, const char *msg);
/* Words for a sampler error the client can act on, or NULL. Any thread. */
const char *sc_job_strerror(int err);

#endif
