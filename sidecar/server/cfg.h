/* Configuration: one table (cfg.c) drives the flags, the PODPROF_* environment
 * variables, validation and --help (CONVENTIONS H7). Read-only after start-up. */
#ifndef SC_CFG_H
#define SC_CFG_H

#include <stdio.h>

struct sc_cfg {
	/* target selection */
	int pid;
	char *comm;
	char *exe;
	/* serving */
	char *listen;
	char *log_format;
	char *log_level;
	char *auth_token_file;
	char *enable_file;
	int max_conns;
	int max_header_bytes;
	int max_body_bytes;
	int header_timeout_ms;
	int idle_timeout_ms;
	/* sampling */
	char *backend;           /* auto, perf_event or ptrace */
	int default_hz;
	int max_seconds;
	int wait_seconds;
	int continuous;
	int tree;                /* --tree: the target's process tree */
	int max_processes;
	int continuous_hz;
	int max_sessions;
	int stack_bytes;
	int max_frames;
	int max_stacks;
	int max_trace_events;
	int max_threads;
	int max_stopped;
	int spin_us;
	int sampler_nice;
	int max_cpu_percent;
	int detach_grace_ms;
	int python;
	int draw_threads;
};

/* Prints the endpoints' part of --help (sidecar/routes.h's sc_routes_help). */
typedef void (*sc_cfg_help_cb)(FILE *out);
/* Fills `cfg` with defaults, then PODPROF_* variables from `envp`, then flags.
 * Returns 0 to run, 1 when --help/--version was printed (exit 0; --help
 * with `endpoints`' list, which may be NULL), or -EINVAL after printing a
 * message that names the bad flag or value to `err`. Start-up only. */
int sc_cfg_load(struct sc_cfg *cfg, int argc, char **argv, sc_cfg_help_cb endpoints, FILE *out,
		FILE *err);
void sc_cfg_free(struct sc_cfg *cfg);
/* --backend as the sampler takes it (enum pt_backend: ptrace/core/types.h). */
int sc_cfg_backend(const struct sc_cfg *cfg);

#endif
