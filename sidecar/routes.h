/* The route table (struct sc_route, server.h): every endpoint of podprof,
 * sorted by path (the index lists profiles in this order, as Go sorts
 * them by name). main hands it to the server, which dispatches by it; the
 * index and --help read it. Any thread; never fails. */
#ifndef SC_ROUTES_H
#define SC_ROUTES_H

#include <stddef.h>
#include <stdio.h>

#include "sidecar/server/server.h"

const struct sc_route *sc_routes(size_t *n);
/* Writes the endpoint list of --help. */
void sc_routes_help(FILE *out);

#endif
