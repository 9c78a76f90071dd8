/* The endpoints' handlers, one file each in sidecar/profiles/, listed in
 * the route table (server.c). Each parses its own parameters (answering
 * Go-shaped 4xx itself), and either answers at once or submits a job to
 * the sampler whose result it encodes on a work thread (server.h).
 * Loop thread, as every sc_route_cb. */
#ifndef SC_PROFILES_H
#define SC_PROFILES_H

#include "sidecar/server.h"

/* /debug/pprof/cmdline: /proc/<pid>/cmdline without its trailing NUL. */
void sc_profile_cmdline(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);
/* /debug/pprof/goroutine: every thread's stack now (debug=0 pprof, 1 the
 * count profile, 2 the panic-style dump). */
void sc_profile_goroutine(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);
/* /debug/pprof/profile: on-CPU stacks over ?seconds= at ?hz=. */
void sc_profile_cpu(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);
/* /debug/pprof/symbol: pprof's symbolz, GET raw query or POST body. */
void sc_profile_symbol(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);

/* /debug/pprof/block, /debug/pprof/mutex: time threads spent blocked (all
 * waits; futex only), over ?seconds= or --wait-seconds. */
void sc_profile_block(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);
void sc_profile_mutex(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);
/* /debug/pprof/heap, /debug/pprof/allocs: memory by mapping (smaps). */
void sc_profile_heap(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);
void sc_profile_allocs(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);
/* /debug/pprof/threadcreate: creation stacks seen while attached, and the
 * live threads whose creation was not seen under their start routines. */
void sc_profile_threadcreate(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);
/* /debug/pprof/trace: a per-thread timeline, Go 1.19 trace or ?format=json. */
void sc_profile_trace(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);

/* The index's counts: the target's threads (goroutine) and mappings (heap,
 * allocs); 0 if it cannot be read. */
int64_t sc_count_threads(struct sc_server *srv, pid_t pid);
int64_t sc_count_mappings(struct sc_server *srv, pid_t pid);
int64_t sc_count_blocked(struct sc_server *srv, pid_t pid);
int64_t sc_count_futex(struct sc_server *srv, pid_t pid);

/* A named profile's ?seconds= by Go's delta rules: 0 when absent, else the
 * window; -1 after answering a bad value, debug with seconds, or a window
 * past --max-seconds (400s in Go's words). */
int sc_named_seconds(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);

#endif
