/* /debug/pprof/heap, /debug/pprof/allocs: memory by mapping (smaps).
 * Loop thread, as every sc_route_cb. */
#ifndef SC_PROFILES_MEMORY_H
#define SC_PROFILES_MEMORY_H

#include <stdint.h>
#include <sys/types.h>

struct sc_conn;
struct sc_params;
struct sc_request;
struct sc_server;

void sc_profile_heap(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);
void sc_profile_allocs(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);
/* The index's count: the target's mappings; 0 if they cannot be read. */
int64_t sc_count_mappings(struct sc_server *srv, pid_t pid);

#endif
