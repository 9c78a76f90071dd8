/* /debug/pprof/symbol: pprof's symbolz, GET raw query or POST body. Loop
 * thread, as every sc_route_cb. */
#ifndef SC_PROFILES_SYMBOL_H
#define SC_PROFILES_SYMBOL_H

#include <sys/types.h>

struct sc_conn;
struct sc_params;
struct sc_request;
struct sc_server;

void sc_profile_symbol(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);

#endif
