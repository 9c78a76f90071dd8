/* The processes the sampler traces (see targets.h): the table of targets,
 * each a tracee, its sampling rule and the kinds' state that outlives
 * their sessions. Sampler thread only. */
#include "ptrace/sampler/targets.h"

#include <errno.h>
#include <string.h>

#include "ptrace/core/internal.h"
#include "ptrace/sampler/log.h"
#include "ptrace/rule/rule.h"
#include "ptrace/sampler/state.h"
#include "ptrace/sampler/session.h"
#include "ptrace/sampler/stats.h"
#include "ptrace/space/space.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/mechanism/tracee.h"
#include "ptrace/mechanism/tracer.h"

void pt__target_free(struct pt__target *tg)
{
	for (int i = 0; i < tg->nslots; i++)
		if (tg->slot[i].free)
			tg->slot[i].free(tg->slot[i].p);
	tg->nslots = 0;
	pt_tracee_free(tg->t);   /* before its rule: late stops still go to the rule */
	pt_rule_free(tg->rule);
	tg->t = NULL;
	tg->rule = NULL;
}


/* Forgets target i, which no session uses: the last target takes its slot,
 * and the sessions of that one follow it there. */
void pt__target_forget(struct pt_sampler *s, int i)
{
	struct pt__target *last = &s->tg[s->ntg - 1];

	pt__stats_add_target(&s->retired, s->tg[i].t, s->tg[i].rule);
	pt__target_free(&s->tg[i]);
	s->tg[i] = *last;
	s->ntg--;
	for (struct pt_session *ss = s->sessions; ss; ss = ss->next)
		if (ss->target == last)
			ss->target = &s->tg[i];
}

struct pt__target *pt__target_get(struct pt_sampler *s, pid_t pid, int evict, int *err)
{
	struct pt_tracee_opts to = {
		.stack_bytes = s->o.stack_bytes,
		.max_frames = s->o.max_frames,
		.max_threads = s->o.max_threads,
		.max_per_tick = s->o.max_per_tick,
		.spin_ns = s->o.spin_ns,
		.debug_dir = s->o.debug_dir,
		.python = s->o.python,
		.draw_threads = s->o.draw_threads,
	};
	struct pt__target *tg;

	*err = 0;
	for (int i = 0; i < s->ntg; i++)
		if (pt_tracee_pid(s->tg[i].t) == pid) {
			if (!pt_tracee_gone(s->tg[i].t))
				return &s->tg[i];
			if (s->tg[i].nsessions)
				break;
			/* A process gone and no one using it: forget it (its
			 * counters live on in the totals). */
			if (!evict) {
				*err = -EBUSY;
				return NULL;
			}
			pt__target_forget(s, i);
			break;
		}
	/* Full: make room by forgetting a target nobody uses or traces. */
	for (int i = 0; evict && s->ntg == MAX_TRACEES && i < s->ntg; i++)
		if (!s->tg[i].nsessions && !pt_tracee_attached(s->tg[i].t))
			pt__target_forget(s, i);
	if (s->ntg == MAX_TRACEES) {
		*err = -EBUSY;
		return NULL;
	}
	tg = &s->tg[s->ntg];
	memset(tg, 0, sizeof(*tg));
	tg->idle_since = pt__now_ns();   /* not idle for a grace already: just made */
	if ((*err = pt_tracee_new(&tg->t, s->tr, pid, &to)))
		return NULL;
	if ((*err = pt_rule_new(&tg->rule, tg->t)) || (*err = pt_space_refresh_maps(pt_tracee_space(tg->t)))) {
		pt__target_free(tg);
		return NULL;
	}
	s->ntg++;
	return tg;
}

void **pt__target_slot(struct pt_session *ss, const void *key, void (*free_fn)(void *),
		       void (*event_fn)(void *p, const struct pt_event *ev))
{
	struct pt__target *tg = ss->target;

	for (int i = 0; i < tg->nslots; i++)
		if (tg->slot[i].key == key)
			return &tg->slot[i].p;
	if (tg->nslots == MAX_SLOTS)
		return NULL;
	tg->slot[tg->nslots].key = key;
	tg->slot[tg->nslots].p = NULL;
	tg->slot[tg->nslots].free = free_fn;
	tg->slot[tg->nslots].event = event_fn;
	if (event_fn)
		pt_tracee_clone_stacks(tg->t, 1);
	return &tg->slot[tg->nslots++].p;
}

void pt__target_idle(struct pt__target *tg, uint64_t now)
{
	tg->idle_since = now;
	tg->signals_idle = pt_tracee_signals(tg->t);
}

/* Seizes the target if it is not traced yet. Returns 0 or a negative errno. */
int pt__target_attach(struct pt_sampler *s, struct pt__target *tg)
{
	uint64_t t0 = pt__now_ns();
	const char *note;
	int err;

	/* A detach that timed out (a thread that would not stop, in D state)
	 * must end before the target can be traced again. */
	if (pt_tracee_detaching(tg->t) && pt_tracee_detach(tg->t, 500000000ull))
		return -EBUSY;
	if (pt_tracee_attached(tg->t)) {
		/* Threads born while nobody followed them (no clone events:
		 * perfborn.h) are seized for the new session. */
		(void)pt_tracee_rescan(tg->t);
		return 0;
	}
	if ((err = pt_tracee_attach(tg->t)))
		return err;
	tg->signals_idle = pt_tracee_signals(tg->t);   /* idle until served: counts from now */
	pt__log(s, 1, "ptrace: attached pid=%d threads=%zu in %.1f ms",
			(int)pt_tracee_pid(tg->t), pt_threads_count(tg->t),
			(double)(pt__now_ns() - t0) / 1e6);
	if ((note = pt_tracee_rt_note(tg->t)))
		pt__log(s, 1, "%s", note);
	/* Events of the attach (new threads' first stops) before anything. */
	pt_tracer_poll(s->tr);
	return 0;
}
