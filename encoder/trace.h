/* Trace writers: a per-thread timeline of a native process as
 *   - a Go 1.19 execution trace ("go 1.19 trace"), which `go tool trace`
 *     opens: one P per OS thread (dense ids), one goroutine per thread (a
 *     reused tid gets a new goroutine id), thread states as goroutine
 *     transitions, CPU samples with stacks, RSS as the heap counter;
 *   - Chrome Trace Event JSON (object form): thread names (M), state slices
 *     (X), RSS counter (C), per-thread samples as V8 Profile/ProfileChunk
 *     events, which Perfetto, speedscope and chrome://tracing read.
 * The input is this module's own neutral form (encoder/ knows no sampler
 * type). Any thread; one call at a time per input. */
#ifndef ENC_TRACE_H
#define ENC_TRACE_H

#include <stddef.h>
#include <stdint.h>

enum enc_tr_state {
	ENC_TR_RUNNING = 1,  /* on a core */
	ENC_TR_RUNNABLE,     /* waiting for a core */
	ENC_TR_SYNC,         /* blocked on a lock or condition (futex) */
	ENC_TR_NET,          /* blocked waiting for I/O readiness or a peer */
	ENC_TR_SLEEP,        /* sleeping */
	ENC_TR_SYSCALL,      /* blocked in another system call */
	ENC_TR_STOPPED,      /* stopped (job control) */
};
enum enc_tr_kind {
	ENC_TR_STATE = 1,    /* the thread enters `state` */
	ENC_TR_SAMPLE,       /* a CPU sample of the thread, with `stack` */
	ENC_TR_EXIT,         /* the thread ended */
	ENC_TR_RSS,          /* the process's resident memory is `value` bytes */
};

struct enc_trace_frame {
	uint64_t pc;         /* nonzero; the same pc names the same function, or the same run of
	                      * functions inlined one into the next (a frame each, innermost first) */
	const char *fn;
	const char *file;    /* may be "" */
	uint32_t line;       /* a source line of file (interpreted code), 0: none */
};
struct enc_trace_stack {
	const struct enc_trace_frame *frames;   /* leaf first */
	uint32_t n;
};
struct enc_trace_thread {
	int64_t tid;
	int64_t pid;         /* a trace of several processes: the thread's; 0: the trace's */
	const char *process; /* its process's name, with pid */
	const char *name;
	uint64_t start_ns;   /* when first seen (since the trace began) */
	int created;         /* its creation was seen at start_ns; else it was there at the start */
};
struct enc_trace_event {
	uint64_t t_ns;       /* since the trace began */
	uint64_t value;      /* RSS */
	uint32_t thread;     /* index into threads (not for RSS) */
	int32_t stack;       /* index into stacks, or -1 */
	const char *syscall; /* STATE: the system call's name, or NULL */
	uint8_t kind;        /* enum enc_tr_kind */
	uint8_t state;       /* enum enc_tr_state */
};
struct enc_trace {
	int64_t pid;                 /* 0: a trace of several processes (their sums) */
	const char *process;         /* the process's name */
	uint64_t duration_ns;
	const struct enc_trace_thread *threads;
	size_t nthreads;
	const struct enc_trace_event *events;   /* in time order for each thread */
	size_t nevents;
	const struct enc_trace_stack *stacks;
	size_t nstacks;
};

/* Writes the Go 1.19 execution trace into a new buffer (the caller frees it
 * with base_free) of at most max bytes. Stacks deeper than the format allows (a record of at most
 * 2048 bytes) lose their outermost frames. Returns 0, -E2BIG (over max),
 * -EINVAL (an event names a thread or stack that does not exist) or
 * -ENOMEM. */
int enc_trace_go(const struct enc_trace *tr, size_t max, uint8_t **out, size_t *len);

#endif
