/* What the sampler's callers and its own files say to each other: a
 * request (struct pt_request) and its answer, the sampler's options, its
 * callbacks and its counters. Types only: the sampler's functions are in
 * ptrace/sampler/sampler.h; the group (group.h), the counters (stats.h)
 * and the sampler's state (state.h) use these without standing above the
 * sampler. Any thread, as each type says. */
#ifndef PT_REQUEST_H
#define PT_REQUEST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/core/types.h"
#include "ptrace/profile/profile.h"

/* A session kind: what a request asks the sampler for. Each kind is one
 * file of ptrace/sessions/ (<name>.c, its pt_kind_* declared in <name>.h)
 * plugged into the sampler through the ops in ptrace/sampler/session.h. */
struct pt_session_kind;

struct pt__group;

struct pt_request {
	const struct pt_session_kind *kind;
	pid_t pid;
	/* Several processes instead (nprocs > 0, pid ignored): each served
	 * alone, the answer one profile of them all, each sample marked with
	 * its process (pt_profile_merge); with a window, the processes they
	 * fork join from their first instruction, and one that execs goes on
	 * into its new program (ptrace/sampler/group.h). procs[i].pid and .name are
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

#define PT_GROUP_MAX 256   /* as --max-processes and the merge (PT_MERGE_MAX) */

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
	int python;              /* CPython frames (ptrace/runtimes/python/python.h) in every stack */
	int draw_threads;        /* under ptrace, new threads drawn by their CPU (ptrace/rule/cpudraw.h) */
	double max_cpu;          /* CPU budget, a fraction of a core (see adapt_rate); 0: 0.15 */
	enum pt_backend backend; /* how CPU samples are taken (ptrace/core/types.h) */
};

struct pt_sampler;
typedef void (*pt_done_cb)(struct pt_request *req, void *arg);
/* Log hook for events worth a line (attach, detach, session end); may be NULL. */
typedef void (*pt_log_cb)(void *arg, int level, const char *msg);

/* Counters only grow (targets that went away keep their share). */
struct pt_sampler_stats {
	uint64_t thread_samples, stops, late_stops, incomplete_stacks, signals_reinjected;
	uint64_t preempted_stops, handler_stops, unpaid_stops;
	uint64_t pause_p50_ns, pause_p99_ns, unwind_p50_ns, unwind_p99_ns, frames_total;
	uint64_t sessions_done;
	uint64_t pause_ns_total, unwind_ns_total;
	uint64_t snapshot_stops, snapshot_reused, maps_rereads, short_copies, signal_copies, group_stops, clones, execs;
	uint64_t clones_resumed_at_once;   /* new threads let go at their parent's clone event */
	uint64_t threads_adopted;          /* of clones, those seized without a stop (perf_event) */
	uint64_t forks, forks_followed;    /* processes the targets forked; those a profile took */
	uint64_t ticks, ticks_late;   /* ticks run; ticks that started a period or more late */
	uint64_t sessions_active, targets_attached;
	uint64_t threads_traced;      /* threads of the attached targets, now */
	uint64_t rate_div;            /* 1, or the factor the rate is lowered by (over budget) */
	uint64_t rate_changes;
	uint64_t perf_samples, perf_lost;   /* perf_event backend: samples read, lost */
	uint64_t perf_stack_bytes;          /* the kernel's stack copies, over the samples read */
	uint64_t perf_open_failures;        /* threads' events that could not be opened */
	/* ptrace backend: threads born while sampled, stopped by the CPU they
	 * used (ptrace/rule/cpudraw.h), those stops, and the target's signals
	 * of podprof's own never passed on */
	uint64_t draw_threads, draws, own_signals;
};
#endif
