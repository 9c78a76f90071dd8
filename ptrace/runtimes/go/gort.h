/* A Go program's runtime, read from outside: which release it is (its
 * build info, .go.buildinfo), the layout of its structures for that release
 * (goruntime_tables.inc, made from each release's DWARF: stripped binaries
 * need none), where its goroutines are (runtime.allglen and allgptr: by
 * symbol, else from the two loads runtime.forEachGRace makes, found by its
 * name in .gopclntab), and each goroutine's state, wait, creator and pprof
 * labels. Nothing here stops the process: every goroutine is read while it
 * runs on, and a caller re-checks one it used (pt_go_recheck). Every read is
 * bounded and every value the target gives is checked: a lying runtime
 * gives fewer goroutines, never a crash. Sampler thread only. */
#ifndef PT_GORT_H
#define PT_GORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pt_go;
struct pt_space;
struct user_regs_struct;

/* Bounds on what one read of the goroutines takes. */
#define PT_GO_MAX_GOROUTINES 1000000
#define PT_GO_MAX_LABELS 64          /* pairs of one goroutine's label set */
#define PT_GO_MAX_LABEL_BYTES 4096   /* a key or value */

/* One goroutine, as read. */
struct pt_go_g {
	uint64_t g;                 /* its runtime.g */
	uint64_t goid, parent_goid; /* parent 0: unknown (before Go 1.21) */
	uint64_t stack_lo, stack_hi; /* its stack (g.stack), as read: untrusted */
	uint32_t status;            /* Go's _G* status, without the scan bit */
	int scan;                   /* the GC was scanning its stack */
	int waiting;                /* parked (_Gwaiting): its state is its wait reason */
	const char *state;          /* as Go prints it: "chan receive", "runnable", ... (static) */
	uint64_t wait_ns;           /* how long it has waited, as Go counts it (0: unknown) */
	uint8_t seq;                /* g.trackingSeq: one more each time it stops running (a
				     * wait that ended and began again at the same place tells) */
	int locked;                 /* locked to its thread (LockOSThread) */
	int system;                 /* a runtime goroutine Go leaves out of its profiles */
	uint64_t gopc, startpc;     /* the go statement's return address, its function */
	uint64_t labels;            /* its pprof label set (g.labels), 0: none */
	/* Running (or in a system call) on a thread: that thread's tid as the
	 * target sees it (m.procid), else 0. */
	pid_t nstid;
	/* Where to unwind it from when not running: its saved SP, PC and BP
	 * (g.sched, or its system call's), pc_is_ret: pc is a return address
	 * (a call's: the goroutine parked), not its next instruction. */
	uint64_t pc, sp, bp;
	int pc_is_ret;
};

/* One label of a set: key and value point into the caller's buffer. */
struct pt_go_label {
	const char *key, *value;
};

/* The reader of the process whose address space is `as` (its maps read).
 * Returns 0 or -ENOMEM. */
int pt_go_new(struct pt_go **out, struct pt_space *as);
/* NULL-safe. */
void pt_go_free(struct pt_go *go);
/* A new program: everything found is forgotten. */
void pt_go_reset(struct pt_go *go);
/* Looks for the Go runtime: 1 if the process runs a Go release podprof
 * has the layout of and its goroutines were found, else 0. note[0..len)
 * says what was found ("" for a process without Go): the release, and why
 * it cannot be read when it cannot ("go1.24.3: podprof has no layout for
 * Go 1.24"). */
int pt_go_detect(struct pt_go *go, char *note, size_t len);
/* The release found ("go1.26.10"), or "" before detection found one. */
const char *pt_go_version(const struct pt_go *go);
/* How many goroutines the runtime lists now, the dead ones included
 * (runtime.allglen; 0 if it cannot be read), at most
 * PT_GO_MAX_GOROUTINES: room enough for pt_go_goroutines. */
size_t pt_go_count(struct pt_go *go);

/* Reads the goroutines that are not dead, at most max, into out: every
 * one the runtime lists, system goroutines included (marked). *torn
 * counts those that changed under the read (left out). Returns how many,
 * or a negative errno (-ENOENT: not active, -ESRCH, -EFAULT: the list
 * could not be read). between (may be NULL) is called between the reads
 * of a long list, with arg: the caller's pause for other work. */
int pt_go_goroutines(struct pt_go *go, struct pt_go_g *out, size_t max, size_t *torn,
		     void (*between)(void *arg), void *arg);
/* Reads the goroutine of gr->g again into gr (pt_go_goroutines' record):
 * where it is now, for one that moved while it was read. Returns 0,
 * -ENOENT (dead now), -EAGAIN (torn again), -ENOMEM or the read's error. */
int pt_go_reread(struct pt_go *go, struct pt_go_g *gr);
/* 1 if gr's goroutine is still the same one in the same place (its id,
 * status and saved registers unchanged since pt_go_goroutines): what was
 * unwound from it holds. */
int pt_go_recheck(struct pt_go *go, const struct pt_go_g *gr);
/* pt_go_recheck of n goroutines in few reads: ok[i] for gs[i]. Returns 0,
 * -ENOMEM or -ESRCH. */
int pt_go_recheck_many(struct pt_go *go, const struct pt_go_g *const *gs, size_t n, uint8_t *ok);
struct pt_gomem_syms;
/* Where the runtime keeps its memory-profile records (gomem.h), for this
 * release: by symbol, else (a stripped binary) from the code that reads
 * them (runtime.mProf_FlushLocked's load of runtime.mbuckets,
 * runtime.mProf_Free's of runtime.mProfCycle), the rate then assumed to
 * be Go's default. Returns 0, or -ENOENT with *why (a static string). */
int pt_go_heap_syms(struct pt_go *go, struct pt_gomem_syms *out, const char **why);
/* 1 if pc lies in the function a thread's scheduler stack (g0) starts in
 * (runtime.mstart and its helpers, runtime.rt0_go), or runtime.mcall, which
 * switches to it to schedule (a walk through it ends there). */
int pt_go_is_scheduler_root(struct pt_go *go, uint64_t pc);
/* 1 if gr, parked, waits for a lock: sync.Mutex or sync.RWMutex (Go's
 * wait reasons since 1.20; before, "semacquire" with a frame of theirs
 * among frames[0..n), its stack, innermost first). */
int pt_go_is_lock_wait(struct pt_go *go, const struct pt_go_g *gr, const uint64_t *frames, int n);
/* The label set of the goroutine a thread ran when its registers were
 * regs (a stop's, or the kernel's sample's): the thread's g (R14 in Go
 * code, else its TLS word at fs_base - 8), checked by its stack bounds,
 * then its m's current goroutine (the same one, or the one a system stack
 * runs for); on no stack of its own (a signal being delivered), a g that
 * is its m's current goroutine. Read now: the thread may have moved on (a goroutine's labels
 * change only when it sets them). 0: none, or not found. */
uint64_t pt_go_current_labels(struct pt_go *go, const struct user_regs_struct *regs);
/* The labels of the label set at `labels` (a goroutine's), sorted by key,
 * at most max, their strings copied into buf[0..len). Returns how many, or
 * a negative errno (-EFAULT: unreadable, -EBADMSG: not a label set,
 * -E2BIG: more than max or past buf). */
int pt_go_labels(struct pt_go *go, uint64_t labels, struct pt_go_label *out, int max, char *buf,
		 size_t len);

#endif
