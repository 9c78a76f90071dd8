/* format=flamegraph|speedscope|collapsed (see formats.h): the pprof
 * builder's stacks through encoder/flame.c, with the headers each form
 * needs (the page opens in the browser; speedscope's file downloads;
 * folded stacks are plain text). Any thread (a work thread's encoding). */
#include "sidecar/server/formats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "encoder/pprof.h"
#include "sidecar/server/log.h"
#include "sidecar/server/query.h"
#include "sidecar/server/util.h"

/* The sample type sample_index= names (a type's name or its index), the
 * default when empty; -1 when it names none. */
static long type_of(const struct enc_flame *f, const char *want)
{
	char *end;
	long i;

	if (!want[0])
		return (long)f->dflt;
	for (size_t k = 0; k < f->ntypes; k++)
		if (!strcmp(f->types[k].name, want))
			return (long)k;
	i = strtol(want, &end, 10);
	return !*end && i >= 0 && (size_t)i < f->ntypes ? i : -1;
}

static void no_such_type(struct sc_formatted *out, const struct enc_flame *f, const char *want)
{
	size_t n = (size_t)snprintf(out->msg, sizeof(out->msg), "sample_index=%s: this profile's sample "
				    "types are", want);

	for (size_t k = 0; k < f->ntypes && n < sizeof(out->msg); k++)
		n += (size_t)snprintf(out->msg + n, sizeof(out->msg) - n, "%s %s", k ? "," : "",
				      f->types[k].name);
	out->status = 400;
}

void sc_formats_encode(struct enc_pprof *e, int format, const char *filename, const char *subject,
		       const char *sample_index, size_t max, struct sc_formatted *out)
{
	struct enc_pprof_flame x;
	char title[192];
	long type;
	int err;

	memset(out, 0, sizeof(*out));
	out->status = 500;
	snprintf(title, sizeof(title), "%s of %s", filename, subject[0] ? subject : "the target");
	if (enc_pprof_flame(e, title, &x)) {
		snprintf(out->msg, sizeof(out->msg), "out of memory");
		return;
	}
	/* sample_index=: the type shown first (the page, speedscope's active
	 * profile), the one type of folded stacks */
	if ((type = type_of(&x.f, sample_index)) < 0) {
		no_such_type(out, &x.f, sample_index);
		enc_pprof_flame_free(&x);
		return;
	}
	x.f.dflt = (size_t)type;
	switch (format) {
	case SC_FORMAT_FLAMEGRAPH:
		err = enc_flame_html(&x.f, max, &out->body, &out->len);
		snprintf(out->headers, sizeof(out->headers), "Content-Type: text/html; charset=utf-8\r\n");
		break;
	case SC_FORMAT_SPEEDSCOPE:
		err = enc_flame_speedscope(&x.f, "podprof@" PODPROF_VERSION, max, &out->body,
					   &out->len);
		snprintf(out->headers, sizeof(out->headers), "Content-Type: application/json\r\n"
			 "Content-Disposition: attachment; filename=\"%s.speedscope.json\"\r\n", filename);
		break;
	default:
		err = enc_flame_collapsed(&x.f, (size_t)type, max, &out->body, &out->len);
		snprintf(out->headers, sizeof(out->headers), "Content-Type: text/plain; charset=utf-8\r\n");
		break;
	}
	enc_pprof_flame_free(&x);
	if (err) {
		log_error("%s: encoding format=%d failed: %s", filename, format, sc_strerror(err));
		snprintf(out->msg, sizeof(out->msg), err == -E2BIG ? "profile too large" : "failed to encode profile");
		return;
	}
	out->status = 200;
}
