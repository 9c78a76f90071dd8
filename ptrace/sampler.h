/* The sampler: one thread that owns every ptrace and waitpid call (STYLE H12).
 * Other threads hand it requests (a CPU profile session, a symbol lookup)
 * with pt_sampler_submit(); it answers each through the done callback, on
 * the sampler thread, exactly once. One sampler serves any number of
 * overlapping sessions: each gets its own aggregate of the shared ticks.
 *
 * SIGCHLD must be blocked in every thread of the process before
 * pt_sampler_new() (the sampler reads it through a signalfd). */
#ifndef PT_SAMPLER_H
#define PT_SAMPLER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* CPU: a profile over `seconds`. SYMBOLIZE: names of addrs. SNAPSHOT: every
 * thread's stack now (one sample per thread, count 1: the thread dump). */
enum pt_req_kind { PT_REQ_CPU = 1, PT_REQ_SYMBOLIZE, PT_REQ_SNAPSHOT };

/* A finished CPU profile in neutral form; indices are 0-based. */
struct pt_profile_map {
	uint64_t start, limit, offset;
	char *path;
	char build_id[81];
};
struct pt_profile_loc {
	uint64_t addr;
	int map;             /* index into maps, or -1 */
	char *name;          /* function name, or "<module>+0x<vaddr>", never NULL */
};
struct pt_profile_sample {
	uint32_t first, n;   /* loc_ids[first .. first+n), leaf first */
	int64_t count, cpu_ns;
	pid_t tid;           /* the thread (in our PID namespace) */
	char thread[16];     /* its name (comm) */
	char state;          /* R S D T ... when sampled */
	int syscall;         /* system call it was in, or -1 */
};
struct pt_profile {
	uint64_t time_ns, duration_ns;
	int hz;
	struct pt_profile_map *maps;
	size_t nmaps;
	struct pt_profile_loc *locs;
	size_t nlocs;
	struct pt_profile_sample *samples;
	size_t nsamples;
	uint32_t *loc_ids;
	uint64_t thread_samples, dropped_stacks, late_stops;
	uint64_t threads_stopped;    /* SNAPSHOT: threads stopped (the rest were cached) */
	uint64_t symbolize_ns;       /* naming every location (tables already read) */
};
void pt_profile_free(struct pt_profile *p);

struct pt_request {
	enum pt_req_kind kind;
	pid_t pid;
	int seconds;            /* CPU */
	int hz;                 /* CPU */
	uint64_t *addrs;        /* SYMBOLIZE input, owned by the caller */
	size_t naddrs;
	/* results, valid in the done callback */
	int err;                /* 0, -ESRCH, -EPERM, -EBUSY, -ECANCELED, -ENOMEM */
	struct pt_profile *profile;  /* CPU: caller frees with pt_profile_free */
	char **names;           /* SYMBOLIZE: naddrs entries, NULL if unknown; caller frees */
	void *user;
	/* private */
	atomic_int cancel;
	struct pt_request *next;
};

struct pt_sampler_opts {
	size_t stack_bytes;
	int max_frames;
	int max_threads;
	int max_per_tick;
	uint64_t spin_ns;        /* see pt_tracee_opts */
	int max_sessions;
	int max_stacks;          /* distinct stacks per session */
	uint64_t detach_grace_ns;
	const char *debug_dir;   /* NULL: /usr/lib/debug/.build-id */
	double max_cpu;          /* CPU budget, a fraction of a core (see adapt_rate); 0: 0.15 */
};

struct pt_sampler;
typedef void (*pt_done_cb)(struct pt_request *req, void *arg);
/* Log hook for events worth a line (attach, detach, session end); may be NULL. */
typedef void (*pt_log_cb)(void *arg, int level, const char *msg);

/* Starts the sampler thread. Returns 0, -ENOMEM or another negative errno. */
int pt_sampler_new(struct pt_sampler **out, const struct pt_sampler_opts *opts, pt_done_cb done,
		   pt_log_cb log, void *arg);
/* Any thread. The request belongs to the sampler until done is called. */
void pt_sampler_submit(struct pt_sampler *s, struct pt_request *req);
/* Any thread: ends a submitted request early; done is still called once. */
void pt_sampler_cancel(struct pt_sampler *s, struct pt_request *req);
/* Stops the thread (pending requests complete with -ECANCELED), detaches
 * every target and frees. NULL-safe. */
void pt_sampler_free(struct pt_sampler *s);

/* Counters only grow (targets that went away keep their share). */
struct pt_sampler_stats {
	uint64_t thread_samples, stops, late_stops, incomplete_stacks, signals_reinjected;
	uint64_t pause_p50_ns, pause_p99_ns, unwind_p50_ns, unwind_p99_ns, frames_total;
	uint64_t sessions_done;
	uint64_t pause_ns_total, unwind_ns_total;
	uint64_t snapshot_stops, snapshot_reused, maps_rereads, short_copies, group_stops, clones, execs;
	uint64_t ticks, ticks_late;   /* ticks run; ticks that started a period or more late */
	uint64_t sessions_active, targets_attached;
	uint64_t rate_div;            /* 1, or the factor the rate is lowered by (over budget) */
	uint64_t rate_changes;
};
/* Any thread: a snapshot of the counters and recent pause/unwind medians. */
void pt_sampler_stats(struct pt_sampler *s, struct pt_sampler_stats *out);

#endif
