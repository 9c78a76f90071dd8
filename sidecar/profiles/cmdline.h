/* /debug/pprof/cmdline: /proc/<pid>/cmdline without its trailing NUL.
 * Loop thread, as every sc_route_cb. */
#ifndef SC_PROFILES_CMDLINE_H
#define SC_PROFILES_CMDLINE_H

#include <sys/types.h>

struct sc_conn;
struct sc_params;
struct sc_request;
struct sc_server;

void sc_profile_cmdline(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);

#endif
