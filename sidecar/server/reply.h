/* Answers in Go's shapes: its error (serveError), a body built off the
 * loop thread (struct sc_reply, sent later by the loop), a pprof download.
 * sc_go_error: loop thread; the sc_reply functions: any thread. */
#ifndef SC_REPLY_H
#define SC_REPLY_H

#include <stddef.h>

struct enc_pprof;
struct sc_conn;

/* The largest body a profile may be encoded to (before and after gzip). */
#define SC_MAX_PROFILE_BYTES (256u << 20)
#define SC_TEXT_PLAIN "Content-Type: text/plain; charset=utf-8\r\n"

/* Go's serveError: status, text/plain, X-Go-Pprof: 1, msg and a newline
 * (a 503 also says Retry-After). Loop thread. */
void sc_go_error(struct sc_conn *c, int status, const char *msg);

/* A response built off the loop thread, sent by the loop. */
struct sc_reply {
	int status;
	char headers[256];      /* "Name: value\r\n"... */
	void *body;             /* base_malloc'd; owned by the reply until sent */
	size_t len;
	/* An error's text when no memory was left to copy it into body (sent
	 * as the body then), else "". */
	char text[160];
	/* A profile's form (enum sc_format, query.h: set from the request's
	 * format= by sc_job_new), the sample type collapsed output takes
	 * (sample_index=, "" the default) and what was profiled, for a page's
	 * title ("pid 42 (app)", filled before encoding). */
	int format;
	char sample_index[64];
	char subject[96];
};

/* Each fills r, freeing what r held; never fails (on OOM the body is left
 * empty). sc_reply_error: Go's serveError, as sc_go_error. sc_reply_body:
 * takes body. sc_reply_pprof: if err is 0, encodes e (gzip, at most
 * SC_MAX_PROFILE_BYTES) as a download named filename; on err or an
 * encoding failure logs and answers 500. */
void sc_reply_error(struct sc_reply *r, int status, const char *msg);
void sc_reply_body(struct sc_reply *r, int status, const char *headers, void *body, size_t len);
/* With r->format set, the profile goes out in that form (sidecar/server/formats.c)
 * instead of pprof's. */
void sc_reply_pprof(struct sc_reply *r, struct enc_pprof *e, int err, const char *filename);

#endif
