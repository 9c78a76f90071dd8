/* Serving requests: each a session of its kind on its target, begun when
 * it comes and ended when its window is over, its client left or its
 * target went; a request of several processes served as a group of
 * members. The sampler's loop (sampler.c) hands requests here and asks
 * for the sessions' ends; the ticks in between are its own. Sampler thread
 * only. */
#include "ptrace/sampler/log.h"
#include "ptrace/sampler/serve.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/mechanism/stop.h"
#include "ptrace/mechanism/tracee.h"
#include "ptrace/sampler/backends.h"
#include "ptrace/sampler/group.h"
#include "ptrace/sampler/session.h"
#include "ptrace/sampler/state.h"
#include "ptrace/sampler/targets.h"

/* The requests with a window being served: a group's members count as
 * one, their group. */
int pt__serve_count(const struct pt_sampler *s)
{
	int n = s->ngroups;

	for (const struct pt_session *ss = s->sessions; ss; ss = ss->next)
		n += !ss->req->group;
	return n;
}

void pt__serve_later(struct pt_sampler *s, struct pt_request *m)
{
	m->next = s->follow;
	s->follow = m;
}

void pt__serve_complete(struct pt_sampler *s, struct pt_request *req)
{
	if (req->group) {
		struct pt_request *again;

		req = pt__group_member_done(req, pt__now_ns(), &again);
		if (again)
			pt__serve_later(s, again);
		if (!req)
			return;
		s->ngroups--;
		pt__log(s, 1, "%s: all processes done, %zu of them%s", req->kind->name,
				req->profile ? req->profile->nprocs : 0, req->err ? " (failed)" : "");
	}
	s->done(req, s->arg);
}

/* 1 if req's session has a window (else it is answered at once). */
static int windowed(const struct pt_request *req)
{
	return (req->kind->flags & PT_KIND_F_WINDOW) && req->duration_ns > 0;
}

/* What a profile of the target's stacks lacks of its runtimes' frames
 * (a CPython podprof cannot read, chains torn while read: runtimes.h's
 * pt_runtimes_missing), added to the lines of its note, which the answer
 * carries (a pprof comment, the text forms' header lines): nothing about
 * it only in the log. */
static void note_runtimes(struct pt_session *ss, struct pt_profile *p)
{
	char line[sizeof(p->note)];
	size_t k = strlen(p->note), n;

	if (!(ss->kind->flags & PT_KIND_F_ATTACH) || !ss->t)
		return;
	pt_runtimes_missing(pt_tracee_runtimes(ss->t), &ss->rt0, line, sizeof(line));
	n = strlen(line);
	if (!n || strstr(p->note, line) || k + 1 + n >= sizeof(p->note))
		return;   /* nothing, said already (a Go note), or no room */
	if (k)
		p->note[k++] = '\n';
	memcpy(p->note + k, line, n + 1);
}

/* Ends a session: its kind fills the request's results (unless err), and the
 * request is answered. The session must be out of s->sessions. */
static void session_end(struct pt_sampler *s, struct pt_session *ss, int err, const char *cut)
{
	struct pt_request *req = ss->req;
	struct pt__target *tg = ss->target;

	ss->cut = cut;
	req->err = err ? err : ss->kind->finish(ss);
	if (!req->err && req->profile && cut && windowed(req)) {
		req->profile->cut = cut;
		req->profile->cut_ns = pt__now_ns() - ss->start_ns;
	}
	if (!req->err && req->profile) {
		pt__backend_note(ss, req->profile);
		note_runtimes(ss, req->profile);
	}
	if (windowed(req)) {
		tg->nsessions--;
		pthread_mutex_lock(&s->lock);
		s->st.sessions_done++;
		pthread_mutex_unlock(&s->lock);
	}
	if (!tg->nsessions)
		pt__target_idle(tg, pt__now_ns());
	pt__backend_end(s, ss);
	if (ss->kind->free)
		ss->kind->free(ss);
	base_free(ss);
	pt__serve_complete(s, req);
}

/* A new session of req's kind, started: NULL if it failed (req answered). */
static struct pt_session *session_begin(struct pt_sampler *s, struct pt_request *req,
					struct pt__target *tg)
{
	const struct pt_session_kind *k = req->kind;
	struct pt_session *ss = base_calloc(1, k->size);
	char line[640];
	int err;

	if (!ss) {
		req->err = -ENOMEM;
		pt__serve_complete(s, req);
		return NULL;
	}
	*ss = (struct pt_session){ .kind = k, .s = s, .o = &s->o, .req = req, .t = tg->t,
				   .rule = tg->rule, .target = tg, .start_ns = pt__now_ns(),
				   .start_wall = pt__wall_ns() };
	ss->end_ns = ss->start_ns;
	if ((k->flags & PT_KIND_F_ATTACH) && tg->t)
		pt_runtimes_counts(pt_tracee_runtimes(tg->t), &ss->rt0);
	if (windowed(req)) {
		ss->end_ns += req->duration_ns;
		ss->next_due = ss->start_ns;
		if (k->flags & PT_KIND_F_TICKS)
			ss->period_ns = 1000000000ull / (uint64_t)req->hz;
	}
	err = pt__backend_begin(ss, s->o.backend, line, sizeof(line));
	if (line[0])
		pt__log(s, err ? 2 : 1, "%s", line);
	if (err || (k->start && (err = k->start(ss)))) {
		if (k->free)
			k->free(ss);
		base_free(ss);
		req->err = err;
		pt__serve_complete(s, req);
		return NULL;
	}
	return ss;
}

void pt__serve_follows(struct pt_sampler *s)
{
	while (s->follow) {
		struct pt_request *rev = NULL, *m;

		while ((m = s->follow)) {
			s->follow = m->next;
			m->next = rev;
			rev = m;
		}
		while ((m = rev)) {
			rev = m->next;
			m->next = NULL;
			pt__serve(s, m);
		}
	}
}

/* Serves a request of several processes: each as a request of its own, the
 * group answered with the last of them (complete). */
static void serve_group(struct pt_sampler *s, struct pt_request *req)
{
	struct pt_request **members;
	size_t n;

	req->err = 0;
	if (!req->kind)
		req->err = -EINVAL;
	else if (windowed(req) && pt__serve_count(s) >= s->o.max_sessions)
		req->err = -EBUSY;
	else if (!pt__group_new(req, pt__now_ns(), &members, &n))
		req->err = -ENOMEM;
	if (req->err) {
		pt__serve_complete(s, req);
		return;
	}
	s->ngroups++;
	/* Every process seized first, then every session begun: the windows
	 * start together (65 processes seized one by one as each member was
	 * served took 160 ms, 5 % of a 3 s window). An error is the member's
	 * to meet again as it is served. */
	for (size_t i = 0; i < n && (req->kind->flags & PT_KIND_F_ATTACH); i++) {
		struct pt__target *tg;
		int err;

		if ((tg = pt__target_get(s, members[i]->pid, 1, &err)))
			(void)pt__target_attach(s, tg);
	}
	/* The last member answered frees them all: served from the list. */
	for (size_t i = 0; i < n; i++)
		pt__serve_later(s, members[i]);
	pt__log(s, 1, "%s: started for %zu processes", req->kind->name, n);
	pt__serve_follows(s);
}

void pt__serve(struct pt_sampler *s, struct pt_request *req)
{
	const struct pt_session_kind *k = req->kind;
	struct pt__target *tg = NULL;
	struct pt_session *ss;
	int err = 0;

	if (req->nprocs && !req->group) {
		serve_group(s, req);
		return;
	}
	if (!k || (windowed(req) && (k->flags & PT_KIND_F_TICKS) && req->hz <= 0))
		err = -EINVAL;
	else if (windowed(req) && !req->group && pt__serve_count(s) >= s->o.max_sessions)
		err = -EBUSY;
	else
		tg = pt__target_get(s, req->pid, 1, &err);
	if (tg && (k->flags & PT_KIND_F_ATTACH))
		err = pt__target_attach(s, tg);
	if (err) {
		req->err = err;
		pt__serve_complete(s, req);
		return;
	}
	if (!(ss = session_begin(s, req, tg)))
		return;
	if (!windowed(req)) {
		session_end(s, ss, 0, NULL);
		return;
	}
	tg->nsessions++;
	ss->next = s->sessions;
	s->sessions = ss;
	if (!s->next_tick || s->next_tick > ss->start_ns)
		s->next_tick = ss->start_ns;
	pt__log(s, 1, "%s: started pid=%d seconds=%g hz=%d sessions=%d", k->name,
			(int)req->pid, (double)req->duration_ns / 1e9, req->hz, pt__serve_count(s));
}

void pt__serve_end(struct pt_sampler *s, uint64_t now, int stopping)
{
	struct pt_session *ending = NULL, **tail = &ending;

	/* Those ending, out of the list first, each told its window is over
	 * (on_end) before the first is finished: a group's members end
	 * together, and finishing each (its symbols) takes milliseconds. */
	for (struct pt_session **pp = &s->sessions; *pp;) {
		struct pt_session *ss = *pp;
		int gone = pt_tracee_gone(ss->t) ||
			   ((ss->kind->flags & PT_KIND_F_ATTACH) && !pt_tracee_attached(ss->t));

		if (!stopping && now < ss->end_ns && !pt__request_cancelled(ss->req) && !gone &&
		    !pt_tracee_exec_pending(ss->t)) {
			pp = &ss->next;
			continue;
		}
		/* Its last tick's late stops are its samples: taken while it
		 * is still listed (the ticks' callbacks serve listed sessions). */
		pt_stop_report_late(ss->t);
		if (ss->kind->on_end)
			ss->kind->on_end(ss);
		*pp = ss->next;
		ss->next = NULL;
		*tail = ss;
		tail = &ss->next;
	}
	while (ending) {
		struct pt_session *ss = ending;
		int gone = pt_tracee_gone(ss->t) ||
			   ((ss->kind->flags & PT_KIND_F_ATTACH) && !pt_tracee_attached(ss->t));
		int execd = pt_tracee_exec_pending(ss->t);

		ending = ss->next;
		if (gone)
			pt__log(s, 2, "%s: pid=%d exited during the profile", ss->kind->name,
					(int)ss->req->pid);
		else if (execd)
			pt__log(s, 2, "%s: pid=%d exec'd a new program; this profile ends "
					"with what the old one ran", ss->kind->name, (int)ss->req->pid);
		session_end(s, ss, stopping ? -ECANCELED : 0,
			    gone ? "exited" : execd ? "exec'd a new program" : NULL);
	}
}
