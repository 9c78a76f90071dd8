/* Profiles for people without Go: the stacks of a profile as folded
 * ("collapsed") lines, as speedscope's file format, and as one
 * self-contained interactive flame graph page. The input is a neutral
 * description (a pprof builder gives one: enc_pprof_flame); this module
 * knows nothing of the sampler. Any thread; no shared state. */
#ifndef ENC_FLAME_H
#define ENC_FLAME_H

#include <stddef.h>
#include <stdint.h>

/* The most sample types a description may have (pprof's profiles have
 * four at most): more is -EINVAL. */
#define ENC_FLAME_MAX_TYPES 64

struct enc_flame_type {
	const char *name, *unit;     /* pprof's sample type: "cpu", "nanoseconds" */
};

struct enc_flame_stack {
	uint32_t first, n;           /* frames[first..first+n): root first */
};

struct enc_flame {
	const char *title;           /* what was profiled, for a page's heading */
	const struct enc_flame_type *types;
	size_t ntypes, dflt;         /* dflt: the type shown first */
	const char *const *comments; /* the profile's comments */
	size_t ncomments;
	const char *const *names;    /* frame names */
	size_t nnames;
	const uint32_t *frames;      /* indices into names */
	const struct enc_flame_stack *stacks;
	size_t nstacks;
	const int64_t *values;       /* nstacks x ntypes */
};

/* Folded stacks of type t: "root;caller;...;leaf value\n" per distinct
 * stack (identical ones summed), values > 0 only; ';' in a name becomes ':'
 * and line breaks spaces (the format has no escaping). Into a new buffer
 * (the caller frees it with base_free) of at most max bytes. Returns 0,
 * -E2BIG past max, or -ENOMEM; *out is NULL on failure. */
int enc_flame_collapsed(const struct enc_flame *f, size_t t, size_t max, char **out, size_t *len);

/* speedscope's file format (its schema: $schema, shared.frames, profiles):
 * one sampled profile per sample type, the default one active; weights
 * > 0 only (speedscope refuses others). Returns and owns as
 * enc_flame_collapsed. */
int enc_flame_speedscope(const struct enc_flame *f, const char *exporter, size_t max, char **out,
			 size_t *len);

/* Nodes narrower than this share of every type's total are left out of the
 * page (said on it): they would be under a pixel unless zoomed far in. */
#define ENC_FLAME_MIN_SHARE 1e-5

/* The flame graph page: one HTML document with its script, style and data
 * inside (it asks nothing of any server): the stacks merged into a tree
 * (of a change over a window, its growth only: where values fell is not
 * drawn, and the page says so),
 * click to zoom and back, search with the matches' share, hover with value
 * and percent, a chooser of the sample type, the title and comments.
 * Returns and owns as enc_flame_collapsed. */
int enc_flame_html(const struct enc_flame *f, size_t max, char **out, size_t *len);

#endif
