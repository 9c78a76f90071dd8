/* A pprof profile builder. IDs of mappings, locations and functions are
 * handed out 1..n in insertion order, string 0 is "", and the output is the
 * gzip-compressed profile.proto that every pprof client reads. One builder is
 * used by one thread at a time. */
#ifndef ENC_PPROF_H
#define ENC_PPROF_H

#include <stddef.h>
#include <stdint.h>

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

/* Serializes and gzips into a new buffer (the caller frees it with
 * base_free) of at most max bytes. Returns 0, -E2BIG, -ENOMEM or -EIO. */
int enc_pprof_encode(struct enc_pprof *p, size_t max, uint8_t **out, size_t *len);

#endif
