/* /debug/pprof/: Go's index page, its rows and descriptions read from the
 * server's route table, followed by a panel on the target process and one
 * listing the pod's processes (sidecar/server/pod.h). Loop thread only. */
#ifndef SC_INDEX_H
#define SC_INDEX_H

#include <stdint.h>
#include <sys/types.h>

struct sc_conn;
struct sc_params;
struct sc_request;
struct sc_server;

/* The route handler (sc_route_cb): answers 200 text/html, a pid= error, or
 * 500 when memory runs out. */
void sc_index_handle(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);
/* /debug/pprof: Go's ServeMux redirects /tree to /tree/ when only the
 * latter is registered, which the index's relative links rely on (301). */
void sc_index_redirect(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);

#endif
