/* /debug/pprof/profile: on-CPU stacks over ?seconds= at ?hz=. Loop
 * thread, as every sc_route_cb. */
#ifndef SC_PROFILES_CPU_H
#define SC_PROFILES_CPU_H

#include <sys/types.h>

struct sc_conn;
struct sc_params;
struct sc_request;
struct sc_server;

void sc_profile_cpu(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);

#endif
