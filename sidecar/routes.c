/* The route table: every endpoint, its handler and its description, the
 * one list the server dispatches by, the index lists and --help prints.
 * A new endpoint is a row here and its handler's file. Any thread: the
 * table is constant. */
#include "sidecar/routes.h"

#include <stdio.h>
#include <string.h>

#include "sidecar/pages/health.h"
#include "sidecar/pages/index.h"
#include "sidecar/pages/metrics.h"
#include "sidecar/profiles/cmdline.h"
#include "sidecar/profiles/cpu.h"
#include "sidecar/profiles/goroutine.h"
#include "sidecar/profiles/memory.h"
#include "sidecar/profiles/symbol.h"
#include "sidecar/profiles/threadcreate.h"
#include "sidecar/profiles/trace.h"
#include "sidecar/profiles/waiting.h"
#include "sidecar/server/params.h"
#include "sidecar/server/util.h"

/* Every endpoint, sorted by path: listed profiles appear in the index in
 * this order, as Go's index sorts them by name. */
static const struct sc_route routes[] = {
	{ "/debug/pprof", SC_ROUTE_ANY, NULL, sc_index_redirect, 0, NULL, NULL },
	{ "/debug/pprof/", SC_ROUTE_GET,
	  "The index of the profiles below (HTML), with the target process and the other "
	  "processes of the pod, each with a link.", sc_index_handle, SC_P_PID, NULL, NULL },
	{ "/debug/pprof/allocs", SC_ROUTE_GET | SC_ROUTE_LISTED | SC_ROUTE_FORMATS,
	  "A sampling of all past memory allocations with their stacks, where the target keeps "
	  "allocation records (see heap); otherwise, and with ?view=mappings, memory by mapping, "
	  "cumulative: the bytes that became resident in each since podprof first looked.",
	  sc_profile_allocs, SC_P_DELTA_SECONDS | SC_P_VIEW | SC_P_TARGETS,
	  sc_count_mappings, "view=mappings" },
	{ "/debug/pprof/block", SC_ROUTE_GET | SC_ROUTE_LISTED | SC_ROUTE_FORMATS,
	  "Stack traces where threads waited (blocked in a system call or D state), with the "
	  "time they waited, over ?seconds=N (default --wait-seconds); a Go program's "
	  "goroutines, by wait reason (its threads with ?view=threads)",
	  sc_profile_block, SC_P_DELTA_SECONDS | SC_P_HZ | SC_P_THREADS_VIEW | SC_P_TARGETS,
	  sc_count_blocked, NULL },
	{ "/debug/pprof/cmdline", SC_ROUTE_GET | SC_ROUTE_LISTED,
	  "The command line invocation of the current program",
	  sc_profile_cmdline, SC_P_TARGET, NULL, NULL },
	{ "/debug/pprof/goroutine", SC_ROUTE_GET | SC_ROUTE_LISTED | SC_ROUTE_FORMATS,
	  "Stack traces of all current goroutines (a Go program's, read from its runtime; "
	  "any other target's threads, and a Go program's with ?view=threads). "
	  "Use debug=2 as a query parameter to export in the same format as an "
	  "unrecovered panic.",
	  sc_profile_goroutine, SC_P_DELTA_SECONDS | SC_P_THREADS_VIEW | SC_P_TARGETS,
	  sc_count_threads, NULL },
	{ "/debug/pprof/heap", SC_ROUTE_GET | SC_ROUTE_LISTED | SC_ROUTE_FORMATS,
	  "A sampling of memory allocations of live objects, with their stacks, where the target "
	  "keeps allocation records: started with podprof's allocation agent "
	  "(LD_PRELOAD=libpodprof-alloc.so), or a Go program that links runtime/pprof. "
	  "Otherwise, and with ?view=mappings, where its memory lives by mapping (heap, thread "
	  "stacks, anonymous, code and data of each file, shared memory): resident, PSS, dirty "
	  "and swapped bytes. ?seconds=N gives the change over N seconds.",
	  sc_profile_heap, SC_P_DELTA_SECONDS | SC_P_VIEW | SC_P_TARGETS,
	  sc_count_mappings, "view=mappings" },
	{ "/debug/pprof/mutex", SC_ROUTE_GET | SC_ROUTE_LISTED | SC_ROUTE_FORMATS,
	  "Stack traces of threads waiting on locks and conditions (futex), with the time they "
	  "waited, over ?seconds=N (default --wait-seconds); a Go program's goroutines waiting "
	  "for a sync.Mutex or RWMutex (its threads with ?view=threads)",
	  sc_profile_mutex, SC_P_DELTA_SECONDS | SC_P_HZ | SC_P_THREADS_VIEW | SC_P_TARGETS,
	  sc_count_futex, NULL },
	{ "/debug/pprof/profile", SC_ROUTE_GET | SC_ROUTE_LISTED | SC_ROUTE_FORMATS,
	  "CPU profile. You can specify the duration in the seconds GET parameter. "
	  "After you get the profile file, use the go tool pprof command to investigate "
	  "the profile.",
	  sc_profile_cpu, SC_P_CPU_SECONDS | SC_P_HZ | SC_P_TARGETS, NULL, NULL },
	{ "/debug/pprof/symbol", SC_ROUTE_GET | SC_ROUTE_POST | SC_ROUTE_LISTED,
	  "Maps given program counters to function names. Counters can be specified "
	  "in a GET raw query or POST body, multiple counters are separated by '+'.",
	  sc_profile_symbol, SC_P_TARGET_POST, NULL, NULL },
	{ "/debug/pprof/threadcreate", SC_ROUTE_GET | SC_ROUTE_LISTED | SC_ROUTE_FORMATS,
	  "Stack traces that led to the creation of new OS threads (clone events seen while "
	  "attached, from the first request on); threads whose creation was not seen appear "
	  "under their start routine, labelled creation=\"not seen\"",
	  sc_profile_threadcreate, SC_P_DELTA_SECONDS | SC_P_TARGETS,
	  sc_count_threads, NULL },
	{ "/debug/pprof/trace", SC_ROUTE_GET | SC_ROUTE_LISTED,
	  "A trace of every thread of the target: running, waiting for a core, blocked (sync, "
	  "network, sleep, system calls), CPU samples, RSS. You can specify the duration in the "
	  "seconds GET parameter. After you get the trace file, use the go tool trace command to "
	  "investigate the trace; ?format=json gives Chrome Trace Event JSON (Perfetto, "
	  "speedscope).",
	  sc_profile_trace, SC_P_TRACE_SECONDS | SC_P_HZ | SC_P_TRACE_FORMAT | SC_P_TARGETS,
	  NULL, "format=json" },
	{ "/healthz", SC_ROUTE_ANY | SC_ROUTE_PUBLIC,
	  "ok (200) when podprof can profile: its sampler runs, the target exists and may be "
	  "traced; else 503 and what is wrong (no token needed).", sc_health_handle, 0, NULL, NULL },
	{ "/metrics", SC_ROUTE_GET,
	  "podprof's own counters, and the target's threads, RSS and CPU, in Prometheus text "
	  "format.", sc_metrics_handle, 0, NULL, NULL },
	{ "/readyz", SC_ROUTE_ANY | SC_ROUTE_PUBLIC, "The same checks as /healthz, for readiness probes.",
	  sc_health_handle, 0, NULL, NULL },
};

const struct sc_route *sc_routes(size_t *n)
{
	*n = SC_ARRAY_LEN(routes);
	return routes;
}

/* Prints text from column 29 on (where --help puts option texts),
 * wrapped before column 80. */
static void help_text(FILE *out, const char *s)
{
	size_t col = 0;

	while (*s) {
		size_t w = strcspn(s, " ");

		if (col && col + 1 + w > 51) {
			fprintf(out, "\n%29s", "");
			col = 0;
		} else if (col) {
			fputc(' ', out);
			col++;
		}
		fprintf(out, "%.*s", (int)w, s);
		col += w;
		s += w;
		s += strspn(s, " ");
	}
	fputc('\n', out);
}

void sc_routes_help(FILE *out)
{
	fprintf(out, "Endpoints (each profile also takes ?pid=N to look at another process of the pod;\n"
		     "every one but cmdline and symbol takes ?pid=all for every process of the pod and\n"
		     "?tree=1 for the process and its descendants, in one profile labelled by pid;\n"
		     "allocs, block, goroutine, heap, mutex, profile and threadcreate take ?format=\n"
		     "flamegraph (an interactive flame graph page, self-contained), speedscope (a\n"
		     "speedscope file, a profile per sample type) or collapsed (folded stacks, one\n"
		     "type: ?sample_index=NAME, default the profile's own); format= wins over debug=):\n");
	for (size_t i = 0; i < SC_ARRAY_LEN(routes); i++) {
		if (!routes[i].desc)
			continue;
		fprintf(out, "  %-26s ", routes[i].path);
		help_text(out, routes[i].desc);
	}
}
