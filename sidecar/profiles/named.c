/* Go's rules for the named profiles' seconds= and debug= (net/http/pprof's
 * serveDeltaProfile), shared by every named profile. Loop thread. */
#include "sidecar/profiles/named.h"

#include <stdio.h>

#include "sidecar/server/cfg.h"
#include "sidecar/server/http.h"
#include "sidecar/server/query.h"
#include "sidecar/server/reply.h"
#include "sidecar/server/server.h"

int sc_named_seconds(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req)
{
	const struct sc_cfg *cfg = sc_server_cfg(srv);
	int seconds = sc_query_delta_seconds(req->query);
	char msg[128];

	if (seconds < 0) {
		sc_go_error(c, 400, "invalid value for \"seconds\" - must be a positive integer");
		return -1;
	}
	if (seconds && sc_query_debug(req->query) != 0) {
		sc_go_error(c, 400, "seconds and debug params are incompatible");
		return -1;
	}
	if (seconds > cfg->max_seconds) {
		snprintf(msg, sizeof(msg), "profile duration exceeds the limit of %d seconds",
			 cfg->max_seconds);
		sc_go_error(c, 400, msg);
		return -1;
	}
	return seconds;
}
