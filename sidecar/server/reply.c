/* Go's answer shapes (see reply.h). Any thread, but for sc_go_error (the
 * loop's: it writes to a connection). */
#include "sidecar/server/reply.h"

#include <stdint.h>
#include <stdio.h>

#include "base/mem.h"
#include "encoder/pprof.h"
#include "sidecar/server/formats.h"
#include "sidecar/server/http.h"
#include "sidecar/server/log.h"
#include "sidecar/server/util.h"

static const char GO_ERR[] = "Content-Type: text/plain; charset=utf-8\r\nX-Go-Pprof: 1\r\n";
static const char GO_ERR_RETRY[] = "Content-Type: text/plain; charset=utf-8\r\nX-Go-Pprof: 1\r\n"
				   "Retry-After: 5\r\n";

static void go_error_body(int status, const char *msg, const char **headers, char *body,
			  size_t size, int *len)
{
	*len = snprintf(body, size, "%s\n", msg);
	if (*len >= (int)size)
		*len = (int)size - 1;
	/* A 503 is a "come back soon": say when, as scrapers honour it. */
	*headers = status == 503 ? GO_ERR_RETRY : GO_ERR;
}

void sc_go_error(struct sc_conn *c, int status, const char *msg)
{
	const char *headers;
	char body[512];
	int n;

	go_error_body(status, msg, &headers, body, sizeof(body), &n);
	sc_http_respond(c, status, headers, body, (size_t)n);
}

void sc_reply_body(struct sc_reply *r, int status, const char *headers, void *body, size_t len)
{
	base_free(r->body);
	r->status = status;
	snprintf(r->headers, sizeof(r->headers), "%s", headers ? headers : "");
	r->body = body;
	r->len = body ? len : 0;
}

void sc_reply_error(struct sc_reply *r, int status, const char *msg)
{
	const char *headers;
	char body[512], *copy;
	int n;

	go_error_body(status, msg, &headers, body, sizeof(body), &n);
	copy = base_memdup(body, (size_t)n + 1);
	sc_reply_body(r, status, headers, copy, (size_t)n);
	r->text[0] = '\0';
	if (!copy)   /* out of memory: the words go out all the same */
		snprintf(r->text, sizeof(r->text), "%.*s\n", (int)sizeof(r->text) - 2, msg);
}

void sc_reply_pprof(struct sc_reply *r, struct enc_pprof *e, int err, const char *filename)
{
	char headers[160];
	uint8_t *body = NULL;
	size_t len = 0;

	if (!err && r->format) {
		struct sc_formatted f;

		sc_formats_encode(e, r->format, filename, r->subject, r->sample_index, SC_MAX_PROFILE_BYTES, &f);
		if (f.status == 200)
			sc_reply_body(r, 200, f.headers, f.body, f.len);
		else
			sc_reply_error(r, f.status, f.msg);
		return;
	}
	if (!err)
		err = enc_pprof_encode(e, SC_MAX_PROFILE_BYTES, &body, &len);
	if (err) {
		log_error("pprof: encoding %s failed: %s", filename, sc_strerror(err));
		sc_reply_error(r, 500, "failed to encode profile");
		return;
	}
	snprintf(headers, sizeof(headers), "Content-Type: application/octet-stream\r\n"
		 "Content-Disposition: attachment; filename=\"%s\"\r\n", filename);
	sc_reply_body(r, 200, headers, body, len);
}
