/* Go's parameter quirks, query decoding, symbolz parsing, config, buffers. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "sidecar/server/cfg.h"
#include "sidecar/server/http.h"
#include "sidecar/server/params.h"
#include "sidecar/server/query.h"
#include "sidecar/routes.h"
#include "sidecar/server/server.h"
#include "sidecar/server/target.h"
#include "sidecar/server/util.h"
#include "tests/harness.h"

TEST(profile_seconds_like_go)
{
	static const struct {
		const char *q;
		int want;
	} cases[] = {
		{ "", 30 }, { "seconds=5", 5 }, { "seconds=0", 30 }, { "seconds=-1", 30 },
		{ "seconds=abc", 30 }, { "seconds=1.5", 30 }, { "seconds=+7", 30 }, { "seconds=%2B7", 7 },
		{ "seconds=", 30 }, { "seconds", 30 }, { "seconds=1e99", 30 },
		{ "seconds=99999999999999999999", 30 }, { "hz=5&seconds=12", 12 },
		{ "xseconds=4", 30 }, { "seconds=%35", 5 }, { "seconds=5&seconds=9", 5 },
		{ "seconds=9999999999", 2147483647 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int got = sc_parse_profile_seconds(cases[i].q);

		if (got != cases[i].want)
			FAIL_AT("seconds for \"%s\": got %d, want %d", cases[i].q, got, cases[i].want);
	}
}

TEST(query_get)
{
	char v[8];

	ASSERT_EQ(sc_query_get("a=1&b=x%20y+z", "b", v, sizeof(v)), 1);
	ASSERT_STR_EQ(v, "x y z");
	ASSERT_EQ(sc_query_get("a=1", "b", v, sizeof(v)), 0);
	ASSERT_EQ(sc_query_get("b", "b", v, sizeof(v)), 1);
	ASSERT_STR_EQ(v, "");
	ASSERT_EQ(sc_query_get("b=%zz", "b", v, sizeof(v)), 1);
	ASSERT_STR_EQ(v, "%zz");
	ASSERT_EQ(sc_query_get("b=%4", "b", v, sizeof(v)), 1);
	ASSERT_EQ(sc_query_get("b=0123456789", "b", v, sizeof(v)), -E2BIG);
	ASSERT_EQ(sc_query_get("pid=1%00", "pid", v, sizeof(v)), -EINVAL);
}

TEST(symbol_addrs)
{
	uint64_t a[4];

	ASSERT_EQ(sc_parse_symbol_addrs("0x401000+0x420000", 17, a, 4), 2);
	ASSERT_U64_EQ(a[0], 0x401000);
	ASSERT_U64_EQ(a[1], 0x420000);
	ASSERT_EQ(sc_parse_symbol_addrs("123+010+0b11+0o17", 17, a, 4), 4);
	ASSERT_U64_EQ(a[0], 123);
	ASSERT_U64_EQ(a[1], 8);
	ASSERT_U64_EQ(a[2], 3);
	ASSERT_U64_EQ(a[3], 15);
	ASSERT_EQ(sc_parse_symbol_addrs("", 0, a, 4), 0);
	ASSERT_EQ(sc_parse_symbol_addrs("0x+1", 4, a, 4), -EINVAL);
	ASSERT_EQ(sc_parse_symbol_addrs("zz", 2, a, 4), -EINVAL);
	ASSERT_EQ(sc_parse_symbol_addrs("0x1g", 4, a, 4), -EINVAL);
	ASSERT_EQ(sc_parse_symbol_addrs("0x10000000000000000", 19, a, 4), -EINVAL);
	ASSERT_EQ(sc_parse_symbol_addrs("1+2+3+4+5", 9, a, 4), -E2BIG);
}

TEST(go_int_and_buf)
{
	int64_t v;
	struct base_buf b;

	ASSERT_OK(sc_parse_go_int("-42", &v));
	ASSERT_EQ(v, -42);
	ASSERT_EQ(sc_parse_go_int("42x", &v), -EINVAL);
	ASSERT_EQ(sc_parse_go_int(" 4", &v), -EINVAL);
	ASSERT_EQ(sc_parse_go_int("9223372036854775808", &v), -ERANGE);
	ASSERT_OK(sc_parse_go_int("-9223372036854775808", &v));
	base_buf_init(&b, 100);
	ASSERT_OK(sc_html_escape(&b, "<a href='x'>&\"</a>"));
	ASSERT_STR_EQ(b.data, "&lt;a href=&#39;x&#39;&gt;&amp;&#34;&lt;/a&gt;");
	base_buf_free(&b);
	/* Past the cap: the buffer's error, and what came before is kept. */
	base_buf_init(&b, 8);
	ASSERT_OK(sc_html_escape(&b, "a<b"));
	ASSERT_EQ(sc_html_escape(&b, "&"), -E2BIG);
	ASSERT_STR_EQ(b.data, "a&lt;b");
	base_buf_free(&b);
}

TEST(config_flags_env_and_errors)
{
	struct sc_cfg cfg;
	FILE *out = fopen("/dev/null", "w"), *err = fopen("/dev/null", "w");
	char *ok[] = { "podprof", "--pid", "42", "--listen=127.0.0.1:9", "--hz", "250", NULL };
	char *bad1[] = { "podprof", "--hz", "0", NULL };
	char *bad2[] = { "podprof", "--nope", NULL };
	char *bad3[] = { "podprof", "--pid", "1", "--comm", "x", NULL };
	char *bad4[] = { "podprof", "--pid", NULL };
	char *help[] = { "podprof", "--help", NULL };

	ASSERT_OK(sc_cfg_load(&cfg, 6, ok, sc_routes_help, out, err));
	ASSERT_EQ(cfg.pid, 42);
	ASSERT_STR_EQ(cfg.listen, "127.0.0.1:9");
	ASSERT_EQ(cfg.default_hz, 250);
	ASSERT_STR_EQ(cfg.log_format, "text");
	sc_cfg_free(&cfg);
	setenv("PODPROF_COMM", "myapp", 1);
	setenv("PODPROF_HZ", "77", 1);
	ASSERT_OK(sc_cfg_load(&cfg, 1, ok, sc_routes_help, out, err));
	ASSERT_STR_EQ(cfg.comm, "myapp");
	ASSERT_EQ(cfg.default_hz, 77);
	sc_cfg_free(&cfg);
	unsetenv("PODPROF_COMM");
	unsetenv("PODPROF_HZ");
	ASSERT_EQ(sc_cfg_load(&cfg, 3, bad1, sc_routes_help, out, err), -EINVAL);
	sc_cfg_free(&cfg);
	ASSERT_EQ(sc_cfg_load(&cfg, 2, bad2, sc_routes_help, out, err), -EINVAL);
	sc_cfg_free(&cfg);
	ASSERT_EQ(sc_cfg_load(&cfg, 5, bad3, sc_routes_help, out, err), -EINVAL);
	sc_cfg_free(&cfg);
	ASSERT_EQ(sc_cfg_load(&cfg, 2, bad4, sc_routes_help, out, err), -EINVAL);
	sc_cfg_free(&cfg);
	ASSERT_EQ(sc_cfg_load(&cfg, 2, help, sc_routes_help, out, err), 1);
	sc_cfg_free(&cfg);
	fclose(out);
	fclose(err);
}

TEST(listen_addresses)
{
	char host[64];
	int port;

	ASSERT_OK(sc_parse_hostport("127.0.0.1:8008", host, sizeof(host), &port));
	ASSERT_STR_EQ(host, "127.0.0.1");
	ASSERT_EQ(port, 8008);
	ASSERT_OK(sc_parse_hostport(":8008", host, sizeof(host), &port));
	ASSERT_STR_EQ(host, "0.0.0.0");
	ASSERT_OK(sc_parse_hostport("localhost:0", host, sizeof(host), &port));
	ASSERT_STR_EQ(host, "127.0.0.1");
	ASSERT_OK(sc_parse_hostport("[::1]:9", host, sizeof(host), &port));
	ASSERT_STR_EQ(host, "::1");
	ASSERT_EQ(sc_parse_hostport("::1:9", host, sizeof(host), &port), -EINVAL);
	ASSERT_EQ(sc_parse_hostport("nonsense", host, sizeof(host), &port), -EINVAL);
	ASSERT_EQ(sc_parse_hostport("h:99999", host, sizeof(host), &port), -EINVAL);
	ASSERT_EQ(sc_parse_hostport("h:", host, sizeof(host), &port), -EINVAL);
}

TEST(pause_process_names)
{
	ASSERT(sc_target_is_pause("pause"));
	ASSERT(sc_target_is_pause("catatonit"));
	ASSERT(sc_target_is_pause("tini"));
	ASSERT(!sc_target_is_pause("python3"));
}

TEST(route_table_is_the_list_of_endpoints)
{
	static const char *const profiles[] = { "allocs", "block", "cmdline", "goroutine", "heap",
						"mutex", "profile", "symbol", "threadcreate", "trace" };
	size_t n, listed = 0;
	const struct sc_route *r = sc_routes(&n);

	/* Sorted, so that the index lists profiles by name as Go does. */
	for (size_t i = 1; i < n; i++)
		if (strcmp(r[i - 1].path, r[i].path) >= 0)
			FAIL_AT("routes not sorted: %s before %s", r[i - 1].path, r[i].path);
	for (size_t i = 0; i < n; i++) {
		ASSERT(r[i].handler);
		if (!(r[i].flags & SC_ROUTE_LISTED))
			continue;
		listed++;
		ASSERT(r[i].desc);
		ASSERT(!strncmp(r[i].path, SC_PPROF_PREFIX, strlen(SC_PPROF_PREFIX)));
		ASSERT(r[i].flags & SC_ROUTE_GET);
		ASSERT(listed <= SC_ARRAY_LEN(profiles));
		ASSERT_STR_EQ(r[i].path + strlen(SC_PPROF_PREFIX), profiles[listed - 1]);
	}
	ASSERT_EQ(listed, SC_ARRAY_LEN(profiles));
}

TEST(delta_and_trace_seconds_like_go)
{
	/* Named profiles: seconds= is a positive integer (ParseInt) or a 400. */
	ASSERT_EQ(sc_query_delta_seconds("debug=1"), 0);
	ASSERT_EQ(sc_query_delta_seconds("seconds=5"), 5);
	ASSERT_EQ(sc_query_delta_seconds("seconds=0"), -EINVAL);
	ASSERT_EQ(sc_query_delta_seconds("seconds=-3"), -EINVAL);
	ASSERT_EQ(sc_query_delta_seconds("seconds=1.5"), -EINVAL);
	ASSERT_EQ(sc_query_delta_seconds("seconds="), -EINVAL);
	ASSERT_EQ(sc_query_delta_seconds("seconds=99999999999"), INT32_MAX);
	/* The trace: ParseFloat, and 1 for anything missing, bad or <= 0. */
	ASSERT(sc_query_trace_seconds("") == 1);
	ASSERT(sc_query_trace_seconds("seconds=2.5") == 2.5);
	ASSERT(sc_query_trace_seconds("seconds=abc") == 1);
	ASSERT(sc_query_trace_seconds("seconds=-2") == 1);
	ASSERT(sc_query_trace_seconds("seconds=0") == 1);
	ASSERT(sc_query_trace_seconds("seconds=nan") == 1);
	ASSERT(sc_query_trace_seconds("seconds=%202") == 1);   /* a leading space */
	ASSERT(sc_query_trace_seconds("seconds=1e9") == 1e9); /* then --max-seconds says 400 */
}

TEST(debug_and_hz_like_go)
{
	int hz;

	/* debug: strconv.Atoi, an error is 0. */
	ASSERT_EQ(sc_query_debug(""), 0);
	ASSERT_EQ(sc_query_debug("debug=2"), 2);
	ASSERT_EQ(sc_query_debug("debug=%2B1"), 1);
	ASSERT_EQ(sc_query_debug("debug=+1"), 0);   /* '+' is a space in a query */
	ASSERT_EQ(sc_query_debug("debug=-1"), -1);
	ASSERT_EQ(sc_query_debug("debug=x"), 0);
	ASSERT_EQ(sc_query_debug("debug=1.0"), 0);
	ASSERT_EQ(sc_query_debug("debug=99999999999999999999"), 0);
	/* hz: 1..1000 or the default; anything else is refused. */
	ASSERT_OK(sc_query_hz("seconds=1", 100, &hz));
	ASSERT_EQ(hz, 100);
	ASSERT_OK(sc_query_hz("hz=1000", 100, &hz));
	ASSERT_EQ(hz, 1000);
	ASSERT_EQ(sc_query_hz("hz=0", 100, &hz), -EINVAL);
	ASSERT_EQ(sc_query_hz("hz=1001", 100, &hz), -EINVAL);
	ASSERT_EQ(sc_query_hz("hz=abc", 100, &hz), -EINVAL);
	ASSERT_EQ(sc_query_hz("hz=", 100, &hz), -EINVAL);
	ASSERT_EQ(sc_query_hz("hz=1%00", 100, &hz), -EINVAL);
}

TEST(pid_rule)
{
	char msg[128], q[32];
	pid_t pid;

	ASSERT_OK(sc_query_pid("seconds=1", 77, &pid, msg, sizeof(msg)));
	ASSERT_EQ(pid, 77);
	ASSERT_OK(sc_query_pid("pid=1", 77, &pid, msg, sizeof(msg)));
	ASSERT_EQ(pid, 1);
	ASSERT_EQ(sc_query_pid("pid=abc", 77, &pid, msg, sizeof(msg)), -EINVAL);
	ASSERT_STR_EQ(msg, "invalid value for \"pid\" - must be a positive integer");
	ASSERT_EQ(sc_query_pid("pid=0", 77, &pid, msg, sizeof(msg)), -EINVAL);
	snprintf(q, sizeof(q), "pid=%d", (int)getpid());
	ASSERT_EQ(sc_query_pid(q, 77, &pid, msg, sizeof(msg)), -EINVAL);
	ASSERT_STR_EQ(msg, "pid is podprof itself");
	ASSERT_EQ(sc_query_pid("pid=999999999", 77, &pid, msg, sizeof(msg)), -ESRCH);
	ASSERT_STR_EQ(msg, "no process with pid 999999999 in this pod");
	ASSERT_EQ(pid, 0);
}

/* The one parse of a request's parameters (sidecar/server/params.h): each
 * route's rules, Go's messages and statuses, in Go's order. */
TEST(request_parameters_parsed_once_by_the_routes_rules)
{
	static const struct {
		unsigned rules;
		int formats;
		const char *method, *query;
		int status;            /* 0: parsed */
		const char *msg;       /* a 4xx's message, or NULL */
		int seconds, hz, debug, format, mappings, json, gz;
	} cases[] = {
#define CPU .rules = SC_P_CPU_SECONDS | SC_P_HZ | SC_P_TARGETS, .formats = 1, .method = "GET"
#define NAMED .rules = SC_P_DELTA_SECONDS | SC_P_TARGETS, .formats = 1, .method = "GET"
#define HEAP .rules = SC_P_DELTA_SECONDS | SC_P_VIEW | SC_P_TARGETS, .formats = 1, .method = "GET"
#define TRACE .rules = SC_P_TRACE_SECONDS | SC_P_HZ | SC_P_TRACE_FORMAT | SC_P_TARGETS, \
	.method = "GET"
		/* the CPU profile: Go's default 30 s, our hz, the limit */
		{ CPU, .query = "", .status = 0, .seconds = 30, .hz = 100 },
		{ CPU, .query = "seconds=5&hz=250", .status = 0, .seconds = 5, .hz = 250 },
		{ CPU, .query = "seconds=abc", .status = 0, .seconds = 30, .hz = 100 },
		{ CPU, .query = "hz=0", .status = 400,
		  .msg = "invalid value for \"hz\" - must be an integer from 1 to 1000" },
		{ CPU, .query = "seconds=90000", .status = 400,
		  .msg = "profile duration exceeds the limit of 86400 seconds" },
		{ CPU, .query = "seconds=90000&hz=x", .status = 400,
		  .msg = "invalid value for \"hz\" - must be an integer from 1 to 1000" },
		{ CPU, .query = "format=flamegraph&debug=1", .status = 0,
		  .seconds = 30, .hz = 100, .debug = 0, .format = SC_FORMAT_FLAMEGRAPH },
		{ CPU, .query = "format=svg", .status = 400,
		  .msg = "invalid value for \"format\" - must be " SC_FORMATS },
		/* a named profile: Go's delta rule, seconds with debug refused */
		{ NAMED, .query = "debug=2", .status = 0, .seconds = 0, .hz = 100, .debug = 2 },
		{ NAMED, .query = "seconds=3", .status = 0, .seconds = 3, .hz = 100 },
		{ NAMED, .query = "seconds=-3", .status = 400,
		  .msg = "invalid value for \"seconds\" - must be a positive integer" },
		{ NAMED, .query = "seconds=2&debug=1", .status = 400,
		  .msg = "seconds and debug params are incompatible" },
		/* heap's view, the trace's format */
		{ HEAP, .query = "view=mappings", .status = 0,
		  .seconds = 0, .hz = 100, .debug = 0, .format = 0, .mappings = 1 },
		{ HEAP, .query = "view=x", .status = 400,
		  .msg = "invalid value for \"view\" - must be stacks or mappings" },
		{ TRACE, .query = "format=json&gz=1", .status = 0,
		  .seconds = 0, .hz = 100, .debug = 0, .format = 0, .mappings = 0, .json = 1, .gz = 1 },
		{ TRACE, .query = "format=pb", .status = 400,
		  .msg = "invalid value for \"format\" - the trace is Go's, or json (Chrome's trace events)" },
		/* the processes */
		{ .rules = SC_P_TARGET, .formats = 0, .method = "GET", .query = "pid=0", .status = 400,
		  .msg = NULL },
		{ .rules = SC_P_TARGET, .formats = 0, .method = "GET", .query = "pid=all", .status = 400,
		  .msg = NULL },
		{ .rules = SC_P_TARGETS, .formats = 0, .method = "GET", .query = "tree=2", .status = 400,
		  .msg = "invalid value for \"tree\" - must be 0 or 1" },
		{ .rules = SC_P_TARGET, .formats = 0, .method = "GET", .query = "pid=999999999", .status = 404,
		  .msg = NULL },
		/* GET: the query is the addresses */
		{ .rules = SC_P_TARGET_POST, .method = "GET", .query = "pid=999999999", .status = 0 },
		{ .rules = SC_P_TARGET_POST, .method = "POST", .query = "pid=999999999", .status = 404,
		  .msg = NULL },
#undef CPU
#undef NAMED
#undef HEAP
#undef TRACE
	};
	struct sc_cfg cfg;
	FILE *out = fopen("/dev/null", "w");
	char *argv[] = { "podprof", "--pid", "1", NULL };

	ASSERT_OK(sc_cfg_load(&cfg, 3, argv, sc_routes_help, out, out));
	fclose(out);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sc_params_ctx ctx = { &cfg, getpid() };
		struct sc_request req = { .method = cases[i].method, .path = "/x", .query = cases[i].query };
		struct sc_params p;
		char msg[192];
		int st = sc_params_parse(&ctx, cases[i].rules, cases[i].formats, &req, &p, msg, sizeof(msg));

		if (st != cases[i].status)
			FAIL_AT("case %zu \"%s\": status %d, want %d (%s)", i, cases[i].query, st,
				cases[i].status, msg);
		if (st && cases[i].msg && strcmp(msg, cases[i].msg))
			FAIL_AT("case %zu \"%s\": \"%s\", want \"%s\"", i, cases[i].query, msg, cases[i].msg);
		if (st) {
			ASSERT(msg[0]);
			continue;
		}
		ASSERT_EQ(p.target.pid, getpid());
		ASSERT_EQ(p.target.procs.n, 0);
		if (cases[i].rules & (SC_P_CPU_SECONDS | SC_P_DELTA_SECONDS))
			ASSERT_EQ(p.seconds, cases[i].seconds);
		if (cases[i].hz)
			ASSERT_EQ(p.hz, cases[i].hz);
		ASSERT_EQ(p.debug, cases[i].debug);
		ASSERT_EQ((int)p.format, cases[i].format);
		ASSERT_EQ(p.mappings, cases[i].mappings);
		ASSERT_EQ(p.json, cases[i].json);
		ASSERT_EQ(p.gz, cases[i].gz);
		sc_procs_free(&p.target.procs);
	}
	sc_cfg_free(&cfg);
}
