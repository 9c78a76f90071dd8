/* The pprof server: routes Go's net/http/pprof paths to handlers, hands
 * profile and symbol work to the sampler and answers when it is done.
 * Loop thread only, except where noted. */
#ifndef SC_SERVER_H
#define SC_SERVER_H

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

struct sc_cfg;
struct sc_server;

/* Creates the sampler thread and the HTTP listener for target `pid`.
 * Returns 0 or a negative errno (a listen error names the address in logs). */
int sc_server_new(struct sc_server **out, uv_loop_t *loop, const struct sc_cfg *cfg, pid_t pid);
/* Closes the listener and connections, cancels sessions, detaches. */
void sc_server_free(struct sc_server *s);
int sc_server_port(const struct sc_server *s);

/* Go's rules for /debug/pprof/profile?seconds=: missing, unparsable or <= 0
 * gives 30. Returns the seconds. */
int sc_parse_profile_seconds(const char *query);
/* Value of `key` in a raw query string, percent-decoded into out.
 * Returns 1 if present, 0 if absent, -E2BIG if too long, -EINVAL if it
 * decodes to a NUL. */
int sc_query_get(const char *query, const char *key, char *out, size_t len);
/* Parses pprof's symbolz request ("0x401000+0x420000", ParseUint base 0).
 * Returns the count (at most max), or -EINVAL on a malformed word. */
int sc_parse_symbol_addrs(const char *s, size_t len, uint64_t *out, size_t max);

#endif
