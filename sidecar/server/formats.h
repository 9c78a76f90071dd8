/* A profile with stacks in a form people open without Go (format=):
 * the flame graph page, speedscope's file, folded stacks (encoder/flame.h
 * writes them from the pprof builder's stacks). Any thread. */
#ifndef SC_FORMATS_H
#define SC_FORMATS_H

#include <stddef.h>

struct enc_pprof;

/* What a form gives: 200 with body (base_malloc'd, the caller's) and the
 * headers it goes with, or 400 (a sample_index= the profile has no type
 * of) or 500 (an encoding failure) with msg. */
struct sc_formatted {
	int status;
	char *body;
	size_t len;
	char headers[200];
	char msg[256];
};

/* e's profile in form `format` (enum sc_format, query.h). filename: the
 * profile's name ("profile", "heap"); subject: what was profiled, for a
 * page's title; sample_index: the type shown first, and the one folded
 * stacks take ("": the profile's default); max: the most bytes the body may take. */
void sc_formats_encode(struct enc_pprof *e, int format, const char *filename, const char *subject,
		       const char *sample_index, size_t max, struct sc_formatted *out);

#endif
