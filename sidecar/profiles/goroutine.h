/* /debug/pprof/goroutine: every thread's stack now (debug=0 pprof, 1 the
 * count profile, 2 the panic-style dump). Loop thread, as every
 * sc_route_cb. */
#ifndef SC_PROFILES_GOROUTINE_H
#define SC_PROFILES_GOROUTINE_H

#include <stdint.h>
#include <sys/types.h>

struct sc_conn;
struct sc_params;
struct sc_request;
struct sc_server;

void sc_profile_goroutine(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);
/* The index's count: the target's threads; 0 if it cannot be read. */
int64_t sc_count_threads(struct sc_server *srv, pid_t pid);

#endif
