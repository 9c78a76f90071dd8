/* Thread creation: where threads are created. Each clone event carries the
 * parent's stack (the parent is stopped at the event anyway: no extra
 * stop); they are counted per stack in a per-target record that lives as
 * long as podprof watches the target, from the first threadcreate request
 * on (while attached). A request answers with that record and, for every
 * live thread whose creation was not seen, its start routine: the
 * outermost frames of its stack now (through the thread dump's cache),
 * flagged so. Owns the record (through the target's slot) and each
 * answer's table. Sampler thread only, as every session hook. */
#include "ptrace/sessions/threadcreate.h"

#include <errno.h>

#include "base/map.h"
#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/sampler/targets.h"
#include "ptrace/sampler/sampler.h"
#include "ptrace/sampler/session.h"
#include "ptrace/rule/snapshot.h"
#include "ptrace/core/stacks.h"

#define START_FRAMES 3          /* a start routine: __clone3, start_thread, fn */
#define MAX_CREATORS 4096       /* distinct creation stacks kept */

/* The per-target record: creation stacks, and the threads seen created. */
struct creations {
	struct pt_stacks *stacks;
	struct base_map seen;   /* the tids (never 0) seen created, value 1 */
};

struct threadcreate_session {
	struct pt_session base;
	struct creations *rec;
	struct pt_stacks *out;  /* this answer: the record plus unseen threads */
	uint64_t created;
};

static const char record_key;

static void creations_free(void *p)
{
	struct creations *c = p;

	if (!c)
		return;
	pt_stacks_free(c->stacks);
	base_map_free(&c->seen);
	base_free(c);
}

static int seen_has(const struct creations *c, pid_t tid)
{
	return base_map_get(&c->seen, (uint64_t)tid) != NULL;
}

/* Out of memory, a creation is not remembered: the thread shows as unseen. */
static void seen_add(struct creations *c, pid_t tid)
{
	base_map_put(&c->seen, (uint64_t)tid, 1);
}

/* Every clone of the target while attached: its creation stack counts. */
static void creations_event(void *p, const struct pt_event *ev)
{
	struct creations *c = p;
	int64_t v[PT_MAX_VALUES] = { 1 };
	struct pt_sample smp = { .pid = ev->pid, .comm = "", .syscall = -1, .frames = ev->stack,
				 .n = ev->stack ? ev->n : 0 };

	if (ev->kind != PT_EV_CLONE)
		return;
	seen_add(c, ev->child);
	pt_stacks_add(c->stacks, &smp, v);
}

/* A thread of the dump: if its creation was not seen, its start routine. */
static void on_thread(void *arg, const struct pt_sample *smp)
{
	struct threadcreate_session *ts = arg;
	int64_t v[PT_MAX_VALUES] = { 1 };
	struct pt_sample start = *smp;

	if (seen_has(ts->rec, smp->tid))
		return;
	if (start.n > START_FRAMES) {
		start.frames += start.n - START_FRAMES;
		start.n = START_FRAMES;
	}
	start.flags |= PT_SAMPLE_F_UNSEEN;
	start.syscall = -1;
	start.state = 0;
	pt_stacks_add(ts->out, &start, v);
}

/* The target's record, created (and creations counted) at first use. */
static struct creations *creations_of(struct pt_session *ss)
{
	void **slot = pt__target_slot(ss, &record_key, creations_free, creations_event);
	struct creations *c;

	if (!slot)
		return NULL;
	if (!*slot) {
		if (!(c = base_calloc(1, sizeof(*c))) || pt_stacks_new(&c->stacks, MAX_CREATORS)) {
			creations_free(c);
			return NULL;
		}
		*slot = c;
	}
	return *slot;
}

int pt__creations_watch(struct pt_session *ss)
{
	return creations_of(ss) ? 0 : -ENOMEM;
}

static int threadcreate_start(struct pt_session *ss)
{
	struct threadcreate_session *ts = PT_SESSION_OF(ss, struct threadcreate_session);
	int stopped, n, err;

	if (!(ts->rec = creations_of(ss)))
		return -ENOMEM;
	if ((err = pt_stacks_new(&ts->out, MAX_CREATORS + (size_t)ss->o->max_threads)))
		return err;
	/* A delta (seconds=): the record at the end less the record now. */
	if (ss->req->duration_ns)
		return pt_stacks_merge(ts->out, ts->rec->stacks, -1);
	if ((err = pt_stacks_merge(ts->out, ts->rec->stacks, 1)))
		return err;
	n = pt_snapshot_take(ss->rule, PT_SNAPSHOT_WAIT_NS, on_thread, ts, &stopped);
	return n < 0 ? n : 0;
}

static int threadcreate_finish(struct pt_session *ss)
{
	struct threadcreate_session *ts = PT_SESSION_OF(ss, struct threadcreate_session);
	int err = ss->req->duration_ns ? pt_stacks_merge(ts->out, ts->rec->stacks, 1) : 0;

	if (!err)
		err = pt_profile_build(ts->out, ss->t, &ss->req->profile);
	if (!err) {
		ss->req->profile->time_ns = ss->start_wall;
		ss->req->profile->duration_ns = ss->req->duration_ns ? pt__now_ns() - ss->start_ns : 0;
		if (ss->req->duration_ns)
			pt_profile_drop_zero(ss->req->profile);
	}
	return err;
}

static void threadcreate_free(struct pt_session *ss)
{
	pt_stacks_free(PT_SESSION_OF(ss, struct threadcreate_session)->out);
}

const struct pt_session_kind pt_kind_threadcreate = {
	.name = "threadcreate",
	.size = sizeof(struct threadcreate_session),
	.flags = PT_KIND_F_ATTACH | PT_KIND_F_WINDOW,
	.start = threadcreate_start,
	.finish = threadcreate_finish,
	.free = threadcreate_free,
};
