/* The sampler's side of the backends (see backends.h). Sampler thread,
 * but for pt_backend_probe. */
#include "ptrace/sampler/backends.h"

#include <stdio.h>

#include "ptrace/perf/perfev.h"
#include "ptrace/rule/perftick.h"
#include "ptrace/profile/profile.h"
#include "ptrace/rule/rule.h"
#include "ptrace/sampler/state.h"
#include "ptrace/sampler/session.h"
#include "ptrace/mechanism/tracee.h"

int pt_backend_probe(pid_t pid, enum pt_backend want, char *why, size_t len)
{
	struct pt_perfev_cfg cfg = { .period_ns = 10000000, .stack_bytes = 8192 };
	int err;

	if (want == PT_BACKEND_PTRACE) {
		snprintf(why, len, "--backend ptrace");
		return 0;
	}
	err = pt_perfev_probe(pid, &cfg, why, len);
	if (err && want == PT_BACKEND_PERF)
		return err;
	return !err;
}

/* A session that takes CPU samples over a window (the others' ticks take
 * none: nothing to decide). */
static int samples(const struct pt_session *ss)
{
	return ss->kind->on_sample && ss->period_ns;
}

int pt__backend_begin(struct pt_session *ss, enum pt_backend want, char *line, size_t len)
{
	struct pt__target *tg = ss->target;
	struct pt_rule_stats rs;
	const char *why;
	int fresh, err;

	line[0] = '\0';
	if (!samples(ss))
		return 0;
	err = pt_perftick_choose(tg->rule, want, &fresh);
	if (!err)
		pt_perftick_resume(tg->rule);   /* from now, not the next tick */
	pt_rule_stats(tg->rule, &rs);
	ss->lost0 = rs.perf_lost;
	ss->fail0 = rs.perf_open_failures;
	ss->draws0 = rs.draws;
	ss->drawn0 = rs.draw_threads;
	(void)pt_perftick_backend(tg->rule, &why);
	if (err)
		snprintf(line, len, "backend: pid=%d: --backend perf_event cannot sample it: %s",
			 (int)pt_tracee_pid(tg->t), why);
	else if (fresh)
		snprintf(line, len, "backend: pid=%d sampled with %s: %s", (int)pt_tracee_pid(tg->t),
			 pt_perftick_backend(tg->rule, NULL) == PT_BACKEND_PERF ? "perf_event" : "ptrace",
			 why);
	return err;
}

void pt__backend_end(struct pt_sampler *s, struct pt_session *ss)
{
	if (!samples(ss))
		return;
	for (const struct pt_session *o = s->sessions; o; o = o->next)
		if (o != ss && o->target == ss->target && samples(o))
			return;   /* another still samples it */
	pt_perftick_idle(ss->target->rule);
}

void pt__backend_note(struct pt_session *ss, struct pt_profile *p)
{
	struct pt_rule_stats rs;
	const char *why;

	if (!samples(ss))
		return;
	pt_rule_stats(ss->rule, &rs);
	p->backend = pt_perftick_backend(ss->rule, &why) == PT_BACKEND_PERF ? "perf_event" : "ptrace";
	snprintf(p->backend_why, sizeof(p->backend_why), "%s", why);
	p->samples_lost = rs.perf_lost - ss->lost0;
	p->open_failures = rs.perf_open_failures - ss->fail0;
	p->open_err = p->open_failures ? rs.perf_open_err : 0;
	p->draws = rs.draws - ss->draws0;
	p->draw_threads = rs.draw_threads - ss->drawn0;
	p->draw_err = rs.draw_err;
}

uint64_t pt__backend_tick_every(const struct pt_sampler *s, uint64_t period)
{
	for (const struct pt_session *ss = s->sessions; ss; ss = ss->next) {
		if (!ss->period_ns)
			continue;
		/* A slower session takes one tick in so many (its samples
		 * scaled); one that looks at thread states needs its ticks. */
		if (!samples(ss) || ss->period_ns * (uint64_t)s->rate.div != period ||
		    (ss->kind->flags & PT_KIND_F_STATES) ||
		    pt_perftick_backend(ss->rule, NULL) != PT_BACKEND_PERF)
			return 1;
	}
	return period >= PT_PERF_DRAIN_NS ? 1 : (PT_PERF_DRAIN_NS + period - 1) / period;
}

void pt__backend_event(struct pt__target *tg, const struct pt_event *ev)
{
	if (ev->kind == PT_EV_CLONE)
		pt_perftick_born(tg->rule, ev->child);
	else if (ev->kind == PT_EV_EXIT)
		pt_perftick_ended(tg->rule, ev->tid);
}
