/* /debug/pprof/goroutine: a Go program's goroutines, read from its runtime
 * (ptrace/sessions/goroutines.c), or every thread of any other target (and
 * of a Go program with ?view=threads), now, in Go's three shapes (debug=0
 * pprof, 1 the count profile, 2 the panic-style dump). */
#include "sidecar/profiles/goroutine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "encoder/pprof.h"
#include "ptrace/proc/proc.h"
#include "ptrace/sessions/goroutines.h"
#include "ptrace/sessions/threads.h"
#include "sidecar/server/http.h"
#include "sidecar/server/params.h"
#include "sidecar/server/job.h"
#include "sidecar/server/reply.h"
#include "sidecar/server/server.h"
#include "sidecar/server/stacks.h"
#include "sidecar/server/util.h"

struct goroutine_job {
	struct sc_job job;
	int debug;      /* 0, 1 or 2 */
	int delta;      /* seconds=: the threads at the end less those at the start */
};

static const struct sc_stack_value dump_values[] = { { "goroutine", "count", SC_COL_COUNT } };
static const struct sc_stack_spec dump_spec = {
	dump_values, 1, SC_LABEL_THREAD | SC_LABEL_TID | SC_LABEL_STATE | SC_LABEL_SYSCALL,
};
/* A Go program's goroutines: Go's own labels, nothing of threads. */
static const struct sc_stack_spec go_spec = { dump_values, 1, SC_LABEL_GO };

static int build(struct enc_pprof *e, const struct pt_profile *pr, pid_t pid)
{
	struct sc_stacks_info in;
	char comment[256], whose[32];
	int err;

	sc_stacks_info(pr, &in);
	if ((err = sc_stacks_types(e, pr->goroutines ? &go_spec : &dump_spec)) ||
	    (err = enc_pprof_period(e, "goroutine", "count", 1)))
		return err;
	enc_pprof_time(e, (int64_t)in.time_ns, 0);
	if (pr->goroutines)
		snprintf(comment, sizeof(comment),
			 "podprof: the goroutines of %s, a Go program (%s), read from its runtime without "
			 "stopping it, one sample each; goroutines=%zu, %" PRIu64 " left out (they moved "
			 "while read); its threads: ?view=threads", sc_stacks_whose(pr, pid, whose, sizeof(whose)),
			 pr->go_version, in.nsamples, pr->goroutines_torn);
	else
		snprintf(comment, sizeof(comment),
			 "podprof: every thread of %s, one sample each; threads=%zu stopped=%" PRIu64
			 " (the others were blocked, unchanged since their last snapshot)",
			 sc_stacks_whose(pr, pid, whose, sizeof(whose)), in.nsamples, in.threads_stopped);
	if ((err = enc_pprof_comment(e, comment)))
		return err;
	if (pr->nprocs && (err = enc_pprof_comment(e, "podprof: several processes: every one's threads; "
						  "a Go program's goroutines: pid=N")))
		return err;
	if ((err = sc_stacks_note_cut(e, pr)))   /* with the note: a runtime the dump could not read */
		return err;
	return sc_stacks_pprof(e, pr, pr->goroutines ? &go_spec : &dump_spec);
}

static enum sc_job_next goroutine_done(struct sc_job *j)
{
	return sc_job_check(j, NULL);
}

static void goroutine_encode(struct sc_job *j, struct sc_reply *r)
{
	struct goroutine_job *g = SC_CONTAINER_OF(j, struct goroutine_job, job);
	struct enc_pprof *e = NULL;
	char *text;
	size_t len;
	int err;

	if (g->debug == 0) {
		if (!(err = enc_pprof_new(&e)))
			err = build(e, j->req.profile, j->req.pid);
		sc_reply_pprof(r, e, err, g->delta ? "goroutine-delta" : "goroutine");
		enc_pprof_free(e);
		return;
	}
	if (j->req.profile->goroutines)
		err = sc_stacks_go_text(j->req.profile, g->debug, SC_MAX_PROFILE_BYTES, &text, &len);
	else
		err = sc_stacks_text(j->req.profile, "goroutine", g->debug, SC_MAX_PROFILE_BYTES, &text,
				     &len);
	if (err)
		sc_reply_error(r, 500, err == -E2BIG ? "thread dump too large" : "out of memory");
	else
		sc_reply_body(r, 200, SC_TEXT_PLAIN, text, len);
}

static const struct sc_job_ops goroutine_ops = { goroutine_done, goroutine_encode, NULL };

void sc_profile_goroutine(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	struct goroutine_job *g;
	struct sc_job *j;

	if (!(j = sc_job_new(sc_server_jobs(srv), c, req, p, &goroutine_ops, sizeof(*g))))
		return;
	g = SC_CONTAINER_OF(j, struct goroutine_job, job);
	/* Go: any debug other than 0 is text, and only 2 (here: 2 or more)
	 * the dump. */
	g->debug = p->debug < 0 ? 1 : p->debug > 2 ? 2 : (int)p->debug;
	g->delta = p->seconds > 0;
	/* Several processes: each one's threads (a Go program's goroutines
	 * are one process's: pid=N). */
	j->req.kind = p->threads || p->target.procs.n ? &pt_kind_threads : &pt_kind_goroutines;
	sc_job_target(j, &p->target);
	j->req.duration_ns = (uint64_t)p->seconds * 1000000000ull;
	sc_job_submit(j);
}

int64_t sc_count_threads(struct sc_server *srv, pid_t pid)
{
	char path[64], buf[1024];
	struct pt_stat st;

	(void)srv;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, &st))
		return 0;
	return st.num_threads;
}
