/* How a language runtime plugs into podprof: each runtime (a folder of
 * ptrace/runtimes/) fills one struct pt_runtime_ops, and its row in the
 * table of ptrace/runtimes/runtimes.c is all that connects it. A runtime
 * recognises a process (its modules, symbols, sections), and for each
 * sample of a thread running its code reads what it needs while the
 * thread is stopped (capture), then, after the native unwind, replaces
 * the native frames of its interpreter or JIT with tokens that stand for
 * its own frames (merge), which it names on demand (lines). Types only.
 * Sampler thread only. */
#ifndef PT_RUNTIME_H
#define PT_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pt_capture;
struct pt_space;

/* A runtime's state for one process: the runtime's own structure embeds
 * this one first (and finds itself from it). */
struct pt_rt {
	const struct pt_runtime_ops *ops;
};

/* What a runtime keeps per thread of a process: in every traced thread,
 * zeroed at its birth and when its process execs. */
struct pt_rt_thread {
	pid_t nstid;        /* its tid as the target sees it (0: not looked up yet) */
	uint64_t w[4];      /* the runtime's own (CPython: its thread state...) */
};

/* One frame of a runtime's, as lines gives it. Strings are owned by the
 * runtime and live until it is reset. */
struct pt_rt_line {
	const char *func;   /* the function as its users write it ("Class.method") */
	const char *file;   /* its source file, NULL if unknown */
	int line;           /* 0: unknown */
	int start_line;     /* the function's first line, 0: unknown */
	/* The function with its signature, as the runtime's own tools spell
	 * it ("Hot.hotAlpha(I)J": pprof's system name); NULL: none. */
	const char *system;
};

/* Tokens: values among a stack's frames that stand for a runtime's frames.
 * No user-space code has such an address: bits 52-54 set, the runtime's
 * row in bits 48-51, its own id below. Stack tables, caches and every
 * endpoint carry them as frames; the runtime names them. */
#define PT_RT_TOKEN_BASE 0x0070000000000000ull
#define PT_RT_TOKEN_MASK 0xfff0000000000000ull
#define PT_RT_TOKEN_ID_MASK 0x0000ffffffffffffull

static inline int pt_rt_is_token(uint64_t a)
{
	return (a & PT_RT_TOKEN_MASK) == PT_RT_TOKEN_BASE;
}

static inline uint64_t pt_rt_token(unsigned int row, uint64_t id)
{
	return PT_RT_TOKEN_BASE | (uint64_t)(row & 0xf) << 48 | (id & PT_RT_TOKEN_ID_MASK);
}

static inline unsigned int pt_rt_token_row(uint64_t a)
{
	return (unsigned int)(a >> 48) & 0xf;
}

struct pt_runtime_ops {
	const char *name;   /* "python" */
	/* Bytes of a capture slot's own data (what capture reads, merge uses);
	 * 0: capture and merge are not used. */
	size_t slot_size;
	/* Reads frames in the thread's stop (capture): the sampling backend
	 * must stop threads (ptrace), not let the kernel copy their stacks. */
	int reads_in_stop;
	/* Its frames stand in every sample for its interpreter's (CPython's
	 * functions for _PyEval_EvalFrameDefault): where the process runs it
	 * but it cannot read them, every answer of the process's stacks says
	 * so, with what detect noted (runtimes.h's pt_runtimes_missing). */
	int frames_in_samples;
	/* The state for the process of `as` (which it reads through), its
	 * tokens numbered in table row `row`. Returns 0 or -ENOMEM. */
	int (*new)(struct pt_rt **out, struct pt_space *as, unsigned int row);
	void (*free)(struct pt_rt *rt);
	/* A new program (exec): everything it knew is forgotten. */
	void (*reset)(struct pt_rt *rt);
	/* Whether the process runs this runtime, from its maps and modules
	 * (as's): 1 to read its frames, 0 not (unknown, or a release it
	 * cannot read). note[0..len) gets a line worth logging ("" if the
	 * process does not run it at all). */
	int (*detect)(struct pt_rt *rt, char *note, size_t len);
	/* Optional: before a batch of stops, while the threads run, what the
	 * runtime looks up once for the threads of the batch (their nstid set). */
	void (*prepare)(struct pt_rt *rt, struct pt_rt_thread *const *threads, int n);
	/* Optional: in the thread's stop, right after its stack was copied
	 * into cap: what changes as soon as it runs, into slot. */
	void (*capture)(struct pt_rt *rt, struct pt_rt_thread *th, const struct pt_capture *cap,
			void *slot);
	/* Optional: after the stop (or the kernel's sample), frames[0..n)
	 * (leaf first) of the capture cap with the runtime's frames in place
	 * of its native ones, and (a runtime whose code carries labels: Go's
	 * pprof labels) a last frame, a token of its labels; at most max.
	 * Returns the new count. slot is NULL for a runtime of no slot_size.
	 * A runtime that walks the stack copy itself (the JVM's frames) adds
	 * what it read to cap's stack_used and stack_short, which size the
	 * thread's next copy. */
	int (*merge)(struct pt_rt *rt, const void *slot, struct pt_capture *cap, uint64_t *frames,
		     int n, int max);
	/* The runtime's frames a token of its own stands for, innermost first,
	 * at most max. Returns how many (0: not one of its tokens). */
	int (*lines)(struct pt_rt *rt, uint64_t token, struct pt_rt_line *out, int max);
	/* Optional: the samples whose frames merge has placed so far, and of
	 * them those that lacked some of them (a chain torn while it was read,
	 * or unreadable): what the answers say of the frames they lack. */
	void (*counts)(struct pt_rt *rt, uint64_t *merged, uint64_t *torn);
	/* Optional: if token is one of its labels' (merge's last frame), 1
	 * with *kv its keys and values alternately, *n pairs (owned by the
	 * runtime until its reset); else 0. */
	int (*labels)(struct pt_rt *rt, uint64_t token, const char *const **kv, size_t *n);
	/* Optional: the name the runtime gave the thread the target knows as
	 * nstid (a JVM's Java threads, past the kernel's 15 characters), into
	 * buf[0..len). Returns 1 if it named it, else 0. */
	int (*thread_name)(struct pt_rt *rt, pid_t nstid, char *buf, size_t len);
};

#endif
