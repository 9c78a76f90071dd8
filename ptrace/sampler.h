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

#include "ptrace/profile.h"

/* A session kind: what a request asks the sampler for. Each kind is one
 * file of ptrace/ (session_<name>.c, its pt_kind_* declared in
 * session_<name>.h) plugged into the sampler through the ops in
 * ptrace/session.h. */
struct pt_session_kind;

struct pt__group;

struct pt_request {
	const struct pt_session_kind *kind;
	pid_t pid;
	/* Several processes instead (nprocs > 0, pid ignored): each served
	 * alone, the answer one profile of them all, each sample marked with
	 * its process (pt_profile_merge); with a window, the processes they
	 * fork join from their first instruction, and one that execs goes on
	 * into its new program (ptrace/group.h). procs[i].pid and .name are
	 * the caller's; at most max_procs. */
	const struct pt_profile_proc *procs;
	size_t nprocs;
	size_t nprocs_left;     /* more the caller left out (its cap): said in the profile */
	size_t max_procs;       /* a group's cap, its children included (0: PT_GROUP_MAX) */
	uint64_t duration_ns;   /* kinds with a window: its length (0: none, where allowed) */
	int hz;                 /* kinds with a window: the rate of its ticks */
	uint64_t *addrs;        /* symbols: input, owned by the caller */
	size_t naddrs;
	/* results, valid in the done callback */
	int err;                /* 0, -ESRCH, -EPERM, -EBUSY, -ECANCELED, -ENOMEM, -EINVAL */
	struct pt_profile *profile;  /* caller frees with pt_profile_free */
	char **names;           /* symbols: naddrs entries, NULL if unknown; caller frees */
	void *user;
	/* private */
	atomic_int cancel;
	struct pt__group *group;   /* a group's member: its group */
	struct pt_request *next;
};

#define PT_GROUP_MAX 200

struct pt_sampler_opts {
	size_t stack_bytes;
	int max_frames;
	int max_threads;
	int max_per_tick;
	uint64_t spin_ns;        /* see pt_tracee_opts */
	int max_sessions;
	int max_stacks;          /* distinct stacks per session */
	int max_trace_events;    /* events per trace (0: 400000) */
	uint64_t detach_grace_ns;
	const char *debug_dir;   /* NULL: /usr/lib/debug/.build-id */
	int python;              /* CPython frames (ptrace/python.h) in every stack */
	double max_cpu;          /* CPU budget, a fraction of a core (see adapt_rate); 0: 0.15 */
	enum pt_backend backend; /* how CPU samples are taken (ptrace/types.h) */
};

struct pt_sampler;
typedef void (*pt_done_cb)(struct pt_request *req, void *arg);
/* Log hook for events worth a line (attach, detach, session end); may be NULL. */
typedef void (*pt_log_cb)(void *arg, int level, const char *msg);

/* Starts the sampler thread. Returns 0, -ENOMEM or another negative errno.
 * Any thread; `done` and `log` are then called on the sampler thread. */
int pt_sampler_new(struct pt_sampler **out, const struct pt_sampler_opts *opts, pt_done_cb done,
		   pt_log_cb log, void *arg);
/* Any thread. The request belongs to the sampler until done is called,
 * exactly once, on the sampler thread. */
void pt_sampler_submit(struct pt_sampler *s, struct pt_request *req);
/* Any thread: ends a submitted request early; done is still called once. */
void pt_sampler_cancel(struct pt_sampler *s, struct pt_request *req);
/* Any thread. While paused (paused=1), every running session and every
 * request submitted ends with -ECANCELED, and every target is detached at
 * once (no grace period); pause 0 lifts it. Takes effect at the sampler's
 * next turn of its loop (at once: the call wakes it). */
void pt_sampler_pause(struct pt_sampler *s, int paused);
/* Any thread: 1 if the sampler thread runs and went round its loop in the
 * last max_ns (it wakes at least once a second), else 0. */
int pt_sampler_alive(struct pt_sampler *s, uint64_t max_ns);
/* Stops the thread (pending requests complete with -ECANCELED), detaches
 * every target and frees. NULL-safe. */
void pt_sampler_free(struct pt_sampler *s);

/* Counters only grow (targets that went away keep their share). */
struct pt_sampler_stats {
	uint64_t thread_samples, stops, late_stops, incomplete_stacks, signals_reinjected;
	uint64_t preempted_stops, handler_stops, unpaid_stops;
	uint64_t pause_p50_ns, pause_p99_ns, unwind_p50_ns, unwind_p99_ns, frames_total;
	uint64_t sessions_done;
	uint64_t pause_ns_total, unwind_ns_total;
	uint64_t snapshot_stops, snapshot_reused, maps_rereads, short_copies, signal_copies, group_stops, clones, execs;
	uint64_t clones_resumed_at_once;   /* new threads let go at their parent's clone event */
	uint64_t forks, forks_followed;    /* processes the targets forked; those a profile took */
	uint64_t ticks, ticks_late;   /* ticks run; ticks that started a period or more late */
	uint64_t sessions_active, targets_attached;
	uint64_t threads_traced;      /* threads of the attached targets, now */
	uint64_t rate_div;            /* 1, or the factor the rate is lowered by (over budget) */
	uint64_t rate_changes;
	uint64_t perf_samples, perf_lost;   /* perf_event backend: samples read, lost */
	uint64_t perf_stack_bytes;          /* the kernel's stack copies, over the samples read */
	uint64_t perf_open_failures;        /* threads' events that could not be opened */
};
/* Any thread: a snapshot of the counters and recent pause/unwind medians. */
void pt_sampler_stats(struct pt_sampler *s, struct pt_sampler_stats *out);

/* ---- for session kinds (ptrace/session.h) --------------------------------- */

struct pt_session;
struct pt_event;
/* State that outlives sessions, kept per target (a cumulative profile's
 * totals since podprof started watching): the slot of `key` (any address
 * the kind owns), NULL at first; free_fn frees what it holds when the target
 * is forgotten; event_fn (may be NULL) gets every thread event of the
 * target from then on, sessions or not, with clone stacks. Returns NULL if
 * the target has no slot left. Sampler thread. */
void **pt__target_slot(struct pt_session *ss, const void *key, void (*free_fn)(void *),
		       void (*event_fn)(void *p, const struct pt_event *ev));

/* Writes a log line through the sampler's log hook: level 0 debug, 1 info,
 * 2 warning. Sampler thread. */
void pt__sampler_log(struct pt_sampler *s, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
