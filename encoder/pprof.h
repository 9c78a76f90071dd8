/* A pprof profile builder. IDs of mappings, locations and functions are
 * handed out 1..n in insertion order, string 0 is "", and the output is the
 * gzip-compressed profile.proto that every pprof client reads. One builder is
 * used by one thread at a time. */
#ifndef ENC_PPROF_H
#define ENC_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "encoder/flame.h"

struct enc_pprof;

/* Returns 0 or -ENOMEM. */
int enc_pprof_new(struct enc_pprof **out);
void enc_pprof_free(struct enc_pprof *p);

/* Each returns 0 (or an ID > 0) on success, negative errno on failure. */
int enc_pprof_sample_type(struct enc_pprof *p, const char *type, const char *unit);
int enc_pprof_period(struct enc_pprof *p, const char *type, const char *unit, int64_t period);
void enc_pprof_time(struct enc_pprof *p, int64_t time_ns, int64_t duration_ns);
/* The sample type pprof shows by default (a type already declared).
 * Returns 0 or -ENOMEM. */
int enc_pprof_default_type(struct enc_pprof *p, const char *type);
int enc_pprof_comment(struct enc_pprof *p, const char *text);
int64_t enc_pprof_mapping(struct enc_pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
			  const char *file, const char *build_id, int has_functions);
/* Functions are deduplicated by name. */
int64_t enc_pprof_function(struct enc_pprof *p, const char *name);
/* A function of source code: deduplicated by name, file and first line
 * (file NULL: none, start_line 0: unknown). Compiled code (`compiled`, or
 * no file) has its name as its system name too, as Go's own profiles give
 * it; interpreted code's is left empty, so that pprof does not demangle the
 * name (it would blank out Python's "<module>"). Returns its ID or
 * -ENOMEM. */
int64_t enc_pprof_function_src(struct enc_pprof *p, const char *name, const char *file,
			       int64_t start_line, int compiled);
/* A function whose system name (the name with its signature, as its
 * runtime's tools spell it: "Hot.work(I)J") differs from its name:
 * deduplicated by both, file and first line. Returns its ID or -ENOMEM. */
int64_t enc_pprof_function_sys(struct enc_pprof *p, const char *name, const char *system,
			       const char *file, int64_t start_line);
int64_t enc_pprof_location(struct enc_pprof *p, uint64_t mapping_id, uint64_t address,
			   uint64_t function_id);
/* A location whose code several functions share, inlined one into the
 * next: one Line per function_ids[0..n), the innermost (the function whose
 * code is at address) first, as Go's own profiles give them. The function
 * ids must exist. Returns the location's ID or -ENOMEM. */
int64_t enc_pprof_location_lines(struct enc_pprof *p, uint64_t mapping_id, uint64_t address,
				 const uint64_t *function_ids, size_t n);
/* The same with a line number per Line (lines NULL: all 0, unknown), for
 * `go tool pprof -lines` and -list. */
int64_t enc_pprof_location_src(struct enc_pprof *p, uint64_t mapping_id, uint64_t address,
			       const uint64_t *function_ids, const int64_t *lines, size_t n);
/* A sample label: a string (str non-NULL) or a number. */
struct enc_label {
	const char *key;
	const char *str;
	int64_t num;
	const char *unit;   /* for numbers; may be NULL */
};

/* loc_ids leaf first; nv must equal the number of sample types. Returns 0,
 * -EINVAL (unknown location, wrong value count) or -ENOMEM. */
int enc_pprof_sample(struct enc_pprof *p, const uint64_t *loc_ids, size_t n, const int64_t *v,
		     size_t nv);
/* The same with labels. */
int enc_pprof_sample_labels(struct enc_pprof *p, const uint64_t *loc_ids, size_t n,
			    const int64_t *v, size_t nv, const struct enc_label *labels, size_t nl);

/* The builder's stacks for flame.h's writers: its sample types (the
 * default one first shown), comments, and per sample its functions root
 * first (each function of an inlined call a frame, the outermost first);
 * a sample labelled with a process (pid, process) under a root frame
 * "<process> (pid N)". `f` points into the builder, which must outlive it,
 * and into arrays of its own: enc_pprof_flame_free. Returns 0 or -ENOMEM. */
struct enc_pprof_flame {
	struct enc_flame f;
	struct enc_flame_type *types;
	const char **comments, **names;
	uint32_t *frames;
	struct enc_flame_stack *stacks;
	int64_t *values;
	char **procs;            /* the process frames' names */
	size_t nprocs;
};
int enc_pprof_flame(const struct enc_pprof *p, const char *title, struct enc_pprof_flame *out);
void enc_pprof_flame_free(struct enc_pprof_flame *x);

/* Serializes and gzips into a new buffer (the caller frees it with
 * base_free) of at most max bytes. Returns 0, -E2BIG, -ENOMEM or -EIO. */
int enc_pprof_encode(struct enc_pprof *p, size_t max, uint8_t **out, size_t *len);

#endif
