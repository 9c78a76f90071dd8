/* The pprof server: its life (the sampler thread, the jobs, the HTTP
 * listener, the switch file, the continuous watch) and the dispatch of each
 * request by a route table it is given (sidecar/routes.h: the one list of
 * endpoints). Handlers answer through sidecar/server/reply.h, or later through a
 * job (sidecar/server/job.h). Loop thread only, except where noted.
 *
 * A new endpoint is a file in sidecar/profiles/ with its header (its
 * handler, an sc_route_cb: it reads its parameters, parsed and checked by
 * the server from what its route says it takes (sidecar/server/params.h),
 * and either answers at once or submits a job whose result it encodes on
 * a work thread), and a row in the route table (sidecar/routes.c). */
#ifndef SC_SERVER_H
#define SC_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "sidecar/server/procs.h"

struct pt_sampler;
struct sc_cfg;
struct sc_conn;
struct sc_jobs;
struct sc_params;
struct sc_pod;
struct sc_request;
struct sc_server;

#define SC_PPROF_PREFIX "/debug/pprof/"

/* ---- the route table ------------------------------------------------------ */

/* Answers req on c now (sc_http_respond*, sc_go_error) or later (a job). */
typedef void (*sc_route_cb)(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			    struct sc_params *p);
/* The index's Count column for the target pid; cheap, loop thread. */
typedef int64_t (*sc_count_cb)(struct sc_server *srv, pid_t pid);

#define SC_ROUTE_GET    0x01u   /* GET and HEAD (others get Go's 405) */
#define SC_ROUTE_POST   0x02u
#define SC_ROUTE_ANY    0x04u   /* every method */
#define SC_ROUTE_PUBLIC 0x08u   /* answered without the bearer token */
#define SC_ROUTE_LISTED 0x10u   /* a profile: a row of the index */
#define SC_ROUTE_FORMATS 0x20u  /* a profile with stacks: takes format= (query.h) */

struct sc_route {
	const char *path;       /* exact, query excluded */
	unsigned flags;         /* SC_ROUTE_* */
	const char *desc;       /* index and --help text; NULL: not in --help */
	sc_route_cb handler;
	unsigned params;        /* the parameters it takes (SC_P_*, params.h) */
	sc_count_cb count;      /* NULL: the index shows 0 */
	const char *also;       /* a second form the index links ("format=json"), or NULL */
};

/* ---- life cycle ---------------------------------------------------------- */

/* Creates the sampler thread and the HTTP listener for target `pid`,
 * dispatching by routes[0..nroutes) (which must outlive the server).
 * Returns 0 or a negative errno (a listen error names the address in
 * logs). */
int sc_server_new(struct sc_server **out, uv_loop_t *loop, const struct sc_cfg *cfg, pid_t pid,
		  const struct sc_route *routes, size_t nroutes);
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
struct sc_jobs *sc_server_jobs(struct sc_server *s);
/* The pod's processes (sidecar/server/pod.h). */
struct sc_pod *sc_server_pod(struct sc_server *s);
/* The route table it dispatches by. */
const struct sc_route *sc_server_routes(const struct sc_server *s, size_t *n);
/* 1 while the continuous watch (--continuous) of the default target runs. */
int sc_server_watching(struct sc_server *s);

#endif
