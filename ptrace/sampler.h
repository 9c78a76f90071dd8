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

/* A session kind: what a request asks the sampler for. Each kind is one
 * file of ptrace/ (session_<name>.c) plugged into the sampler through the
 * ops in ptrace/session.h. */
struct pt_session_kind;
/* CPU profile: on-CPU stacks over duration_ns at hz (Go's rule: a sample per
 * period of CPU each thread uses). Result: profile, values (samples, cpu ns). */
extern const struct pt_session_kind pt_kind_cpu;
/* Thread dump: every thread's stack now, one sample per thread (value 1).
 * Result: profile. */
extern const struct pt_session_kind pt_kind_threads;
/* Waiting: threads blocked (S or D) at each tick over duration_ns at hz,
 * weighted by the time since the tick before; mutex only those in futex.
 * Stacks are those cached since each thread blocked (one stop at its first
 * sight blocked, none after). Result: profile, values (contentions: new
 * waits, delay ns). */
extern const struct pt_session_kind pt_kind_block;
extern const struct pt_session_kind pt_kind_mutex;
/* Timeline: each thread's state at each tick over duration_ns at hz (only
 * changes are kept), CPU samples, thread creation and exit, the target's
 * RSS. Result: profile (its samples are the distinct stacks, referred to by
 * index) and profile->timeline. */
extern const struct pt_session_kind pt_kind_trace;
/* Memory by mapping, from /proc/<pid>/smaps (no attach). heap: values RSS,
 * PSS, private dirty, swap, bytes; with duration_ns, the change over it.
 * allocs: alloc_objects, alloc_space (growths of each mapping's RSS and
 * their bytes, cumulative since podprof first looked), inuse_objects,
 * inuse_space. Samples: [mapping, class], synthetic frames. Result: profile. */
extern const struct pt_session_kind pt_kind_heap;
extern const struct pt_session_kind pt_kind_allocs;
/* Thread creation: the stacks that created threads (the parent's stack at
 * each clone event), counted, for as long as podprof watches the target
 * (from the first such request on, while attached); and every live thread
 * whose creation was not seen, under its start routine (its stack's
 * outermost frames), flagged PT_SAMPLE_F_UNSEEN. Result: profile, value
 * threads created. */
extern const struct pt_session_kind pt_kind_threadcreate;
/* The continuous watch: keeps the target traced at hz for duration_ns
 * (use a very long one), gathering block and mutex waits, thread creations
 * and memory looks since it started; block and mutex requests without a
 * window answer from it (-EAGAIN where none runs). No result. */
extern const struct pt_session_kind pt_kind_watch;
/* Symbol lookup of addrs. Result: names. Needs no attach. */
extern const struct pt_session_kind pt_kind_symbols;

/* A per-thread timeline (pt_kind_trace): what each thread was doing, as
 * changes at tick times. */
enum pt_tl_state {
	PT_TL_RUNNING = 1,   /* on a core */
	PT_TL_RUNNABLE,      /* runnable, waiting for a core (its run delay grew) */
	PT_TL_SYNC,          /* blocked in futex */
	PT_TL_NET,           /* blocked in epoll_wait, poll, select, accept, recv* ... */
	PT_TL_SLEEP,         /* nanosleep, clock_nanosleep */
	PT_TL_SYSCALL,       /* blocked in another system call, or in D state */
	PT_TL_STOPPED,       /* group-stopped (T) */
};
enum pt_tl_kind {
	PT_TL_EV_STATE = 1,  /* thread enters `state` (with `syscall`, `stack`) */
	PT_TL_EV_SAMPLE,     /* a CPU sample of thread, `stack` */
	PT_TL_EV_EXIT,       /* thread ended */
	PT_TL_EV_RSS,        /* the process's resident memory is `value` bytes */
};
struct pt_tl_thread {
	pid_t tid;
	char name[16];
	uint64_t start_ns;   /* first seen, since the trace began; 0: there at the start */
	int created;         /* its creation was seen (a clone event) */
};
struct pt_tl_event {
	uint64_t t_ns;       /* since the trace began */
	uint64_t value;      /* RSS bytes */
	uint32_t thread;     /* index into threads */
	int32_t stack;       /* index into the profile's samples, or -1 */
	int16_t syscall;     /* or -1 */
	uint8_t kind;        /* enum pt_tl_kind */
	uint8_t state;       /* enum pt_tl_state */
};
struct pt_timeline {
	struct pt_tl_thread *threads;
	size_t nthreads;
	struct pt_tl_event *events;   /* in time order */
	size_t nevents;
	uint64_t duration_ns;
	int truncated;       /* a cap was hit: the timeline ends early */
};

/* A finished profile in neutral form; indices are 0-based. */
struct pt_profile_map {
	uint64_t start, limit, offset;
	char *path;
	char build_id[81];
};
struct pt_profile_loc {
	uint64_t addr;
	int map;             /* index into maps, or -1 */
	char *name;          /* function name, or "<module>+0x<vaddr>", never NULL */
	/* Where the compiler inlined code (Go), `name` is the function whose
	 * code is at addr and outer[0..nouter) are those it was inlined into,
	 * innermost first, the function that holds the code last: Go's
	 * profiles give such a location one Line per function, in that
	 * order, and its tracebacks one frame per function at the same PC.
	 * NULL and 0 elsewhere. */
	char **outer;
	uint32_t nouter;
	/* Source positions, where known (Python's frames, which have no
	 * mapping; Go's, from .gopclntab): for Line k (0: name, k > 0:
	 * outer[k - 1]) file[k] ("?": unknown), line[k] (0: unknown) and the
	 * function's first line start[k] (0: unknown). NULL elsewhere. */
	char **file;
	uint32_t *line, *start;
};
#define PT_MAX_VALUES 4
struct pt_profile_sample {
	uint32_t first, n;   /* loc_ids[first .. first+n), leaf first */
	int64_t value[PT_MAX_VALUES];   /* per the session kind (see its declaration) */
	pid_t tid;           /* the thread (in our PID namespace) */
	char thread[16];     /* its name (comm) */
	char state;          /* R S D T ... when sampled */
	int syscall;         /* system call it was in, or -1 */
	unsigned int flags;  /* PT_SAMPLE_F_* */
};
#define PT_SAMPLE_F_UNSEEN 0x1u   /* threadcreate: a thread whose creation was not seen */
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
	uint64_t threads_stopped;    /* threads: threads stopped (the rest were cached) */
	uint64_t symbolize_ns;       /* naming every location (tables already read) */
	struct pt_timeline *timeline;   /* trace only */
	const char *cut;     /* a window cut short: what the target did ("exited"), or NULL */
	uint64_t cut_ns;     /* when, since the window began */
};
/* Any thread. NULL-safe. */
void pt_profile_free(struct pt_profile *p);

struct pt_request {
	const struct pt_session_kind *kind;
	pid_t pid;
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
	int max_trace_events;    /* events per trace (0: 400000) */
	uint64_t detach_grace_ns;
	const char *debug_dir;   /* NULL: /usr/lib/debug/.build-id */
	int python;              /* CPython frames (ptrace/python.h) in every stack */
	double max_cpu;          /* CPU budget, a fraction of a core (see adapt_rate); 0: 0.15 */
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
	uint64_t preempted_stops;
	uint64_t pause_p50_ns, pause_p99_ns, unwind_p50_ns, unwind_p99_ns, frames_total;
	uint64_t sessions_done;
	uint64_t pause_ns_total, unwind_ns_total;
	uint64_t snapshot_stops, snapshot_reused, maps_rereads, short_copies, signal_copies, group_stops, clones, execs;
	uint64_t ticks, ticks_late;   /* ticks run; ticks that started a period or more late */
	uint64_t sessions_active, targets_attached;
	uint64_t rate_div;            /* 1, or the factor the rate is lowered by (over budget) */
	uint64_t rate_changes;
};
/* Any thread: a snapshot of the counters and recent pause/unwind medians. */
void pt_sampler_stats(struct pt_sampler *s, struct pt_sampler_stats *out);

#endif
