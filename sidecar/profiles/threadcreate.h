/* /debug/pprof/threadcreate: creation stacks seen while attached, and the
 * live threads whose creation was not seen under their start routines.
 * Loop thread, as every sc_route_cb. */
#ifndef SC_PROFILES_THREADCREATE_H
#define SC_PROFILES_THREADCREATE_H

#include <sys/types.h>

struct sc_conn;
struct sc_params;
struct sc_request;
struct sc_server;

void sc_profile_threadcreate(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);

#endif
