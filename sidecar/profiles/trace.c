/* /debug/pprof/trace: a per-thread timeline (ptrace/sessions/trace.c) as a
 * Go 1.19 execution trace, which `go tool trace` opens, or with
 * ?format=json as Chrome Trace Event JSON (?gz=1: gzipped) for Perfetto,
 * speedscope and chrome://tracing. The request is read on the loop
 * thread; the trace is encoded on a work thread, from arrays of its own
 * that point into the job's timeline. */
#include "sidecar/profiles/trace.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "encoder/trace.h"
#include "encoder/trace_json.h"
#include "ptrace/proc/proc.h"
#include "ptrace/sessions/trace.h"
#include "sidecar/server/cfg.h"
#include "sidecar/server/http.h"
#include "sidecar/server/params.h"
#include "sidecar/server/job.h"
#include "sidecar/server/log.h"
#include "sidecar/server/reply.h"
#include "sidecar/server/server.h"
#include "sidecar/server/util.h"

_Static_assert((int)ENC_TR_RUNNING == (int)PT_TL_RUNNING &&
		       (int)ENC_TR_STOPPED == (int)PT_TL_STOPPED &&
		       (int)ENC_TR_STATE == (int)PT_TL_EV_STATE && (int)ENC_TR_RSS == (int)PT_TL_EV_RSS,
	       "the timeline's states and kinds keep their numbers in the encoder");

struct trace_job {
	struct sc_job job;
	int json, gz;
	char comm[64];
};

/* The neutral trace of pr (frames, stacks, threads and events point into
 * pr and into the arrays made here, freed by trace_free). */
struct trace_in {
	struct enc_trace tr;
	char (*procs)[96];           /* several processes: each one's "name (pid N)" */
	struct enc_trace_frame *frames;
	struct enc_trace_stack *stacks;
	struct enc_trace_thread *threads;
	struct enc_trace_event *events;
};

static void trace_free(struct trace_in *in)
{
	base_free(in->frames);
	base_free(in->stacks);
	base_free(in->threads);
	base_free(in->events);
	base_free(in->procs);
}

/* The name of process pid of a profile of several, for its threads. */
static const char *proc_name(const struct pt_profile *pr, struct trace_in *in, pid_t pid)
{
	for (size_t k = 0; k < pr->nprocs; k++)
		if (pr->procs[k].pid == pid)
			return in->procs[k];
	return "?";
}

static int trace_of(const struct pt_profile *pr, const char *comm, pid_t pid, struct trace_in *in)
{
	const struct pt_timeline *tl = pr->timeline;
	size_t nf = 0;

	memset(in, 0, sizeof(*in));
	for (size_t i = 0; i < pr->nsamples; i++)
		for (uint32_t k = 0; k < pr->samples[i].n; k++)
			nf += 1 + (size_t)pr->locs[pr->loc_ids[pr->samples[i].first + k]].nouter;
	in->frames = base_calloc(nf + 1, sizeof(*in->frames));
	in->stacks = base_calloc(pr->nsamples + 1, sizeof(*in->stacks));
	in->threads = base_calloc(tl->nthreads + 1, sizeof(*in->threads));
	in->events = base_calloc(tl->nevents + 1, sizeof(*in->events));
	in->procs = base_calloc(pr->nprocs + 1, sizeof(*in->procs));
	if (!in->frames || !in->stacks || !in->threads || !in->events || !in->procs)
		return -ENOMEM;
	for (size_t k = 0; k < pr->nprocs; k++)
		snprintf(in->procs[k], sizeof(in->procs[k]), "%s (pid %d)", pr->procs[k].name,
			 (int)pr->procs[k].pid);
	nf = 0;
	for (size_t i = 0; i < pr->nsamples; i++) {
		const struct pt_profile_sample *s = &pr->samples[i];
		size_t start = nf;

		/* Code the compiler inlined: a frame per function at the same
		 * pc, the innermost first, as Go's own traces have them. */
		for (uint32_t k = 0; k < s->n; k++) {
			const struct pt_profile_loc *l = &pr->locs[pr->loc_ids[s->first + k]];

			for (uint32_t j = 0; j <= l->nouter; j++)
				in->frames[nf++] = (struct enc_trace_frame){
					l->addr, j ? l->outer[j - 1] : l->name,
					l->file ? l->file[j] : l->map >= 0 ? pr->maps[l->map].path : "",
					l->line ? l->line[j] : 0 };
		}
		in->stacks[i] = (struct enc_trace_stack){ in->frames + start, (uint32_t)(nf - start) };
	}
	for (size_t i = 0; i < tl->nthreads; i++)
		in->threads[i] = (struct enc_trace_thread){
			.tid = tl->threads[i].tid, .pid = tl->threads[i].pid,
			.process = tl->threads[i].pid ? proc_name(pr, in, tl->threads[i].pid) : NULL,
			.name = tl->threads[i].name, .start_ns = tl->threads[i].start_ns,
			.created = tl->threads[i].created };
	for (size_t i = 0; i < tl->nevents; i++) {
		const struct pt_tl_event *e = &tl->events[i];

		in->events[i] = (struct enc_trace_event){
			.t_ns = e->t_ns, .value = e->value, .thread = e->thread, .stack = e->stack,
			.syscall = e->syscall >= 0 ? pt_syscall_name(e->syscall) : NULL,
			.kind = e->kind, .state = e->state };
		if (e->syscall >= 0 && !in->events[i].syscall)
			in->events[i].syscall = "?";
	}
	in->tr = (struct enc_trace){ pid, comm, tl->duration_ns, in->threads, tl->nthreads,
				     in->events, tl->nevents, in->stacks, pr->nsamples };
	return 0;
}

static enum sc_job_next trace_done(struct sc_job *j)
{
	if (j->req.err == 0 && (!j->req.profile || !j->req.profile->timeline))
		return sc_job_error(j, 500, "Could not enable tracing: no timeline");
	return sc_job_check(j, "Could not enable tracing: ");
}

static void trace_encode(struct sc_job *j, struct sc_reply *r)
{
	struct trace_job *t = SC_CONTAINER_OF(j, struct trace_job, job);
	struct trace_in in;
	uint8_t *body = NULL;
	size_t len = 0;
	int err = trace_of(j->req.profile, t->comm, j->req.profile->nprocs ? 0 : j->req.pid, &in);

	if (!err)
		err = t->json ? enc_trace_json(&in.tr, SC_MAX_PROFILE_BYTES, t->gz, &body, &len) :
				enc_trace_go(&in.tr, SC_MAX_PROFILE_BYTES, &body, &len);
	trace_free(&in);
	if (err) {
		log_error("trace: encoding failed: %s", sc_strerror(err));
		sc_reply_error(r, 500, err == -E2BIG ? "trace too large" : "failed to encode trace");
		return;
	}
	if (!t->json)
		sc_reply_body(r, 200, "Content-Type: application/octet-stream\r\n"
			      "Content-Disposition: attachment; filename=\"trace\"\r\n"
			      "X-Content-Type-Options: nosniff\r\n", body, len);
	else if (t->gz)
		sc_reply_body(r, 200, "Content-Type: application/gzip\r\n"
			      "Content-Disposition: attachment; filename=\"trace.json.gz\"\r\n", body, len);
	else
		sc_reply_body(r, 200, "Content-Type: application/json\r\n"
			      "Content-Disposition: attachment; filename=\"trace.json\"\r\n", body, len);
}

static const struct sc_job_ops trace_ops = { trace_done, trace_encode, NULL };

void sc_profile_trace(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	struct trace_job *t;
	struct sc_job *j;
	char path[64];

	if (!(j = sc_job_new(sc_server_jobs(srv), c, req, p, &trace_ops, sizeof(*t))))
		return;
	t = SC_CONTAINER_OF(j, struct trace_job, job);
	t->json = p->json;
	t->gz = p->gz;
	if (p->target.procs.n) {
		snprintf(t->comm, sizeof(t->comm), "%zu processes", p->target.procs.n);
	} else {
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)p->target.pid);
		if (pt_proc_slurp(path, t->comm, sizeof(t->comm)) > 0)
			t->comm[strcspn(t->comm, "\n")] = '\0';
	}
	j->req.kind = &pt_kind_trace;
	sc_job_target(j, &p->target);
	j->req.duration_ns = (uint64_t)(p->trace_seconds * 1e9);
	j->req.hz = p->hz;
	sc_job_submit(j);
}
