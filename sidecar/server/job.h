/* The life of a request that needs the sampler (a job): handed to the
 * sampler thread, its result encoded on a libuv work thread, the answer
 * sent from the loop thread; a client that goes away cancels whichever
 * step holds it. The jobs of a server are one struct sc_jobs, which owns
 * the async handle the sampler thread wakes the loop with. Loop thread,
 * except where noted. */
#ifndef SC_JOB_H
#define SC_JOB_H

#include <stddef.h>
#include <uv.h>

#include "ptrace/sampler/sampler.h"
#include "sidecar/server/procs.h"
#include "sidecar/server/reply.h"

struct sc_conn;
struct sc_params;
struct sc_request;
struct sc_job;
struct sc_jobs;

enum sc_job_next {
	SC_JOB_ANSWERED,        /* done() answered (an error): nothing to encode */
	SC_JOB_ENCODE,          /* run encode() on a work thread, then send */
};

struct sc_job_ops {
	/* Loop thread, once the sampler has answered and the client still
	 * waits: answers a failure now (sc_job_check, sc_job_error), or asks
	 * for encode(). */
	enum sc_job_next (*done)(struct sc_job *j);
	/* Work thread: turns j->req's result into r. Must not touch the
	 * connection, the server or anything of the loop's. */
	void (*encode)(struct sc_job *j, struct sc_reply *r);
	/* Any thread, at most once: frees what the profile's part of the job
	 * holds beyond req.profile (which the job frees). May be NULL. */
	void (*release)(struct sc_job *j);
};

/* Embedded first in a profile's own job structure (sc_job_new's size). */
struct sc_job {
	struct pt_request req;  /* filled by the profile before sc_job_submit */
	/* private */
	const struct sc_job_ops *ops;
	struct sc_jobs *jobs;
	struct sc_conn *conn;   /* NULL once the client went away */
	int state;
	int released;           /* job_release ran */
	uv_work_t work;
	struct sc_reply reply;
	struct sc_procs procs;  /* a request of several processes: theirs (req.procs) */
	struct sc_job *next;
};

/* Makes j a request for t's processes: its pid, or its several (moved into
 * j, freed with it). Call before sc_job_submit. */
void sc_job_target(struct sc_job *j, struct sc_target_set *t);

/* The jobs of a server whose sampler is s: an async handle on loop, which
 * the sampler thread's answers wake. Returns 0, -ENOMEM or libuv's error. */
int sc_jobs_new(struct sc_jobs **out, uv_loop_t *loop, struct pt_sampler *s);
/* Sampler thread: req, a job's request, is answered; the loop takes it on. */
void sc_jobs_answered(struct sc_jobs *jobs, struct pt_request *req);
/* While profiling is switched off (--enable-file), jobs the sampler
 * cancelled are answered with Go's mux 404, as new requests are. */
void sc_jobs_set_enabled(struct sc_jobs *jobs, int enabled);
/* After the sampler has stopped (every request answered): frees the jobs
 * it handed back, closes the async handle, and frees the rest, then calls
 * closed(arg), once the last encoding still running has finished (the loop
 * must run on). NULL-safe (closed is then called at once). */
void sc_jobs_close(struct sc_jobs *jobs, void (*closed)(void *arg), void *arg);

/* A zeroed job of `size` bytes (at least sizeof(struct sc_job)) for c's
 * request req, its parameters p (their format and sample_index go to the
 * reply). Returns NULL after answering 500 (out of memory) to c. */
struct sc_job *sc_job_new(struct sc_jobs *jobs, struct sc_conn *c, const struct sc_request *req,
			  const struct sc_params *p, const struct sc_job_ops *ops, size_t size);
/* Hands j to the sampler; from here the jobs own j. If the client goes
 * away, the sampler request is cancelled, a queued encoding too, and j
 * freed without an answer. */
void sc_job_submit(struct sc_job *j);
/* For done(): if the sampler failed the request, answers in Go's shape
 * (503 when too busy, else 500; `prefix` leads messages of errors without
 * words of their own) and returns SC_JOB_ANSWERED; else SC_JOB_ENCODE. */
enum sc_job_next sc_job_check(struct sc_job *j, const char *prefix);
/* For done(): answers j's client with sc_go_error; returns SC_JOB_ANSWERED. */
enum sc_job_next sc_job_error(struct sc_job *j, int status, const char *msg);
/* Words for a sampler error the client can act on, or NULL. Any thread. */
const char *sc_job_strerror(int err);

#endif
