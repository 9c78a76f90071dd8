/* The one translation of the sampler's stacks (struct pt_profile) into
 * the encoders' terms: pprof mappings, locations, functions, samples and
 * labels for every endpoint that carries stacks (each says which sample
 * types it wants and from which of the sampler's value columns), and the
 * neutral description encoder/text.h prints. Nothing else in sidecar/
 * reads a pt_profile's fields. Any thread (the profiles call it on a work
 * thread); no shared state. */
#ifndef SC_STACKS_H
#define SC_STACKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/profile/profile.h"

struct enc_pprof;
struct pt_profile;

/* The value columns each sampler sample carries (their meaning is the
 * session kind's: see ptrace/sampler/sampler.h). */
enum sc_stack_column {
	SC_COL_0, SC_COL_1, SC_COL_2, SC_COL_3,
	SC_COL_COUNT = SC_COL_0,    /* CPU, dump: samples (ticks, or 1 per thread) */
	SC_COL_CPU_NS = SC_COL_1,   /* CPU: CPU time those samples stand for */
};

/* One pprof sample type and the column that fills it. */
struct sc_stack_value {
	const char *type, *unit;
	enum sc_stack_column column;
};

/* Labels a sample may carry, always in this order (pprof -tagfocus). */
#define SC_LABEL_THREAD  0x1u   /* thread name, "?" if unknown */
#define SC_LABEL_TID     0x2u
#define SC_LABEL_STATE   0x4u   /* "running", "sleeping", ... */
#define SC_LABEL_SYSCALL 0x8u   /* only on samples taken inside a system call */
#define SC_LABEL_CREATION 0x10u  /* "creation": "not seen" on threads whose creation was not seen */
#define SC_LABEL_BYTES   0x20u   /* heap with stacks: "bytes", column 1 / column 0 (Go's
                                  * alloc_space / alloc_objects: the block size) */
#define SC_LABEL_GO      0x40u   /* a Go goroutine's pprof labels, as Go's profiles carry them */
#define SC_MAX_LABELS    80      /* labels on one sample at most */
/* Not a label: a leaf frame "syscall <name>" under samples taken inside a
 * system call (a stable synthetic address per system call, no mapping). */
#define SC_LEAF_SYSCALL  0x100u

struct sc_stack_spec {
	const struct sc_stack_value *values;
	size_t nvalues;
	unsigned labels;        /* SC_LABEL_* */
};

/* What a profile says about itself, for period, time and comments. */
struct sc_stacks_info {
	uint64_t time_ns, duration_ns;
	int hz;                       /* CPU: the rate asked for */
	size_t nsamples;              /* distinct stacks (a dump: threads) */
	uint64_t thread_samples, dropped_stacks;
	uint64_t threads_stopped;     /* a dump: threads stopped, the others cached */
	struct pt_profile_allocs alloc;   /* heap and allocs: the allocation records */
};

/* Fills *out from pr. Never fails. */
void sc_stacks_info(const struct pt_profile *pr, struct sc_stacks_info *out);

/* "pid N" for a profile of process pid, "K processes" for one of several
 * (comments), in buf; returns buf. */
const char *sc_stacks_whose(const struct pt_profile *pr, pid_t pid, char *buf, size_t len);

/* What pr lacks, as comments: each line of its note (a runtime's frames
 * missing, and why: "podprof: python: ..."); then, for a profile of
 * several processes, comments naming them, with what cut a process's part
 * short or kept it out; else a comment when pr's window was cut short by
 * its target (it exited or exec'd): the profile holds what was gathered
 * until then. Returns 0 or -ENOMEM. */
int sc_stacks_note_cut(struct enc_pprof *e, const struct pt_profile *pr);

/* Declares spec's sample types on e, in order. Call it first, before the
 * period and comments: strings are numbered as they are first used, and
 * this order keeps the bytes podprof has always served. Returns 0 or
 * -ENOMEM. */
int sc_stacks_types(struct enc_pprof *e, const struct sc_stack_spec *spec);

/* Adds pr's mappings (each with its build ID and has_functions, since
 * every location carries a name), its locations (non-zero addresses, one
 * function each) and one sample per stack, valued and labelled per spec,
 * to e. Returns 0, -ENOMEM or -EINVAL (a value count that does not match
 * the sample types). */
int sc_stacks_pprof(struct enc_pprof *e, const struct pt_profile *pr,
		    const struct sc_stack_spec *spec);

/* The text formats of a stack profile named `name` ("goroutine"): debug 1
 * is the count profile, 2 or more the panic-style dump (encoder/text.h),
 * into a new buffer (the caller frees it with base_free) of at most max
 * bytes. Returns 0, -E2BIG past max, or -ENOMEM. */
int sc_stacks_text(const struct pt_profile *pr, const char *name, int debug, size_t max,
		   char **out, size_t *len);

/* A Go program's goroutine dump (pr->goroutines set), debug 1 or 2, in
 * Go's own text (encoder/gotext.h). Returns as sc_stacks_text. */
int sc_stacks_go_text(const struct pt_profile *pr, int debug, size_t max, char **out, size_t *len);
/* heap and allocs with allocation stacks, debug>=1: Go's heap text
 * (encoder/text.h) of the estimated values, headed "@ heap/2" (Go's
 * header for a rate of 1: pprof reads them as they are, unscaled again).
 * Returns as sc_stacks_text. */
int sc_stacks_heap_text(const struct pt_profile *pr, size_t max, char **out, size_t *len);
/* block and mutex, debug>=1: Go's contention text (encoder/text.h), the
 * delay from value column `delay`, the count from column `count`. Returns
 * as sc_stacks_text. */
int sc_stacks_contention_text(const struct pt_profile *pr, const char *kind,
			      enum sc_stack_column count, enum sc_stack_column delay, size_t max,
			      char **out, size_t *len);

#endif
