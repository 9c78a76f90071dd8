/* /debug/pprof/trace: a per-thread timeline, Go 1.19 trace or
 * ?format=json. Loop thread, as every sc_route_cb. */
#ifndef SC_PROFILES_TRACE_H
#define SC_PROFILES_TRACE_H

#include <sys/types.h>

struct sc_conn;
struct sc_params;
struct sc_request;
struct sc_server;

void sc_profile_trace(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);

#endif
