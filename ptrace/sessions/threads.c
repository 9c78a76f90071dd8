/* The thread dump: every thread's stack now, through the snapshot cache
 * (a thread blocked since its last snapshot is not stopped again). Owns
 * the session's stack table. Sampler thread only, as every session hook. */
#include "ptrace/sessions/threads.h"

#include <errno.h>
#include <stdint.h>

#include "ptrace/core/internal.h"
#include "ptrace/sampler/log.h"
#include "ptrace/sampler/sampler.h"
#include "ptrace/sampler/session.h"
#include "ptrace/rule/snapshot.h"
#include "ptrace/core/stacks.h"


struct threads_session {
	struct pt_session base;
	struct pt_stacks *stacks;
	uint64_t thread_samples;
	int stopped;
};

/* pt_threads_take's callback state. */
struct take {
	struct pt_stacks *stacks;
	uint64_t *samples;
	int sign;
};

static void on_snap_sample(void *arg, const struct pt_sample *smp)
{
	struct take *tk = arg;
	int64_t v[PT_MAX_VALUES] = { tk->sign };

	(*tk->samples)++;
	pt_stacks_add(tk->stacks, smp, v);
}

int pt_threads_take(struct pt_session *ss, struct pt_stacks *stacks, int sign, int *stopped,
		    uint64_t *samples)
{
	struct take tk = { stacks, samples, sign };
	uint64_t t0 = pt__now_ns();
	int n;

	*stopped = 0;
	n = pt_snapshot_take(ss->rule, PT_SNAPSHOT_WAIT_NS, on_snap_sample, &tk, stopped);
	pt__log(ss->s, 0, "snapshot: pid=%d threads=%d stopped=%d in %.2f ms",
			(int)ss->req->pid, n, *stopped, (double)(pt__now_ns() - t0) / 1e6);
	return n;
}

/* Every thread's stack now, counted with sign. Returns 0 or a negative errno. */
static int snapshot(struct pt_session *ss, int sign)
{
	struct threads_session *ts = PT_SESSION_OF(ss, struct threads_session);
	int stopped, n = pt_threads_take(ss, ts->stacks, sign, &stopped, &ts->thread_samples);

	ts->stopped += stopped;
	return n < 0 ? n : 0;
}

/* Without a window, the threads now; with one (goroutine?seconds=N, Go's
 * delta), the threads at its end less those at its start, by stack. */
static int threads_start(struct pt_session *ss)
{
	struct threads_session *ts = PT_SESSION_OF(ss, struct threads_session);
	int err = pt_stacks_new(&ts->stacks, SIZE_MAX);

	return err ? err : snapshot(ss, ss->req->duration_ns ? -1 : 1);
}

static int threads_finish(struct pt_session *ss)
{
	struct threads_session *ts = PT_SESSION_OF(ss, struct threads_session);
	int err = ss->req->duration_ns ? snapshot(ss, 1) : 0;

	if (!err)
		err = pt_profile_build(ts->stacks, ss->t, &ss->req->profile);
	if (!err && ss->req->duration_ns)
		pt_profile_drop_zero(ss->req->profile);
	if (!err) {
		ss->req->profile->time_ns = ss->start_wall;
		ss->req->profile->duration_ns = pt__now_ns() - ss->start_ns;
		ss->req->profile->threads_stopped = (uint64_t)ts->stopped;
		ss->req->profile->thread_samples = ts->thread_samples;
	}
	return err;
}

static void threads_free(struct pt_session *ss)
{
	pt_stacks_free(PT_SESSION_OF(ss, struct threads_session)->stacks);
}

const struct pt_session_kind pt_kind_threads = {
	.name = "snapshot",
	.size = sizeof(struct threads_session),
	.flags = PT_KIND_F_ATTACH | PT_KIND_F_WINDOW,
	.start = threads_start,
	.finish = threads_finish,
	.free = threads_free,
};
