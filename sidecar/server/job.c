/* Jobs: requests that need the sampler (see job.h). A job is owned by the
 * jobs from sc_job_submit until its answer is sent: the sampler thread and
 * a work thread hold it in turn. The jobs themselves go once their async
 * handle is closed and no encoding is left to report back. Loop thread,
 * except where noted. */
#include "sidecar/server/job.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "ptrace/proc/proc.h"
#include "sidecar/server/http.h"
#include "sidecar/server/log.h"
#include "sidecar/server/params.h"
#include "sidecar/server/query.h"
#include "sidecar/server/util.h"

struct sc_jobs {
	uv_loop_t *loop;
	struct pt_sampler *sampler;
	uv_async_t async;
	pthread_mutex_t lock;        /* guards done */
	struct sc_job *done;         /* handed back by the sampler thread */
	int async_open;
	int closing;                 /* sc_jobs_close was called */
	int encoding;                /* jobs queued or running on work threads */
	int enabled;                 /* profiling on (the switch file) */
	void (*closed)(void *arg);
	void *closed_arg;
};

/* A job's life: with the sampler, then on a work thread. What a client
 * that goes away cancels depends on which. */
enum { JOB_SAMPLING, JOB_ENCODING };

/* Frees the result and the profile's part of j: on the work thread once
 * encoded, so that the loop never walks a large profile. */
static void job_release(struct sc_job *j)
{
	if (j->released)
		return;
	j->released = 1;
	pt_profile_free(j->req.profile);
	j->req.profile = NULL;
	if (j->ops->release)
		j->ops->release(j);
}

static void job_free(struct sc_job *j)
{
	if (!j)
		return;
	job_release(j);
	base_free(j->reply.body);
	sc_procs_free(&j->procs);
	base_free(j);
}

void sc_job_target(struct sc_job *j, struct sc_target_set *t)
{
	j->req.pid = t->pid;
	j->procs = t->procs;
	t->procs = (struct sc_procs){ 0 };
	j->req.procs = j->procs.v;
	j->req.nprocs = j->procs.n;
	j->req.nprocs_left = j->procs.left;
	j->req.max_procs = j->procs.max;
}

/* The last of the jobs go when sc_jobs_close was called, the async handle
 * is closed and no encoding is left to report back. */
static void jobs_maybe_free(struct sc_jobs *jobs)
{
	void (*closed)(void *) = jobs->closed;
	void *arg = jobs->closed_arg;

	if (!jobs->closing || jobs->async_open || jobs->encoding)
		return;
	pthread_mutex_destroy(&jobs->lock);
	base_free(jobs);
	if (closed)
		closed(arg);
}

void sc_jobs_answered(struct sc_jobs *jobs, struct pt_request *req)
{
	struct sc_job *j = req->user;

	pthread_mutex_lock(&jobs->lock);
	j->next = jobs->done;
	jobs->done = j;
	pthread_mutex_unlock(&jobs->lock);
	uv_async_send(&jobs->async);
}

void sc_jobs_set_enabled(struct sc_jobs *jobs, int enabled)
{
	jobs->enabled = enabled;
}

/* Loop thread, from the connection's close: the client went away. */
static void on_abort(struct sc_conn *c, void *arg)
{
	struct sc_job *j = arg;

	(void)c;
	j->conn = NULL;
	if (j->state == JOB_SAMPLING)
		pt_sampler_cancel(j->jobs->sampler, &j->req);
	else
		uv_cancel((uv_req_t *)&j->work);   /* fails harmlessly once running */
}

/* What the job profiled, for a page's title: its processes, or its one
 * by pid and name. */
static void subject(struct sc_job *j)
{
	char path[64], comm[32] = "";

	if (j->req.nprocs) {
		snprintf(j->reply.subject, sizeof(j->reply.subject), "%zu processes", j->req.nprocs);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)j->req.pid);
	if (pt_proc_slurp(path, comm, sizeof(comm)) > 0)
		comm[strcspn(comm, "\n")] = '\0';
	snprintf(j->reply.subject, sizeof(j->reply.subject), comm[0] ? "pid %d (%s)" : "pid %d",
		 (int)j->req.pid, comm);
}

/* Work thread. */
static void on_work(uv_work_t *w)
{
	struct sc_job *j = SC_CONTAINER_OF(w, struct sc_job, work);

	if (j->reply.format)   /* only a page or a file names it */
		subject(j);
	j->ops->encode(j, &j->reply);
	job_release(j);
}

/* Loop thread: the encoding finished, or was cancelled (UV_ECANCELED)
 * before it started because the client left or the server is closing. */
static void on_work_done(uv_work_t *w, int status)
{
	struct sc_job *j = SC_CONTAINER_OF(w, struct sc_job, work);
	struct sc_jobs *jobs = j->jobs;

	jobs->encoding--;
	if (status == UV_ECANCELED) {
		log_debug("http: an encoding was cancelled before it started");
	} else if (!j->conn) {
		log_debug("http: client gone while its answer was encoded: dropped");
	} else if (!j->reply.body && j->reply.text[0]) {
		sc_http_respond(j->conn, j->reply.status, j->reply.headers, j->reply.text,
				strlen(j->reply.text));
	} else {
		sc_http_respond_owned(j->conn, j->reply.status, j->reply.headers, j->reply.body,
				      j->reply.len);
		j->reply.body = NULL;
	}
	job_free(j);
	jobs_maybe_free(jobs);
}

static void job_done(struct sc_jobs *jobs, struct sc_job *j)
{
	int err;

	if (j->conn && !jobs->closing && !jobs->enabled) {
		/* Switched off while it ran: the sampler cancelled it. */
		sc_http_respond(j->conn, 404, SC_TEXT_PLAIN, "404 page not found\n", 19);
		job_free(j);
		return;
	}
	if (!j->conn || jobs->closing || j->ops->done(j) == SC_JOB_ANSWERED) {
		job_free(j);
		return;
	}
	j->state = JOB_ENCODING;
	if ((err = uv_queue_work(jobs->loop, &j->work, on_work, on_work_done))) {
		log_error("http: cannot queue an encoding: %s", uv_strerror(err));
		sc_go_error(j->conn, 500, "failed to encode profile");
		job_free(j);
		return;
	}
	jobs->encoding++;
	log_debug("http: an answer is being encoded on a work thread (%d now)", jobs->encoding);
}

static void on_async(uv_async_t *a)
{
	struct sc_jobs *jobs = a->data;
	struct sc_job *list;

	/* Sends coalesce: take everything queued so far. */
	pthread_mutex_lock(&jobs->lock);
	list = jobs->done;
	jobs->done = NULL;
	pthread_mutex_unlock(&jobs->lock);
	while (list) {
		struct sc_job *j = list;

		list = list->next;
		job_done(jobs, j);
	}
}

int sc_jobs_new(struct sc_jobs **out, uv_loop_t *loop, struct pt_sampler *s)
{
	struct sc_jobs *jobs;
	int err;

	*out = NULL;
	if (!(jobs = base_calloc(1, sizeof(*jobs))))
		return -ENOMEM;
	jobs->loop = loop;
	jobs->sampler = s;
	jobs->enabled = 1;
	pthread_mutex_init(&jobs->lock, NULL);
	if ((err = uv_async_init(loop, &jobs->async, on_async))) {
		pthread_mutex_destroy(&jobs->lock);
		base_free(jobs);
		return err;
	}
	jobs->async.data = jobs;
	jobs->async_open = 1;
	*out = jobs;
	return 0;
}

static void on_async_closed(uv_handle_t *h)
{
	struct sc_jobs *jobs = h->data;

	jobs->async_open = 0;
	jobs_maybe_free(jobs);
}

void sc_jobs_close(struct sc_jobs *jobs, void (*closed)(void *arg), void *arg)
{
	if (!jobs) {
		if (closed)
			closed(arg);
		return;
	}
	jobs->closing = 1;
	jobs->closed = closed;
	jobs->closed_arg = arg;
	on_async(&jobs->async);           /* free what the sampler handed back */
	uv_close((uv_handle_t *)&jobs->async, on_async_closed);
}

struct sc_job *sc_job_new(struct sc_jobs *jobs, struct sc_conn *c, const struct sc_request *req,
			  const struct sc_params *p, const struct sc_job_ops *ops, size_t size)
{
	struct sc_job *j = base_calloc(1, size < sizeof(*j) ? sizeof(*j) : size);

	(void)req;
	if (!j) {
		sc_go_error(c, 500, "out of memory");
		return NULL;
	}
	j->reply.format = (int)p->format;
	snprintf(j->reply.sample_index, sizeof(j->reply.sample_index), "%s", p->sample_index);
	j->ops = ops;
	j->jobs = jobs;
	j->conn = c;
	j->state = JOB_SAMPLING;
	j->req.user = j;
	return j;
}

void sc_job_submit(struct sc_job *j)
{
	sc_http_on_abort(j->conn, on_abort, j);
	pt_sampler_submit(j->jobs->sampler, &j->req);
}

const char *sc_job_strerror(int err)
{
	switch (err) {
	case -ESRCH: return "target process is gone";
	case -EPERM:
	case -EACCES:   /* /proc/<pid>/maps is refused before ptrace is even tried */
		return "ptrace not permitted: podprof needs CAP_SYS_PTRACE (and no_new_privs off for file capabilities)";
	case -EBUSY: return "too many profiles running at once";
	case -ECANCELED: return "podprof is shutting down";
	default: return NULL;
	}
}

enum sc_job_next sc_job_check(struct sc_job *j, const char *prefix)
{
	const char *m;
	char msg[256];

	if (!j->req.err)
		return SC_JOB_ENCODE;
	m = sc_job_strerror(j->req.err);
	if (!m) {
		snprintf(msg, sizeof(msg), "%s%s", prefix ? prefix : "", sc_strerror(j->req.err));
		m = msg;
	}
	return sc_job_error(j, j->req.err == -EBUSY ? 503 : 500, m);
}

enum sc_job_next sc_job_error(struct sc_job *j, int status, const char *msg)
{
	sc_go_error(j->conn, status, msg);
	return SC_JOB_ANSWERED;
}
