/* /metrics: podprof's own counters (the sampler's) and the default
 * target's threads, RSS and CPU, in Prometheus text format 0.0.4, from a
 * table of metric definitions. Loop thread only. */
#ifndef SC_METRICS_H
#define SC_METRICS_H

struct sc_conn;
struct sc_params;
struct sc_request;
struct sc_server;

/* The route handler (sc_route_cb): answers 200, or 500 when out of memory. */
void sc_metrics_handle(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p);

#endif
