/* /debug/pprof/block, /debug/pprof/mutex: time threads spent blocked (all
 * waits; futex only), over ?seconds= or --wait-seconds. Loop thread, as
 * every sc_route_cb. */
#ifndef SC_PROFILES_WAITING_H
#define SC_PROFILES_WAITING_H

#include <stdint.h>
#include <sys/types.h>

struct sc_conn;
struct sc_params;
struct sc_request;
struct sc_server;

void sc_profile_block(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);
void sc_profile_mutex(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);
/* The index's counts: threads blocked now, and those blocked in futex. */
int64_t sc_count_blocked(struct sc_server *srv, pid_t pid);
int64_t sc_count_futex(struct sc_server *srv, pid_t pid);

#endif
