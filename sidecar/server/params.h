/* A request's parameters, parsed and checked once, before its handler runs:
 * each route names the parameters it takes (SC_P_*, in the route table),
 * the server fills a struct sc_params from the query by Go's rules
 * (query.h) and our extensions, and answers any that is wrong itself, in
 * Go's shape (400, or 404/500 for a target that cannot be had). Handlers
 * read the struct and never the query. Loop thread. */
#ifndef SC_PARAMS_H
#define SC_PARAMS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sidecar/server/procs.h"
#include "sidecar/server/query.h"

struct sc_cfg;
struct sc_request;

/* What a route takes (struct sc_route's params). At most one SC_P_*_SECONDS. */
#define SC_P_CPU_SECONDS   0x001u  /* profile: Go's ParseInt rule, default 30 */
#define SC_P_DELTA_SECONDS 0x002u  /* named profiles: 0 absent, else a positive integer;
				    * not with debug (Go's serveDeltaProfile) */
#define SC_P_TRACE_SECONDS 0x004u  /* trace: Go's ParseFloat rule, default 1 */
#define SC_P_HZ            0x008u  /* hz=1..1000, default --hz */
#define SC_P_VIEW          0x010u  /* heap, allocs: view=stacks|mappings */
#define SC_P_TRACE_FORMAT  0x020u  /* trace: format= empty or json, gz=1 */
#define SC_P_PID           0x040u  /* pid=N, one process (a number only) */
#define SC_P_TARGET        0x080u  /* pid=N, one process; pid=all and tree=1 refused */
#define SC_P_TARGETS       0x100u  /* pid=N, tree=0|1, pid=all: several processes */
#define SC_P_THREADS_VIEW  0x400u  /* goroutine: view=goroutines|threads */
#define SC_P_TARGET_POST   0x200u  /* SC_P_TARGET on POST only (symbol: GET's query is
				    * the addresses) */

struct sc_params {
	int seconds;             /* as asked: SC_P_CPU_SECONDS 30 when absent, _DELTA 0 */
	double trace_seconds;    /* SC_P_TRACE_SECONDS */
	int hz;
	int64_t debug;           /* Go's Atoi of debug=: 0 when absent or unparsable;
				  * 0 when a format= is asked for */
	enum sc_format format;   /* format= (routes with SC_ROUTE_FORMATS) */
	char sample_index[64];   /* sample_index= as given, "?" when too long */
	int mappings;            /* view=mappings */
	int threads;             /* view=threads: a Go program's threads, not its goroutines */
	int json, gz;            /* the trace's format=json, gz=1 */
	/* The processes (SC_P_PID, _TARGET, _TARGETS): target.procs.n > 0
	 * for several (a handler hands them to its job, sc_job_target, which
	 * takes them; else the server frees them after the handler). */
	struct sc_target_set target;
};

/* Where a request's parameters are judged: the configuration (--hz,
 * --max-seconds, --tree, --max-processes) and the default target. */
struct sc_params_ctx {
	const struct sc_cfg *cfg;
	pid_t pid;
};

/* Fills *out from req's query (and method) by `rules` (SC_P_*; `formats`:
 * the route takes format=). Returns 0, or the HTTP status to answer (400,
 * 404, 500) with its one-line message in msg[0..len). Nothing to free on
 * error; on success out->target.procs is the caller's (sc_procs_free). */
int sc_params_parse(const struct sc_params_ctx *ctx, unsigned int rules, int formats,
		    const struct sc_request *req, struct sc_params *out, char *msg, size_t len);

#endif
