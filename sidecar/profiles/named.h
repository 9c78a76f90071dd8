/* Go's delta rules for the ?seconds= of the named profiles (heap, allocs,
 * block, mutex, goroutine, threadcreate). Loop thread. */
#ifndef SC_PROFILES_NAMED_H
#define SC_PROFILES_NAMED_H

#include <sys/types.h>

struct sc_conn;
struct sc_request;
struct sc_server;

/* A named profile's ?seconds= by Go's delta rules: 0 when absent, else the
 * window; -1 after answering a bad value, debug with seconds, or a window
 * past --max-seconds (400s in Go's words). */
int sc_named_seconds(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req);

#endif
