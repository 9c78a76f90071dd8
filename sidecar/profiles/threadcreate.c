/* /debug/pprof/threadcreate: the stacks that created threads (clone events
 * seen while attached, from the first request on), and the live threads
 * whose creation was not seen under their start routines, labelled
 * creation="not seen" (ptrace/sessions/threadcreate.c). */
#include "sidecar/profiles/threadcreate.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "encoder/pprof.h"
#include "ptrace/sessions/threadcreate.h"
#include "sidecar/server/http.h"
#include "sidecar/server/params.h"
#include "sidecar/server/job.h"
#include "sidecar/server/reply.h"
#include "sidecar/server/server.h"
#include "sidecar/server/stacks.h"
#include "sidecar/server/util.h"

struct threadcreate_job {
	struct sc_job job;
	int debug;
	int delta;      /* seconds=: the creations within the window */
};

static const struct sc_stack_value tc_values[] = { { "threadcreate", "count", SC_COL_0 } };
static const struct sc_stack_spec tc_spec = {
	tc_values, 1, SC_LABEL_THREAD | SC_LABEL_TID | SC_LABEL_CREATION,
};

static int build(struct enc_pprof *e, const struct pt_profile *pr, pid_t pid)
{
	struct sc_stacks_info in;
	char comment[384];
	int err;

	sc_stacks_info(pr, &in);
	if ((err = sc_stacks_types(e, &tc_spec)) ||
	    (err = enc_pprof_period(e, "threadcreate", "count", 1)))
		return err;
	enc_pprof_time(e, (int64_t)in.time_ns, 0);
	snprintf(comment, sizeof(comment),
		 "podprof: threads of pid %d created under each stack (the parent's stack at each "
		 "clone seen while attached, since the first threadcreate request); live threads "
		 "whose creation was not seen appear under their start routine, labelled "
		 "creation=\"not seen\"", (int)pid);
	if ((err = enc_pprof_comment(e, comment)))
		return err;
	if ((err = sc_stacks_note_cut(e, pr)))
		return err;
	return sc_stacks_pprof(e, pr, &tc_spec);
}

static enum sc_job_next threadcreate_done(struct sc_job *j)
{
	return sc_job_check(j, NULL);
}

static void threadcreate_encode(struct sc_job *j, struct sc_reply *r)
{
	struct threadcreate_job *t = SC_CONTAINER_OF(j, struct threadcreate_job, job);
	struct enc_pprof *e = NULL;
	char *text;
	size_t len;
	int err;

	if (!t->debug) {
		if (!(err = enc_pprof_new(&e)))
			err = build(e, j->req.profile, j->req.pid);
		sc_reply_pprof(r, e, err, t->delta ? "threadcreate-delta" : "threadcreate");
		enc_pprof_free(e);
		return;
	}
	err = sc_stacks_text(j->req.profile, "threadcreate", 1, SC_MAX_PROFILE_BYTES, &text, &len);
	if (err)
		sc_reply_error(r, 500, err == -E2BIG ? "profile too large" : "out of memory");
	else
		sc_reply_body(r, 200, SC_TEXT_PLAIN, text, len);
}

static const struct sc_job_ops threadcreate_ops = { threadcreate_done, threadcreate_encode, NULL };

void sc_profile_threadcreate(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	struct threadcreate_job *t;
	struct sc_job *j;

	if (!(j = sc_job_new(sc_server_jobs(srv), c, req, p, &threadcreate_ops, sizeof(*t))))
		return;
	t = SC_CONTAINER_OF(j, struct threadcreate_job, job);
	t->debug = p->debug != 0;
	t->delta = p->seconds > 0;
	j->req.kind = &pt_kind_threadcreate;
	sc_job_target(j, &p->target);
	j->req.duration_ns = (uint64_t)p->seconds * 1000000000ull;
	sc_job_submit(j);
}
