/* The configuration's table and its readers (see cfg.h): the strings a
 * struct sc_cfg holds are copies it owns, freed by sc_cfg_free. Start-up
 * on the main thread; read-only after. */
#include "sidecar/server/cfg.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "base/mem.h"
#include "ptrace/core/types.h"
#include "sidecar/server/log.h"
#include "sidecar/server/util.h"

enum def_type { DEF_INT, DEF_STR, DEF_BOOL };

struct cfg_def {
	const char *flag;     /* --flag */
	const char *env;      /* PODPROF_ENV */
	enum def_type type;
	long min, max, def_int;
	const char *def_str;
	size_t off;
	const char *help;
};

#define INT(f, e, mn, mx, d, field, h) { f, "PODPROF_" e, DEF_INT, mn, mx, d, NULL, offsetof(struct sc_cfg, field), h }
#define STR(f, e, d, field, h) { f, "PODPROF_" e, DEF_STR, 0, 0, 0, d, offsetof(struct sc_cfg, field), h }
/* A switch: --flag alone, or --flag=true|false|1|0 (and so the variable). */
#define BOOL(f, e, field, h) { f, "PODPROF_" e, DEF_BOOL, 0, 1, 0, NULL, offsetof(struct sc_cfg, field), h }

static const struct cfg_def cfg_table[] = {
	INT("pid", "PID", 0, 4194304, 0, pid, "profile this process (as seen in our PID namespace)"),
	STR("comm", "COMM", NULL, comm, "profile the only process whose comm (name) is exactly this"),
	STR("exe", "EXE", NULL, exe, "profile the only process whose executable path contains this"),
	BOOL("tree", "TREE", tree,
	     "take the selected process and its descendants, in one profile labelled by pid and process; "
	     "with --comm or --exe matching several, their common root's tree (tree=0|1 per request)"),
	INT("max-processes", "MAX_PROCESSES", 1, 256, 128, max_processes,
	    "processes one profile takes (pid=all, a tree), its root or first one counted; past them, "
	    "left out and said in the profile"),
	STR("listen", "LISTEN", "127.0.0.1:8008", listen, "HOST:PORT to serve pprof on (':8008' for all addresses)"),
	STR("log-format", "LOG_FORMAT", "text", log_format, "text or json (one JSON object per line)"),
	STR("log-level", "LOG_LEVEL", "info", log_level, "debug, info, warn or error"),
	STR("auth-token-file", "AUTH_TOKEN_FILE", NULL, auth_token_file,
	    "require 'Authorization: Bearer <token in file>' on every endpoint but /healthz and /readyz"),
	STR("enable-file", "ENABLE_FILE", NULL, enable_file,
	    "a file saying true or false, or enabled or disabled (a mounted ConfigMap key: Knative's "
	    "runtime-profiling, or profiling.enable before 1.19), read every second: while false, "
	    "/debug/pprof/* answers 404 and nothing is attached"),
	STR("backend", "BACKEND", "auto", backend,
	    "how CPU samples are taken: perf_event (the kernel copies registers and stack into a "
	    "ring buffer, the thread never stops; needs CAP_PERFMON, or perf_event_paranoid <= 2 "
	    "and a seccomp profile that allows it), ptrace (each sample stops the thread for "
	    "20-60 us), or auto: perf_event where it opens, ptrace elsewhere and for CPython "
	    "targets. The log and each profile's comment say which ran and why"),
	INT("hz", "HZ", 1, 1000, 100, default_hz, "default CPU sampling rate when a request gives no hz="),
	INT("max-seconds", "MAX_SECONDS", 1, 604800, 86400, max_seconds, "longest profile a request may ask for"),
	BOOL("continuous", "CONTINUOUS", continuous,
	     "stay attached at --continuous-hz so that block, mutex, allocs and threadcreate count "
	     "since podprof started, as scrapers expect; the target stays traced (see README)"),
	INT("continuous-hz", "CONTINUOUS_HZ", 1, 100, 10, continuous_hz,
	    "rate of the continuous watch (CPU profiles raise it while they run)"),
	INT("wait-seconds", "WAIT_SECONDS", 1, 3600, 5, wait_seconds,
	    "window of block and mutex asked for without seconds= (they are measured over a window, not since start)"),
	INT("max-sessions", "MAX_SESSIONS", 1, 1024, 16, max_sessions, "profiles running at once"),
	INT("stack-bytes", "STACK_BYTES", 4096, 1048576, 65536, stack_bytes, "most stack copied per thread-sample (each copy is sized from that thread's last unwind)"),
	INT("max-frames", "MAX_FRAMES", 8, 1024, 256, max_frames, "frames kept per stack"),
	INT("max-stacks", "MAX_STACKS", 64, 10000000, 200000, max_stacks, "distinct stacks kept per profile"),
	INT("max-trace-events", "MAX_TRACE_EVENTS", 1000, 10000000, 400000, max_trace_events,
	    "events a trace keeps (24 bytes each); past them it ends early, valid"),
	INT("max-threads", "MAX_THREADS", 1, 1000000, 16384, max_threads, "target threads tracked (more are left untraced)"),
	INT("max-stopped", "MAX_STOPPED", 1, 256, 64, max_stopped, "running threads snapshotted in one tick"),
	INT("spin-us", "SPIN_US", 0, 1000, 50, spin_us,
	    "poll this long for an interrupted thread to stop before sleeping when the system has a core to spare (shorter pauses)"),
	INT("max-cpu-percent", "MAX_CPU_PERCENT", 1, 100, 15, max_cpu_percent,
	    "CPU the sampler may use, in % of a core; over it, it lowers its rate"),
	INT("sampler-nice", "SAMPLER_NICE", -20, 0, -10, sampler_nice,
	    "nice value of the sampler thread where allowed (CAP_SYS_NICE), else 0 (shorter waits for threads stopped between ticks)"),
	INT("python", "PYTHON", 0, 1, 1, python,
	    "1: in a CPython 3.11 to 3.15 process, each _PyEval_EvalFrameDefault frame shows the Python "
	    "functions it runs (function, file, line); 0: native frames only. Other releases and "
	    "free-threaded builds stay native, said in the log and in every profile's comment"),
	INT("draw-threads", "DRAW_THREADS", 0, 1, 1, draw_threads,
	    "1: under ptrace (CPython's backend), a thread born while a profile runs is stopped by "
	    "the CPU it uses (a perf event's signal, never delivered to it), each stop standing for a "
	    "period, so a thread per request is sampled, not settled; such a stop waits for podprof "
	    "to get a core, holding a CPython thread's GIL meanwhile (a ThreadingHTTPServer on two "
	    "busy cores served 14-20 % fewer requests a second profiled, 6-9 % with 0). 0: the "
	    "ticks sample those threads"),
	INT("detach-grace-ms", "DETACH_GRACE_MS", 0, 600000, 1000, detach_grace_ms, "stay attached this long after the last profile ends, unless the target gets a signal meanwhile (each one a round trip through podprof)"),
	INT("max-conns", "MAX_CONNS", 1, 100000, 256, max_conns, "open HTTP connections"),
	INT("max-header-bytes", "MAX_HEADER_BYTES", 1024, 1048576, 16384, max_header_bytes, "request line plus headers"),
	INT("max-body-bytes", "MAX_BODY_BYTES", 0, 16777216, 1048576, max_body_bytes, "request body (symbol POST)"),
	INT("header-timeout-ms", "HEADER_TIMEOUT_MS", 100, 3600000, 15000, header_timeout_ms, "time to receive a request's headers"),
	INT("idle-timeout-ms", "IDLE_TIMEOUT_MS", 100, 3600000, 120000, idle_timeout_ms, "keep-alive connection idle limit"),
};

static int set_value(struct sc_cfg *cfg, const struct cfg_def *d, const char *val,
		     const char *origin, FILE *err)
{
	char *field = (char *)cfg + d->off;

	if (d->type == DEF_BOOL) {
		int on = !strcmp(val, "true") || !strcmp(val, "1");

		if (!on && strcmp(val, "false") && strcmp(val, "0")) {
			fprintf(err, "podprof: %s%s: '%s' is not true or false\n",
				strcmp(origin, "option") ? "" : "--", strcmp(origin, "option") ? origin : d->flag,
				val);
			return -EINVAL;
		}
		*(int *)field = on;
		return 0;
	}
	if (d->type == DEF_INT) {
		int64_t v;

		if (sc_parse_go_int(val, &v) || v < d->min || v > d->max) {
			if (!strcmp(origin, "option"))
				fprintf(err, "podprof: --%s: '%s' is not an integer in %ld..%ld\n",
					d->flag, val, d->min, d->max);
			else
				fprintf(err, "podprof: %s: '%s' is not an integer in %ld..%ld\n",
					origin, val, d->min, d->max);
			return -EINVAL;
		}
		*(int *)field = (int)v;
		return 0;
	}
	char **s = (char **)field, *copy = base_strdup(val);

	if (!copy)
		return -ENOMEM;
	base_free(*s);
	*s = copy;
	return 0;
}

static void usage(FILE *out, sc_cfg_help_cb endpoints)
{
	fprintf(out,
		"Usage: podprof [--pid N | --comm NAME | --exe SUBSTRING] [--listen HOST:PORT] [options]\n"
		"\n"
		"Attaches with ptrace to a neighbour process in the same PID namespace and serves\n"
		"Go's net/http/pprof endpoints for it (below). With no selector, podprof picks\n"
		"the only process that is neither the pod's pause process nor podprof itself,\n"
		"and fails listing the candidates when there are several.\n"
		"\n");
	if (endpoints)
		endpoints(out);
	fprintf(out, "\nOptions (each also read from the environment variable shown):\n");
	for (size_t i = 0; i < SC_ARRAY_LEN(cfg_table); i++) {
		const struct cfg_def *d = &cfg_table[i];
		char arg[64];

		snprintf(arg, sizeof(arg), "--%s%s", d->flag,
			 d->type == DEF_INT ? " N" : d->type == DEF_STR ? " S" : "");
		fprintf(out, "  %-26s %s\n  %-26s [%s", arg, d->help, "", d->env);
		if (d->type == DEF_BOOL)
			fprintf(out, "=true|false; default false]\n");
		else if (d->type == DEF_INT)
			fprintf(out, "; %ld..%ld; default %ld]\n", d->min, d->max, d->def_int);
		else if (d->def_str)
			fprintf(out, "; default %s]\n", d->def_str);
		else
			fprintf(out, "]\n");
	}
	fprintf(out, "  %-26s print this help\n  %-26s print the version\n", "--help", "--version");
}

/* What no single flag can check: a numeric HOST:PORT, the log settings,
 * at most one target selector. Returns 0 or -EINVAL after saying why. */
static int check_values(const struct sc_cfg *cfg, FILE *err)
{
	char host[256];
	int port;
	struct sockaddr_in6 a6;
	struct sockaddr_in a4;

	if (sc_parse_hostport(cfg->listen, host, sizeof(host), &port) ||
	    (uv_ip4_addr(host, port, &a4) && uv_ip6_addr(host, port, &a6))) {
		fprintf(err, "podprof: --listen: '%s' is not HOST:PORT with a numeric host "
			"(e.g. 127.0.0.1:8008, :8008, [::1]:8008, localhost:8008)\n", cfg->listen);
		return -EINVAL;
	}
	if (strcmp(cfg->log_format, "text") && strcmp(cfg->log_format, "json")) {
		fprintf(err, "podprof: --log-format must be text or json, not '%s'\n", cfg->log_format);
		return -EINVAL;
	}
	if (strcmp(cfg->backend, "auto") && strcmp(cfg->backend, "perf_event") &&
	    strcmp(cfg->backend, "ptrace")) {
		fprintf(err, "podprof: --backend must be auto, perf_event or ptrace, not '%s'\n",
			cfg->backend);
		return -EINVAL;
	}
	if (sc_log_parse_level(cfg->log_level) < 0) {
		fprintf(err, "podprof: --log-level must be debug, info, warn or error, not '%s'\n",
			cfg->log_level);
		return -EINVAL;
	}
	if ((cfg->pid != 0) + (cfg->comm != NULL) + (cfg->exe != NULL) > 1) {
		fprintf(err, "podprof: give at most one of --pid, --comm and --exe\n");
		return -EINVAL;
	}
	return 0;
}

static const struct cfg_def *find(const char *flag, size_t len)
{
	for (size_t i = 0; i < SC_ARRAY_LEN(cfg_table); i++)
		if (strlen(cfg_table[i].flag) == len && !strncmp(cfg_table[i].flag, flag, len))
			return &cfg_table[i];
	return NULL;
}

int sc_cfg_load(struct sc_cfg *cfg, int argc, char **argv, sc_cfg_help_cb endpoints, FILE *out,
		FILE *err)
{
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < SC_ARRAY_LEN(cfg_table); i++) {
		const struct cfg_def *d = &cfg_table[i];

		if (d->type != DEF_STR)
			*(int *)((char *)cfg + d->off) = (int)d->def_int;
		else if (d->def_str && (rc = set_value(cfg, d, d->def_str, "default", err)))
			return rc;
	}
	for (size_t i = 0; i < SC_ARRAY_LEN(cfg_table); i++) {
		const char *v = getenv(cfg_table[i].env);

		if (v && *v && (rc = set_value(cfg, &cfg_table[i], v, cfg_table[i].env, err)))
			return rc;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val, *eq;
		const struct cfg_def *d;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(out, endpoints);
			return 1;
		}
		if (!strcmp(a, "--version")) {
			fprintf(out, "podprof %s\n", PODPROF_VERSION);
			return 1;
		}
		if (strncmp(a, "--", 2)) {
			fprintf(err, "podprof: unexpected argument '%s' (see --help)\n", a);
			return -EINVAL;
		}
		a += 2;
		eq = strchr(a, '=');
		d = find(a, eq ? (size_t)(eq - a) : strlen(a));
		if (!d) {
			fprintf(err, "podprof: unknown option '--%.*s' (see --help)\n",
				(int)(eq ? eq - a : (long)strlen(a)), a);
			return -EINVAL;
		}
		if (eq) {
			val = eq + 1;
		} else if (d->type == DEF_BOOL) {
			val = "true";
		} else if (i + 1 < argc) {
			val = argv[++i];
		} else {
			fprintf(err, "podprof: option '--%s' needs a value\n", d->flag);
			return -EINVAL;
		}
		if ((rc = set_value(cfg, d, val, "option", err)))
			return rc;
	}
	return check_values(cfg, err);
}

void sc_cfg_free(struct sc_cfg *cfg)
{
	for (size_t i = 0; i < SC_ARRAY_LEN(cfg_table); i++)
		if (cfg_table[i].type == DEF_STR) {
			char **s = (char **)((char *)cfg + cfg_table[i].off);

			base_free(*s);
			*s = NULL;
		}
}

int sc_cfg_backend(const struct sc_cfg *cfg)
{
	return !strcmp(cfg->backend, "perf_event") ? PT_BACKEND_PERF :
	       !strcmp(cfg->backend, "ptrace") ? PT_BACKEND_PTRACE : PT_BACKEND_AUTO;
}
