/* /debug/pprof/symbol: pprof's symbolz. google/pprof POSTs the addresses
 * of locations it could not name; a GET carries them in the raw query.
 * The addresses are parsed on the loop thread into an array the job owns
 * (with the names the sampler finds), the answer written on a work
 * thread. */
#include "sidecar/profiles/symbol.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"
#include "ptrace/sessions/symbols.h"
#include "sidecar/server/http.h"
#include "sidecar/server/params.h"
#include "sidecar/server/job.h"
#include "sidecar/server/query.h"
#include "sidecar/server/reply.h"
#include "sidecar/server/server.h"
#include "sidecar/server/util.h"

#define MAX_SYMBOL_ADDRS 100000

struct symbol_job {
	struct sc_job job;
	uint64_t *addrs;        /* the sampler's input, ours to free */
};

static enum sc_job_next symbol_done(struct sc_job *j)
{
	const char *m;

	if (!j->req.err)
		return SC_JOB_ENCODE;
	m = sc_job_strerror(j->req.err);
	return sc_job_error(j, 500, m ? m : sc_strerror(j->req.err));
}

static void symbol_encode(struct sc_job *j, struct sc_reply *r)
{
	struct symbol_job *s = SC_CONTAINER_OF(j, struct symbol_job, job);
	struct base_buf b;
	size_t len;
	char *text;

	/* Unknown addresses are left out, as Go leaves them out; so is a line
	 * that would take the answer past its cap (measured first: the
	 * buffer's error sticks, and the lines after it may still fit). */
	base_buf_init(&b, 64u << 20);
	base_buf_printf(&b, "num_symbols: 1\n");
	for (size_t i = 0; i < j->req.naddrs; i++) {
		const char *name = j->req.names[i];
		int n;

		if (!name)
			continue;
		n = snprintf(NULL, 0, "%#" PRIx64 " %s\n", s->addrs[i], name);
		if (n < 0 || (size_t)n > b.max - b.len)
			continue;
		base_buf_printf(&b, "%#" PRIx64 " %s\n", s->addrs[i], name);
	}
	if (base_buf_take(&b, &text, &len)) {
		sc_reply_error(r, 500, "out of memory");
		return;
	}
	sc_reply_body(r, 200, SC_TEXT_PLAIN, text, len);
}

static void symbol_release(struct sc_job *j)
{
	struct symbol_job *s = SC_CONTAINER_OF(j, struct symbol_job, job);

	if (j->req.names)
		for (size_t i = 0; i < j->req.naddrs; i++)
			base_free(j->req.names[i]);
	base_free(j->req.names);
	j->req.names = NULL;
	base_free(s->addrs);
	s->addrs = NULL;
}

static const struct sc_job_ops symbol_ops = { symbol_done, symbol_encode, symbol_release };

void sc_profile_symbol(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	/* pprof's symbolz puts addresses in the raw query: a pid= for another
	 * process comes only with POST (body = addresses). */
	int post = !strcmp(req->method, "POST");
	const char *in = post ? req->body : req->query;
	size_t len = post ? req->body_len : strlen(req->query);
	size_t max = len / 2 + 1 < MAX_SYMBOL_ADDRS ? len / 2 + 1 : MAX_SYMBOL_ADDRS;
	struct symbol_job *s;
	struct sc_job *j;
	uint64_t *addrs;
	int n;

	if (!(addrs = base_calloc(max, sizeof(*addrs)))) {
		sc_go_error(c, 500, "out of memory");
		return;
	}
	n = sc_parse_symbol_addrs(in, len, addrs, max);
	if (n <= 0) {
		base_free(addrs);
		if (n == 0)
			sc_http_respond(c, 200, SC_TEXT_PLAIN, "num_symbols: 1\n", 15);
		else
			sc_go_error(c, 400, n == -E2BIG ? "too many addresses" : "malformed address list");
		return;
	}
	if (!(j = sc_job_new(sc_server_jobs(srv), c, req, p, &symbol_ops, sizeof(*s)))) {
		base_free(addrs);
		return;
	}
	s = SC_CONTAINER_OF(j, struct symbol_job, job);
	s->addrs = addrs;
	j->req.kind = &pt_kind_symbols;
	j->req.pid = p->target.pid;
	j->req.addrs = addrs;
	j->req.naddrs = (size_t)n;
	sc_job_submit(j);
}
