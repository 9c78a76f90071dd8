/* /healthz and /readyz: 200 "ok" when podprof can profile its target (its
 * sampler thread runs, the target exists and may be traced), else 503 and
 * one line saying what is wrong. Loop thread only. */
#ifndef SC_HEALTH_H
#define SC_HEALTH_H

struct sc_conn;
struct sc_params;
struct sc_request;
struct sc_server;

/* The route handler (sc_route_cb) of both. */
void sc_health_handle(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);

#endif
