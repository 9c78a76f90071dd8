/* The neutral profile: what a session hands back (maps, named locations,
 * samples with values, and for a trace its timeline), built from a stack
 * table against a tracee's maps and names, and read by the sidecar's
 * encoders. Sampler thread, but for pt_profile_free and
 * pt_profile_drop_zero (any thread: the sidecar frees a profile on the work
 * thread that encoded it). */
#ifndef PT_PROFILE_H
#define PT_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/core/types.h"

struct pt_stacks;
struct pt_tracee;

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
	pid_t pid;           /* a profile of several processes: the thread's; else 0 */
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

/* A process of a profile of several (pt_profile_merge). */
struct pt_profile_proc {
	pid_t pid;
	char name[64];       /* comm, or the executable's base name */
	const char *note;    /* what cut its part short ("exited", ...), a static string, or NULL */
	int err;             /* it gave no part: the request's error for it (-ESRCH, -EPERM...), or 0 */
	const char *left_out;   /* its part is not in the profile: why (a static string), or NULL */
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
	/* A runtime's frames that have a system name (the JVM's: the method
	 * with its signature): Line k's in system[k], NULL where it has none.
	 * NULL elsewhere. */
	char **system;
	uint64_t entry;      /* Go: the entry of the function holding the code (0: unknown) */
};
/* A goroutine of a Go program's goroutine dump (struct pt_profile's
 * goroutines, one per sample): what Go prints of it besides its stack. */
struct pt_profile_goroutine {
	uint64_t goid, parent_goid;   /* parent 0: unknown */
	const char *state;   /* "chan receive", "running", ... (static) */
	uint64_t wait_ns;    /* how long it has waited, as Go counts it (0: unknown) */
	unsigned int flags;  /* PT_GOROUTINE_F_* */
	uint32_t created_by; /* its creator's location (the go statement) + 1, 0: none */
};
#define PT_GOROUTINE_F_LOCKED 0x1u   /* locked to its thread */
#define PT_GOROUTINE_F_SCAN   0x2u   /* the GC was scanning its stack */
struct pt_profile_sample {
	uint32_t first, n;   /* loc_ids[first .. first+n), leaf first */
	int64_t value[PT_MAX_VALUES];   /* per the session kind (see its declaration) */
	pid_t tid;           /* the thread (in our PID namespace) */
	char thread[64];     /* its name: its runtime's (a Java thread's), else its comm */
	char state;          /* R S D T ... when sampled */
	int syscall;         /* system call it was in, or -1 */
	unsigned int flags;  /* PT_SAMPLE_F_* */
	uint32_t proc;       /* a profile of several processes: index into its procs */
	/* Labels of the code it ran (a Go goroutine's pprof labels): the
	 * profile's label_kv[2*labels ..], nlabels pairs (0: none). */
	uint32_t labels, nlabels;
};
#define PT_SAMPLE_F_UNSEEN 0x1u   /* threadcreate: a thread whose creation was not seen */
/* heap and allocs: what the target's allocation records said. */
struct pt_profile_allocs {
	const char *source;  /* "agent", "go" or "go+agent" (a cgo program: the Go
	                      * runtime's records and the agent's): samples are allocation stacks, values
	                      * alloc_objects, alloc_space, inuse_objects, inuse_space
	                      * estimated from the samples; NULL: memory by mapping */
	const char *why;     /* by mapping: why there are no stacks; with stacks, a source
	                      * left out and why, or NULL (a static sentence) */
	int err;             /* by mapping: the error reading the records gave, or 0 */
	uint64_t rate;       /* mean bytes per sample (<= 1: every allocation); "go+agent": Go's */
	uint64_t agent_rate; /* "go+agent": the agent's */
	uint64_t samples, dropped, lost_frees;
	int full, forked, stopped;
	int rate_assumed;    /* Go's rate could not be read: its default assumed */
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
	uint64_t threads_stopped;    /* threads: threads stopped (the rest were cached) */
	uint64_t symbolize_ns;       /* naming every location (tables already read) */
	struct pt_timeline *timeline;   /* trace only */
	struct pt_profile_allocs alloc;   /* heap and allocs only */
	/* CPU profile: the process's CPU over the window (its CPU clock, the
	 * exited threads' included; 0: unknown), and of it what no sample
	 * carried (threads that ran between ticks and exited), added under
	 * PT_MARK_UNSAMPLED to `exited_stacks` stacks of threads that were
	 * sampled and exited, or alone when there were none. */
	uint64_t process_cpu_ns, unsampled_ns;   /* block: unsampled_ns, the ended threads' waits no tick saw */
	/* What live threads used since their last sample (their next one
	 * would carry it), as far as the samples fall short of the process's
	 * CPU: added under PT_MARK_PENDING to `pending_stacks` stacks, each
	 * thread's last one in the window (or alone: a thread not sampled in
	 * it). */
	uint64_t pending_ns, pending_stacks;
	uint64_t unsettled_ns;   /* what the profile still lacks of process_cpu_ns */
	uint64_t exited_threads, exited_stacks;
	/* Samples that carried more than the process used (draws: each
	 * stands for a period, ptrace/rule/cpudraw.h): taken off the ended
	 * threads' stacks in proportion to their CPU. */
	uint64_t overdrawn_ns;
	/* Samples of the perf_event backend that carried more than the
	 * process's CPU clock says it used (the kernel's cpu-clock counts
	 * time the hypervisor took from the thread too): taken off every
	 * stack in proportion to its CPU. */
	uint64_t clock_over_ns;
	const char *cut;     /* a window cut short: what the target did ("exited"), or NULL */
	uint64_t cut_ns;     /* when, since the window began */
	/* A profile of several processes: each sample's `proc` indexes these;
	 * NULL and 0 for one process. */
	struct pt_profile_proc *procs;
	size_t nprocs;
	size_t procs_left;   /* processes the request left out (a cap) */
	/* CPU samples (profile, trace): how they were taken, "ptrace" or
	 * "perf_event" (NULL: no CPU samples), and why (the choice's reason:
	 * ptrace/rule/perftick.h); samples the kernel could not write (perf_event). */
	/* The samples' labels, as key, value strings (struct
	 * pt_profile_sample's labels). */
	char **label_kv;
	size_t nlabel_kv;
	/* A Go program's goroutine dump: one per sample; the runtime's release
	 * ("go1.26.10") and what was left out (goroutines that changed under
	 * the read), which its block and mutex profiles (its goroutines'
	 * waits) set too. NULL, 0 elsewhere. */
	struct pt_profile_goroutine *goroutines;
	char go_version[40];
	uint64_t goroutines_torn;
	/* What the request could not do that it says in the answer: a
	 * runtime's frames or units missing, and why, one line each (lines
	 * separated by '\n'; "" when none). A profile of several processes:
	 * each member's lines, "pid N (name): " before each. */
	char note[1024];
	const char *backend;
	char backend_why[512];
	uint64_t samples_lost;
	uint64_t open_failures;   /* threads' events that could not be opened (their CPU pending) */
	int open_err;             /* the last one's errno */
	/* ptrace: threads born in the window stopped by the CPU they used
	 * (ptrace/rule/cpudraw.h), those stops, and why none were (an errno) */
	uint64_t draw_threads, draws;
	int draw_err;
};

/* Frames podprof adds itself, in place of an address (outside any user
 * address, as Python's tokens are): pt_profile_build names them. */
#define PT_MARK_BASE 0x0060000000000000ull
#define PT_MARK_UNSAMPLED (PT_MARK_BASE + 1)   /* CPU of threads that ended unsampled */
#define PT_MARK_UNSAMPLED_NAME "[exited threads' CPU, not sampled]"
#define PT_MARK_UNSEEN_WAIT (PT_MARK_BASE + 2)   /* waits of threads that ended unseen */
#define PT_MARK_UNSEEN_WAIT_NAME "[exited threads' waits, not seen]"
#define PT_MARK_PENDING (PT_MARK_BASE + 3)   /* CPU of live threads since their last sample */
#define PT_MARK_PENDING_NAME "[CPU since the thread's last sample]"

/* The profile of stack table st against t's current maps (read again
 * unless the process is gone): one map per executable mapping, one named
 * location per distinct address (the symbol, else an honest
 * "<module>+0x<vaddr>", else the address), one sample per entry in id
 * order. Times, hz and counters are left for the caller. Returns 0 or
 * -ENOMEM; *out is NULL on failure. */
int pt_profile_build(const struct pt_stacks *st, struct pt_tracee *t, struct pt_profile **out);
/* The location of address a in p, found among p's locations or added
 * (named against t, as pt_profile_build names a frame). Returns 0 with
 * *loc its index, or -ENOMEM. */
int pt_profile_locate(struct pt_profile *p, struct pt_tracee *t, uint64_t a, uint32_t *loc);
/* Removes the samples whose values are all zero (a delta's unchanged
 * stacks, as Go's delta profiles drop them). Never fails. */
void pt_profile_drop_zero(struct pt_profile *p);
/* NULL-safe. */
void pt_profile_free(struct pt_profile *p);

#endif
