/* A request's parameters, parsed and checked once (see params.h). The order
 * of the checks is Go's where Go has the parameter: format first (the
 * server's own), seconds (and its clash with debug), hz, the limit on the
 * window, the view or the trace's format, then the processes. Loop
 * thread. */
#include "sidecar/server/params.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sidecar/server/cfg.h"
#include "sidecar/server/http.h"
#include "sidecar/server/log.h"

/* ?tree=: 1 for yes, 0 for no, dflt when absent; -1 for any other value. */
static int query_tree(const char *query, int dflt)
{
	char v[8];
	int rc = sc_query_get(query, "tree", v, sizeof(v));

	if (rc == 0)
		return dflt;
	if (rc < 0 || (strcmp(v, "0") && strcmp(v, "1")))
		return -1;
	return v[0] == '1';
}

/* The processes a request is about: ?pid=N (or the default target) and,
 * with ?tree=1 (or --tree, unless ?tree=0), its descendants; or ?pid=all,
 * every process of the pod; at most --max-processes. Without `many` an
 * explicit pid=all or tree=1 is a 400, and --tree gives its root alone.
 * Returns 0 or an HTTP status with msg. */
static int parse_target(const struct sc_params_ctx *ctx, const char *query, int many,
			struct sc_target_set *out, char *msg, size_t len)
{
	const struct sc_cfg *cfg = ctx->cfg;
	char v[8];
	int all = sc_query_get(query, "pid", v, sizeof(v)) == 1 && !strcmp(v, "all");
	int tree = query_tree(query, cfg->tree), err;

	*out = (struct sc_target_set){ 0 };
	if (tree < 0) {
		snprintf(msg, len, "invalid value for \"tree\" - must be 0 or 1");
		return 400;
	}
	if (!many && (all || (tree && !cfg->tree) || (tree && query_tree(query, -1) == 1))) {
		snprintf(msg, len, "this endpoint answers for one process: pid=all and tree=1 are for "
			 "profile, trace, heap, allocs, goroutine, threadcreate, block and mutex");
		return 400;
	}
	if (!all && (err = sc_query_pid(query, ctx->pid, &out->pid, msg, len)))
		return err == -ESRCH ? 404 : 400;
	if (!all && (!tree || !many))
		return 0;
	err = sc_procs_list("/proc", all ? 0 : out->pid, (size_t)cfg->max_processes, &out->procs);
	if (err == -ESRCH) {
		snprintf(msg, len, all ? "no process to profile in this pod" :
			 "no process with pid %d in this pod", (int)out->pid);
		return 404;
	}
	if (err) {
		snprintf(msg, len, "listing the pod's processes: %s", strerror(-err));
		return 500;
	}
	if (out->procs.left)
		log_warn("%zu processes past --max-processes %d are left out of this profile",
			 out->procs.left, cfg->max_processes);
	return 0;
}

int sc_params_parse(const struct sc_params_ctx *ctx, unsigned int rules, int formats,
		    const struct sc_request *req, struct sc_params *out, char *msg, size_t len)
{
	const struct sc_cfg *cfg = ctx->cfg;
	const char *q = req->query;
	char v[16];
	int rc;

	*out = (struct sc_params){ .hz = cfg->default_hz };
	msg[0] = '\0';
	if (formats && sc_query_format(q, &out->format)) {
		snprintf(msg, len, "invalid value for \"format\" - must be " SC_FORMATS);
		return 400;
	}
	out->debug = sc_query_debug(q);
	if (sc_query_get(q, "sample_index", out->sample_index, sizeof(out->sample_index)) < 0)
		snprintf(out->sample_index, sizeof(out->sample_index), "?");
	if (rules & SC_P_CPU_SECONDS)
		out->seconds = sc_parse_profile_seconds(q);
	if (rules & SC_P_TRACE_SECONDS)
		out->trace_seconds = sc_query_trace_seconds(q);
	if (rules & SC_P_DELTA_SECONDS) {
		if ((out->seconds = sc_query_delta_seconds(q)) < 0) {
			snprintf(msg, len, "invalid value for \"seconds\" - must be a positive integer");
			return 400;
		}
		if (out->seconds && out->debug != 0) {
			snprintf(msg, len, "seconds and debug params are incompatible");
			return 400;
		}
	}
	if ((rules & SC_P_HZ) && sc_query_hz(q, cfg->default_hz, &out->hz)) {
		snprintf(msg, len, "invalid value for \"hz\" - must be an integer from 1 to 1000");
		return 400;
	}
	if (out->seconds > cfg->max_seconds || out->trace_seconds > cfg->max_seconds) {
		snprintf(msg, len, "profile duration exceeds the limit of %d seconds", cfg->max_seconds);
		return 400;
	}
	if ((rules & SC_P_VIEW) && (rc = sc_query_get(q, "view", v, sizeof(v))) != 0) {
		if (rc < 0 || (strcmp(v, "mappings") && strcmp(v, "stacks"))) {
			snprintf(msg, len, "invalid value for \"view\" - must be stacks or mappings");
			return 400;
		}
		out->mappings = !strcmp(v, "mappings");
	}
	if ((rules & SC_P_THREADS_VIEW) && (rc = sc_query_get(q, "view", v, sizeof(v))) != 0) {
		if (rc < 0 || (strcmp(v, "threads") && strcmp(v, "goroutines"))) {
			snprintf(msg, len, "invalid value for \"view\" - must be goroutines or threads");
			return 400;
		}
		out->threads = !strcmp(v, "threads");
	}
	if (rules & SC_P_TRACE_FORMAT) {
		rc = sc_query_get(q, "format", v, sizeof(v));
		if (rc < 0 || (rc > 0 && v[0] && strcmp(v, "json"))) {
			snprintf(msg, len, "invalid value for \"format\" - the trace is Go's, or json "
				 "(Chrome's trace events)");
			return 400;
		}
		out->json = rc > 0 && !strcmp(v, "json");
		out->gz = sc_query_get(q, "gz", v, sizeof(v)) == 1 && !strcmp(v, "1");
	}
	if ((rules & SC_P_PID) && (rc = sc_query_pid(q, ctx->pid, &out->target.pid, msg, len)))
		return rc == -ESRCH ? 404 : 400;
	if ((rules & SC_P_TARGET_POST) && strcmp(req->method, "POST"))
		out->target.pid = ctx->pid;
	else if (rules & (SC_P_TARGET | SC_P_TARGETS | SC_P_TARGET_POST))
		return parse_target(ctx, q, !!(rules & SC_P_TARGETS), &out->target, msg, len);
	return 0;
}
