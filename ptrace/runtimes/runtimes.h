/* The language runtimes of one process (the table of runtimes.c, each row
 * a folder of ptrace/runtimes/ plugged in through ptrace/core/runtime.h):
 * which of them the process runs, and, for the mechanism, the calls that
 * put their frames into its samples. A capture slot holds each active
 * runtime's data of one stop (slot numbers are the mechanism's: one per
 * capture of a batch, and one for clone events). Sampler thread only. */
#ifndef PT_RUNTIMES_H
#define PT_RUNTIMES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/core/runtime.h"

struct pt_capture;
struct pt_runtimes;
struct pt_space;

/* Which runtimes may be read (bits: PT_RUNTIME_<NAME>). */
#define PT_RUNTIME_PYTHON 0x1u
#define PT_RUNTIME_GO     0x2u
#define PT_RUNTIME_JVM    0x4u

/* The runtimes of the process of `as`, those in `enabled` (none detected
 * yet), with nslots capture slots. Returns 0 or -ENOMEM. */
int pt_runtimes_new(struct pt_runtimes **out, struct pt_space *as, unsigned int enabled, int nslots);
/* NULL-safe. */
void pt_runtimes_free(struct pt_runtimes *rts);
/* A new program (exec): every runtime forgets it; detect again. */
void pt_runtimes_reset(struct pt_runtimes *rts);
/* Looks for the enabled runtimes not active yet in the process's maps and
 * modules (attach, exec). What a detection found worth logging is kept for
 * pt_runtimes_note. */
void pt_runtimes_detect(struct pt_runtimes *rts);
/* The note of the last detection that found a runtime (supported or not),
 * once: every later call returns NULL until a detection notes something
 * new. */
const char *pt_runtimes_note(struct pt_runtimes *rts);
/* What the last detection of the runtime named `name` found ("" if it
 * found nothing: the process does not run it), every time asked. */
const char *pt_runtimes_note_of(const struct pt_runtimes *rts, const char *name);
/* The runtimes' counts of samples merged (runtime.h's counts), per table
 * row: what a session takes at its start, to say at its end what its
 * samples lacked. */
#define PT_RUNTIMES_MAX 4
struct pt_runtimes_counts {
	uint64_t merged[PT_RUNTIMES_MAX], torn[PT_RUNTIMES_MAX];
};
void pt_runtimes_counts(const struct pt_runtimes *rts, struct pt_runtimes_counts *out);
/* What an answer of the process's stacks must say of the runtimes' frames
 * they lack, one line each (lines separated by '\n', none when nothing is
 * missing) into out[0..len): a runtime whose frames stand in samples that
 * the process runs but podprof cannot read (detection's note: which
 * release, why), and the samples since `since` (counts taken at the
 * session's start; NULL: since the process was found) whose frames a
 * runtime read only in part. */
void pt_runtimes_missing(const struct pt_runtimes *rts, const struct pt_runtimes_counts *since,
			 char *out, size_t len);
/* 1 if an active runtime reads frames in a thread's stop (its threads must
 * be sampled by stopping them), else 0. */
int pt_runtimes_read_in_stop(const struct pt_runtimes *rts);
/* 1 if any runtime is active. */
int pt_runtimes_active(const struct pt_runtimes *rts);

/* Before a batch of stops (threads running): the active runtimes look up
 * what they need for threads[0..n) (their nstid set). */
void pt_runtimes_prepare(struct pt_runtimes *rts, struct pt_rt_thread *const *threads, int n);
/* In a thread's stop, right after its stack was copied into cap: each
 * active runtime reads into capture slot `slot`. Returns 1 if a runtime
 * read anything, else 0. */
int pt_runtimes_capture(struct pt_runtimes *rts, int slot, struct pt_rt_thread *th,
			const struct pt_capture *cap);
/* Empties slot (a capture made without the runtimes: perf_event's). */
void pt_runtimes_clear(struct pt_runtimes *rts, int slot);
/* After the stop: frames[0..n) of capture cap with the runtimes' frames of
 * slot merged in, and a last frame for the labels of the code it ran (Go's
 * pprof labels), at most max. Returns the new count. cap's stack_used and
 * stack_short grow by what the runtimes read of its stack. */
int pt_runtimes_merge(struct pt_runtimes *rts, int slot, struct pt_capture *cap, uint64_t *frames,
		      int n, int max);
/* If token stands for labels (a merge's last frame), 1 with *kv their keys
 * and values alternately and *n pairs (owned by the runtime, valid until
 * its reset); else 0. */
int pt_runtimes_labels(struct pt_runtimes *rts, uint64_t token, const char *const **kv, size_t *n);
/* The frames a token stands for (pt_rt_is_token), innermost first, at
 * most max; strings owned by the runtime (valid until its reset). Returns
 * how many, 0 for an address that is no active runtime's token. */
int pt_runtimes_lines(struct pt_runtimes *rts, uint64_t token, struct pt_rt_line *out, int max);

/* The name an active runtime gave the thread the target knows as nstid
 * (a Java thread's), into buf[0..len). Returns 1 if one did, else 0. */
int pt_runtimes_thread_name(struct pt_runtimes *rts, pid_t nstid, char *buf, size_t len);

/* The state of the runtime named `name` ("go") if the process runs it
 * (detected and active), else NULL: for the sessions that read a
 * runtime's own units of work (a Go program's goroutines). */
struct pt_rt *pt_runtimes_get(struct pt_runtimes *rts, const char *name);
/* The reader of runtime `name` once detection ran, active or not (a
 * runtime found but not fully readable: what it did find), else NULL. */
struct pt_rt *pt_runtimes_found(struct pt_runtimes *rts, const char *name);
/* The name of the runtime whose token this is ("python"), or NULL. */
const char *pt_runtimes_token_name(uint64_t token);

#endif
