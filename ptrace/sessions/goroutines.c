/* The goroutine dump of a Go program: every goroutine the program's own
 * server would list, read from the runtime while the program runs (gort.h),
 * each unwound from where it parked (its saved registers, .gopclntab's
 * tables) or, running, from its thread's stack taken by the thread dump's
 * stops; re-checked after its stack was read, and left out (counted) if it
 * moved meanwhile. A process that is not a Go program podprof can read
 * gets the thread dump (threads.c), with why in the profile's note. Owns
 * the session's stack table and the goroutines' records. Sampler thread
 * only, as every session hook. */
#include "ptrace/sessions/goroutines.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/user.h>

#include "base/array.h"
#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/core/stacks.h"
#include "ptrace/mechanism/tracee.h"
#include "ptrace/profile/profile.h"
#include "ptrace/proc/proc.h"
#include "ptrace/rule/snapshot.h"
#include "ptrace/runtimes/go/go.h"
#include "ptrace/runtimes/go/gort.h"
#include "ptrace/runtimes/go/parked.h"
#include "ptrace/runtimes/runtimes.h"
#include "ptrace/sampler/log.h"
#include "ptrace/sampler/request.h"
#include "ptrace/sampler/session.h"
#include "ptrace/sessions/threads.h"
#include "ptrace/space/space.h"

#define MAX_THREADS 4096               /* threads whose stacks a running goroutine may need */
#define LABEL_BYTES 8192               /* one goroutine's labels' strings */

/* A thread's stack from the dump's stops, for the goroutine running on it. */
struct thread_stack {
	pid_t tid, nstid;
	uint64_t *frames;
	int n;
};

/* What the profile tells of one goroutine beside its stack: its record,
 * and its labels' place in the label list (first pair, count). */
struct gr_meta {
	struct pt_go_g g;
	uint32_t labels, nlabels;
};

struct gr_session {
	struct pt_session base;
	struct pt_stacks *stacks;
	int sign;                        /* a delta's start counts -1 */
	struct thread_stack *threads;
	size_t nthreads;
	struct gr_meta *meta;            /* by the stack table's entry id */
	size_t nmeta;
	char **kv;                       /* every goroutine's label keys and values */
	size_t nkv, kv_cap;
	uint64_t torn, stopped, samples, retried;
	struct pt_go_g *moved;           /* moved while read: read again once at the end */
	size_t nmoved, moved_cap;
};

static void on_thread(void *arg, const struct pt_sample *smp)
{
	struct gr_session *gs = arg;
	struct thread_stack *ts;

	if (gs->nthreads >= MAX_THREADS || !smp->n)
		return;
	ts = &gs->threads[gs->nthreads];
	if (!(ts->frames = base_malloc((size_t)smp->n * sizeof(*ts->frames))))
		return;
	memcpy(ts->frames, smp->frames, (size_t)smp->n * sizeof(*ts->frames));
	ts->n = smp->n;
	ts->tid = smp->tid;
	ts->nstid = smp->tid;
	gs->nthreads++;
}

/* Where the target's PID namespace is not ours, each thread's tid as the
 * target sees it (m.procid), from its status. */
static void thread_nstids(struct gr_session *gs, pid_t pid)
{
	if (pt_space_nspid(pt_tracee_space(gs->base.t)) == pid)
		return;
	for (size_t i = 0; i < gs->nthreads; i++) {
		char path[96], buf[4096];
		pid_t ns;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)gs->threads[i].tid);
		if (pt_proc_slurp(path, buf, sizeof(buf)) > 0 && !pt_proc_parse_nspid(buf, &ns))
			gs->threads[i].nstid = ns;
	}
}

static void free_threads(struct gr_session *gs)
{
	for (size_t i = 0; i < gs->nthreads; i++)
		base_free(gs->threads[i].frames);
	gs->nthreads = 0;
}

/* Copies the labels of g into the session's list. */
static int keep_labels(struct gr_session *gs, struct pt_go *go, const struct pt_go_g *g,
		       struct gr_meta *m)
{
	struct pt_go_label lab[PT_GO_MAX_LABELS];
	char buf[LABEL_BYTES];
	int n = pt_go_labels(go, g->labels, lab, PT_GO_MAX_LABELS, buf, sizeof(buf));

	m->labels = (uint32_t)(gs->nkv / 2);
	m->nlabels = 0;
	if (n <= 0)
		return 0;
	if (gs->nkv + 2 * (size_t)n > gs->kv_cap) {
		size_t cap = (gs->kv_cap ? gs->kv_cap * 2 : 64) + 2 * (size_t)n;
		char **grown = base_realloc(gs->kv, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		gs->kv = grown;
		gs->kv_cap = cap;
	}
	for (int i = 0; i < n; i++) {
		if (!(gs->kv[gs->nkv] = base_strdup(lab[i].key)))
			return -ENOMEM;
		gs->nkv++;
		if (!(gs->kv[gs->nkv] = base_strdup(lab[i].value)))
			return -ENOMEM;
		gs->nkv++;
		m->nlabels++;
	}
	return 0;
}

/* One goroutine into the stack table, frames[0..k) its stack: one entry
 * each (keyed by its id) with its record, or, counted with sign for a
 * delta, by stack alone. */
static int add_goroutine(struct gr_session *gs, struct pt_go *go, const struct pt_go_g *g,
			 uint64_t *frames, int k, int sign)
{
	struct pt_sample smp = { .pid = gs->base.req->pid, .syscall = -1, .frames = frames, .n = k };
	int64_t v[PT_MAX_VALUES] = { sign };
	int id;

	smp.tid = sign > 0 && !gs->base.req->duration_ns ? (pid_t)(g->goid & 0x7fffffff) : 0;
	smp.comm = g->state;
	smp.state = 'S';
	if ((id = pt_stacks_add(gs->stacks, &smp, v)) < 0)
		return id == -ENOMEM ? id : 0;   /* past the table's cap: counted there */
	gs->samples++;
	if (gs->meta && (size_t)id >= gs->nmeta) {
		gs->meta[id].g = *g;
		gs->nmeta = (size_t)id + 1;
		return keep_labels(gs, go, g, &gs->meta[id]);
	}
	return 0;
}

/* A running goroutine: its thread's stack, taken by a stop just now. */
static int running_frames(const struct gr_session *gs, const struct pt_go_g *g, uint64_t *frames)
{
	for (size_t t = 0; t < gs->nthreads; t++)
		if (gs->threads[t].nstid == g->nstid) {
			int k = gs->threads[t].n < PT_GO_MAX_FRAMES ? gs->threads[t].n : PT_GO_MAX_FRAMES;

			memcpy(frames, gs->threads[t].frames, (size_t)k * sizeof(*frames));
			return k;
		}
	return 0;
}

/* Between the pieces of the reading: a signal on its way to one of the
 * target's threads waits no longer than a piece (pt_tracee_breathe). */
static void breathe(void *t)
{
	pt_tracee_breathe(t);
}

/* The parked goroutines batch[0..n): unwound (parked.h), added; one that
 * moved while its stack was read kept for retry_moved (retry), or left out
 * and counted. */
static int add_parked(struct gr_session *gs, struct pt_go *go, const struct pt_go_g *const *batch,
		      size_t n, struct pt_go_parked *pk, int sign, int retry)
{
	int err = pt_go_unwind_parked(go, pt_tracee_space(gs->base.t), batch, n, pk);

	breathe(gs->base.t);

	for (size_t i = 0; i < n && !err; i++) {
		if (pk->ok[i]) {
			err = add_goroutine(gs, go, batch[i], pk->frames[i], pk->n[i], sign);
		} else if (!retry) {
			gs->torn++;
		} else {
			struct pt_go_g *m = BASE_ARRAY_PUSH(gs->moved, gs->nmoved, gs->moved_cap);

			if (!m)
				return -ENOMEM;
			*m = *batch[i];
		}
	}
	return err;
}

/* The goroutines that moved while their stacks were read (a running one
 * preempted, seen runnable, running again by the recheck), read again and
 * taken where they are now: a running one on its thread's stack, the
 * others unwound again; those that moved again left out, counted. */
static int retry_moved(struct gr_session *gs, struct pt_go *go, struct pt_go_parked *pk,
		       uint64_t *frames, int sign)
{
	const struct pt_go_g *batch[PT_GO_BATCH];
	size_t nb = 0;
	int err = 0;

	gs->retried += gs->nmoved;
	for (size_t i = 0; i < gs->nmoved && !err; i++) {
		struct pt_go_g *g = &gs->moved[i];
		int rc = pt_go_reread(go, g);

		if (rc == -ENOENT)
			continue;   /* ended meanwhile: not one to list */
		if (rc) {
			gs->torn++;
		} else if (g->nstid) {
			err = add_goroutine(gs, go, g, frames, running_frames(gs, g, frames), sign);
		} else {
			batch[nb++] = g;
			if (nb == PT_GO_BATCH) {
				err = add_parked(gs, go, batch, nb, pk, sign, 0);
				nb = 0;
			}
		}
	}
	if (!err && nb)
		err = add_parked(gs, go, batch, nb, pk, sign, 0);
	gs->nmoved = 0;
	return err;
}

/* Every goroutine but the runtime's own into the stack table. */
static int read_goroutines(struct gr_session *gs, struct pt_go *go, int sign)
{
	const struct pt_go_g *batch[PT_GO_BATCH];
	struct pt_go_g *list = NULL;
	struct pt_go_parked *pk = NULL;
	uint64_t frames[PT_GO_MAX_FRAMES];
	size_t torn = 0, max = pt_go_count(go), nb = 0;
	int n, err = 0;

	/* allgs holds the dead too: room for every one it lists now, and a
	 * few more made meanwhile (those past it are counted as left out). */
	max = max + 64 < PT_GO_MAX_GOROUTINES ? max + 64 : PT_GO_MAX_GOROUTINES;
	if (!(list = base_calloc(max, sizeof(*list))) || !(pk = base_malloc(sizeof(*pk)))) {
		err = -ENOMEM;
		goto out;
	}
	if ((n = pt_go_goroutines(go, list, max, &torn, breathe, gs->base.t)) < 0) {
		err = n;
		goto out;
	}
	gs->torn += torn;
	if (sign > 0 && !(gs->meta = base_calloc((size_t)n + 1, sizeof(*gs->meta)))) {
		err = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < n && !err; i++) {
		const struct pt_go_g *g = &list[i];

		if (g->system)
			continue;
		if (g->nstid) {
			err = add_goroutine(gs, go, g, frames, running_frames(gs, g, frames), sign);
			continue;
		}
		batch[nb++] = g;
		if (nb == PT_GO_BATCH) {
			err = add_parked(gs, go, batch, nb, pk, sign, 1);
			nb = 0;
		}
	}
	if (!err && nb)
		err = add_parked(gs, go, batch, nb, pk, sign, 1);
	if (!err)
		err = retry_moved(gs, go, pk, frames, sign);
out:
	base_free(list);
	base_free(pk);
	return err;
}

static struct pt_go *go_of_target(struct gr_session *gs)
{
	struct pt_rt *rt = pt_runtimes_get(pt_tracee_runtimes(gs->base.t), "go");

	return rt ? pt_go_of(rt) : NULL;
}

static int on_snap(struct gr_session *gs, int sign);

/* A snapshot of every thread (their stacks for the running goroutines, or
 * the thread dump itself when the target is no Go program podprof reads),
 * then the goroutines. */
static int take(struct gr_session *gs, int sign)
{
	struct pt_session *ss = &gs->base;
	struct pt_go *go = go_of_target(gs);
	uint64_t t0 = pt__now_ns();
	int n, stopped = 0, err;

	gs->sign = sign;
	free_threads(gs);
	if (!gs->threads && !(gs->threads = base_calloc(MAX_THREADS, sizeof(*gs->threads))))
		return -ENOMEM;
	if (!go)
		return on_snap(gs, sign);
	n = pt_snapshot_take(ss->rule, PT_SNAPSHOT_WAIT_NS, on_thread, gs, &stopped);
	if (n < 0)
		return n;
	gs->stopped += (uint64_t)stopped;
	thread_nstids(gs, ss->req->pid);
	err = read_goroutines(gs, go, sign);
	pt__log(ss->s, 0, "goroutines: pid=%d %s threads=%d stopped=%d goroutines=%" PRIu64
		" moved and read again=%" PRIu64 " torn=%" PRIu64 " in %.2f ms", (int)ss->req->pid,
		pt_go_version(go), n, stopped, gs->samples, gs->retried, gs->torn,
		(double)(pt__now_ns() - t0) / 1e6);
	return err;
}

/* Not a Go program podprof reads: the thread dump (threads.c's). */
static int on_snap(struct gr_session *gs, int sign)
{
	int stopped, n;

	gs->sign = sign;
	n = pt_threads_take(&gs->base, gs->stacks, sign, &stopped, &gs->samples);
	gs->stopped += (uint64_t)stopped;
	return n < 0 ? n : 0;
}

static int goroutines_start(struct pt_session *ss)
{
	struct gr_session *gs = PT_SESSION_OF(ss, struct gr_session);
	int err = pt_stacks_new(&gs->stacks, SIZE_MAX);

	if (err)
		return err;
	return take(gs, ss->req->duration_ns ? -1 : 1);
}

/* The profile's goroutine records (one per sample: sample i is entry i of
 * the stack table) and their labels; their creators located. */
static int attach_goroutines(struct gr_session *gs, struct pt_go *go, struct pt_profile *p)
{
	if (!gs->meta || !p->nsamples)
		return 0;
	if (!(p->goroutines = base_calloc(p->nsamples, sizeof(*p->goroutines))))
		return -ENOMEM;
	for (size_t i = 0; i < p->nsamples && i < gs->nmeta; i++) {
		const struct gr_meta *m = &gs->meta[i];
		struct pt_profile_goroutine *o = &p->goroutines[i];
		uint32_t loc;
		int err;

		*o = (struct pt_profile_goroutine){ .goid = m->g.goid, .parent_goid = m->g.parent_goid,
						    .state = m->g.state, .wait_ns = m->g.wait_ns };
		if (m->nlabels) {
			p->samples[i].labels = (uint32_t)(p->nlabel_kv / 2) + m->labels;
			p->samples[i].nlabels = m->nlabels;
		}
		o->flags = (m->g.locked ? PT_GOROUTINE_F_LOCKED : 0) | (m->g.scan ? PT_GOROUTINE_F_SCAN : 0);
		/* Go's "created by": the go statement, named at the call
		 * (gopc is its return address), as the main goroutine has none. */
		if (m->g.gopc && m->g.goid != 1) {
			if ((err = pt_profile_locate(p, gs->base.t, m->g.gopc - 1, &loc)))
				return err;
			o->created_by = loc + 1;
		}
	}
	/* The goroutines' labels after those the samples had already. */
	if (gs->nkv) {
		char **kv = base_realloc(p->label_kv, (p->nlabel_kv + gs->nkv) * sizeof(*kv));

		if (!kv)
			return -ENOMEM;
		memcpy(kv + p->nlabel_kv, gs->kv, gs->nkv * sizeof(*kv));
		p->label_kv = kv;
		p->nlabel_kv += gs->nkv;
		base_free(gs->kv);
		gs->kv = NULL;
		gs->nkv = gs->kv_cap = 0;
	}
	snprintf(p->go_version, sizeof(p->go_version), "%s", pt_go_version(go));
	p->goroutines_torn = gs->torn;
	return 0;
}

static int goroutines_finish(struct pt_session *ss)
{
	struct gr_session *gs = PT_SESSION_OF(ss, struct gr_session);
	struct pt_go *go = go_of_target(gs);
	int err = ss->req->duration_ns ? take(gs, 1) : 0;
	struct pt_profile *p;

	if (err || (err = pt_profile_build(gs->stacks, ss->t, &ss->req->profile)))
		return err;
	p = ss->req->profile;
	if (ss->req->duration_ns)
		pt_profile_drop_zero(p);
	else if (go && (err = attach_goroutines(gs, go, p)))
		return err;
	if (!go)   /* a Go program podprof cannot read says why ("" for any other) */
		snprintf(p->note, sizeof(p->note), "%s",
			 pt_runtimes_note_of(pt_tracee_runtimes(ss->t), "go"));
	p->time_ns = ss->start_wall;
	p->duration_ns = pt__now_ns() - ss->start_ns;
	p->threads_stopped = gs->stopped;
	p->thread_samples = gs->samples;
	return 0;
}

static void goroutines_free(struct pt_session *ss)
{
	struct gr_session *gs = PT_SESSION_OF(ss, struct gr_session);

	free_threads(gs);
	base_free(gs->threads);
	base_free(gs->moved);
	base_free(gs->meta);
	for (size_t i = 0; i < gs->nkv; i++)
		base_free(gs->kv[i]);
	base_free(gs->kv);
	pt_stacks_free(gs->stacks);
}

const struct pt_session_kind pt_kind_goroutines = {
	.name = "goroutines",
	.size = sizeof(struct gr_session),
	.flags = PT_KIND_F_ATTACH | PT_KIND_F_WINDOW,
	.start = goroutines_start,
	.finish = goroutines_finish,
	.free = goroutines_free,
};
