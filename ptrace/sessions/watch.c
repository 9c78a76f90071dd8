/* The continuous watch (--continuous): one session that keeps the target
 * traced at a low rate for as long as it lives, so that the profiles Go
 * keeps since the program started are cumulative here too, since podprof
 * started: block and mutex (its waits, from thread states: no stop of a
 * thread that stays blocked), threadcreate (clone events) and allocs (a look
 * at the memory every MEMORY_EVERY_NS). Requests of those profiles without
 * seconds= answer from it. CPU profiles raise the rate while they run. */
#include "ptrace/sessions/watch.h"

#include <errno.h>

#include "ptrace/core/internal.h"
#include "ptrace/sampler/log.h"
#include "ptrace/sampler/sampler.h"
#include "ptrace/sampler/session.h"
#include "ptrace/sessions/memory.h"
#include "ptrace/sessions/threadcreate.h"
#include "ptrace/sessions/waiting.h"

#define MEMORY_EVERY_NS 10000000000ull

struct watch_session {
	struct pt_session base;
	struct pt__watched *w;     /* the waits, kept by waiting.c */
	uint64_t memory_at;
};

static int watch_start(struct pt_session *ss)
{
	struct watch_session *ws = PT_SESSION_OF(ss, struct watch_session);
	int err;

	if ((err = pt__watched_start(ss, &ws->w)) || (err = pt__creations_watch(ss)))
		return err;
	ws->memory_at = ss->start_ns;
	return pt__memory_look(ss);
}

static void watch_on_state(struct pt_session *ss, const struct pt_thread_state *st)
{
	struct watch_session *ws = PT_SESSION_OF(ss, struct watch_session);

	pt__watched_on_state(ws->w, st);
}

static void watch_on_tick(struct pt_session *ss, uint64_t now)
{
	struct watch_session *ws = PT_SESSION_OF(ss, struct watch_session);

	pt__watched_on_tick(ws->w, now);
	/* (at the tick, not at its thread states: a Go program's watch reads
	 * none, its waits are its goroutines') */
	if (now >= ws->memory_at + MEMORY_EVERY_NS) {
		ws->memory_at = now;
		pt__memory_look(ss);
	}
}

static void watch_on_clone(struct pt_session *ss, const struct pt_event *ev)
{
	struct watch_session *ws = PT_SESSION_OF(ss, struct watch_session);

	pt__watched_on_clone(ws->w, ev);
}

static void watch_on_exit(struct pt_session *ss, const struct pt_exit *x)
{
	struct watch_session *ws = PT_SESSION_OF(ss, struct watch_session);

	pt__watched_on_exit(ws->w, x);
}

static int watch_finish(struct pt_session *ss)
{
	pt__log(ss->s, 2, "watch: pid=%d: the continuous watch ended after %.1f s",
			(int)ss->req->pid, (double)(pt__now_ns() - ss->start_ns) / 1e9);
	return 0;
}

static void watch_free(struct pt_session *ss)
{
	struct watch_session *ws = PT_SESSION_OF(ss, struct watch_session);

	if (ws->w)
		pt__watched_end(ws->w);
}

const struct pt_session_kind pt_kind_watch = {
	.name = "watch",
	.size = sizeof(struct watch_session),
	.flags = PT_KIND_F_ATTACH | PT_KIND_F_WINDOW | PT_KIND_F_TICKS | PT_KIND_F_STATES,
	.start = watch_start,
	.on_thread_state = watch_on_state,
	.on_tick = watch_on_tick,
	.on_clone = watch_on_clone,
	.on_exit = watch_on_exit,
	.finish = watch_finish,
	.free = watch_free,
};
