/* /debug/pprof/: Go's index page, its rows and descriptions read from the
 * route table, followed by a panel on the target process and one listing
 * the pod's processes (cached: a flood of index requests must not rescan
 * /proc for each). Loop thread only. */
#ifndef SC_INDEX_H
#define SC_INDEX_H

#include <stdint.h>
#include <sys/types.h>

struct sc_conn;
struct sc_request;
struct sc_server;

/* The pod panel last built; zeroed at start, owned by the server. */
struct sc_index_cache {
	char *html;
	size_t len;
	pid_t pid;              /* the process it marks as shown */
	uint64_t at;            /* uv_hrtime() when built */
};

/* The route handler (sc_route_cb): answers 200 text/html, a pid= error, or
 * 500 when memory runs out. */
void sc_index_handle(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);
/* Frees the cached panel. NULL-safe. */
void sc_index_cache_free(struct sc_index_cache *cache);

#endif
