/* The processes the sampler traces (see targets.h): the table of targets,
 * each a tracee, its sampling rule and the kinds' state that outlives
 * their sessions. Sampler thread only. */
#include "ptrace/targets.h"

#include <errno.h>
#include <string.h>

#include "ptrace/ptrace_internal.h"
#include "ptrace/rule.h"
#include "ptrace/sampler_state.h"
#include "ptrace/session.h"
#include "ptrace/stats.h"
#include "ptrace/symbolize.h"
#include "ptrace/threads.h"
#include "ptrace/tracee.h"
#include "ptrace/tracer.h"

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
	if ((*err = pt_rule_new(&tg->rule, tg->t)) || (*err = pt_symbolize_refresh_maps(tg->t))) {
		pt__target_free(tg);
		return NULL;
	}
	s->ntg++;
	return tg;
}
