/* libFuzzer harness: everything we parse out of a request's URL and body:
 * Go's seconds quirks, query decoding, pid/hz/debug values, pprof's symbolz
 * address lists, and HOST:PORT. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/server/query.h"
#include "sidecar/server/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), v[64], host[256];
	uint64_t addrs[64];
	int64_t n;
	int port;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	sc_parse_profile_seconds(s);
	sc_query_get(s, "hz", v, sizeof(v));
	sc_query_hz(s, 100, &port);
	sc_query_debug(s);
	sc_query_get(s, "pid", v, 4);
	sc_parse_go_int(s, &n);
	sc_parse_symbol_addrs(s, size, addrs, 64);
	sc_parse_hostport(s, host, sizeof(host), &port);
	free(s);
	return 0;
}
