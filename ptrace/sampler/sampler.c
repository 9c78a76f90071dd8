/* The sampler thread: the request queue, the targets, the tick schedule and
 * the dispatch of what a tick sees to the sessions it serves. What a session
 * gathers is its kind's (session.h); which threads a tick stops is the
 * rule's (rule.h), which the sampler drives; how they are stopped, the
 * mechanism's (tracee.h), which the rule asks. Runs on its own thread, the
 * sampler thread, but for pt_sampler_new/submit/cancel/pause/alive/stats
 * and free, which any thread may call. */
#include "ptrace/sampler/log.h"
#include "ptrace/sampler/sampler.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ptrace/core/internal.h"
#include "base/mem.h"
#include "ptrace/sampler/group.h"
#include "ptrace/sampler/backends.h"
#include "ptrace/sampler/rate.h"
#include "ptrace/rule/rule.h"
#include "ptrace/sampler/state.h"
#include "ptrace/sampler/serve.h"
#include "ptrace/sampler/session.h"
#include "ptrace/sampler/stats.h"
#include "ptrace/mechanism/stop.h"
#include "ptrace/space/space.h"
#include "ptrace/sampler/targets.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/mechanism/tracee.h"
#include "ptrace/mechanism/tracer.h"

/* ---- ticking ---------------------------------------------------------- */

static void on_sample(void *arg, const struct pt_sample *smp)
{
	struct pt_sampler *s = arg;

	for (struct pt_session *ss = s->sessions; ss; ss = ss->next)
		if (ss->kind->on_sample && pt_tracee_pid(ss->t) == smp->pid &&
		    pt__session_took(ss, smp->tick))
			ss->kind->on_sample(ss, smp);
}

static void on_state(void *arg, const struct pt_thread_state *st)
{
	struct pt_sampler *s = arg;

	for (struct pt_session *ss = s->sessions; ss; ss = ss->next)
		if (ss->take && ss->kind->on_thread_state && pt_tracee_pid(ss->t) == st->pid)
			ss->kind->on_thread_state(ss, st);
}

/* A process that a traced process forked: every group that follows the
 * parent takes it, adopted as it stands in its first stop (its target
 * attached now, during the poll that saw the fork, so that its stop, known
 * by then, is resumed as a new thread's), its members served after the
 * poll. Nobody following it: left alone, the poll lets it go untraced at
 * its first stop. */
static void follow_fork(struct pt_sampler *s, const struct pt_event *ev)
{
	uint64_t now = pt__now_ns();
	struct pt__target *tg = NULL;
	int err = 0, took = 0;

	for (struct pt_session *ss = s->sessions; ss; ss = ss->next) {
		struct pt_request *m;

		if (!ss->req->group || pt_tracee_pid(ss->t) != ev->pid || !pt__group_follows(ss->req, now))
			continue;
		if (!tg && !err && (tg = pt__target_get(s, ev->child, 0, &err)) && (err = pt_tracee_attach(tg->t)))
			tg = NULL;
		if (!tg)
			break;
		if ((m = pt__group_join(ss->req, ev->child, now))) {
			pt__serve_later(s, m);
			took = 1;
		}
	}
	if (err)
		pt__log(s, 2, "pid=%d forked pid=%d, not followed: %s", (int)ev->pid, (int)ev->child,
				strerror(-err));
	else if (took)
		pt__log(s, 1, "pid=%d forked pid=%d: followed", (int)ev->pid, (int)ev->child);
	s->forks_followed += took;
}

static void on_event(void *arg, const struct pt_event *ev)
{
	struct pt_sampler *s = arg;
	uint64_t now = pt__now_ns();
	struct pt_exit x = { .tid = ev->tid, .run_ns = ev->run_ns, .wait_ns = ev->wait_ns,
			     .seen_ns = now, .at_ns = s->woke_est_ns && s->woke_est_ns < now ? s->woke_est_ns : now };

	if (ev->kind == PT_EV_FORK) {
		follow_fork(s, ev);
		return;
	}

	for (int i = 0; i < s->ntg; i++) {
		struct pt__target *tg = &s->tg[i];

		if (pt_tracee_pid(tg->t) != ev->pid)
			continue;
		pt__backend_event(tg, ev);
		for (int k = 0; k < tg->nslots; k++)
			if (tg->slot[k].event && tg->slot[k].p)
				tg->slot[k].event(tg->slot[k].p, ev);
	}

	for (struct pt_session *ss = s->sessions; ss; ss = ss->next) {
		if (pt_tracee_pid(ss->t) != ev->pid)
			continue;
		if (ev->kind == PT_EV_CLONE && ss->kind->on_clone)
			ss->kind->on_clone(ss, ev);
		else if (ev->kind == PT_EV_EXIT && ss->kind->on_exit)
			ss->kind->on_exit(ss, &x);
	}
}

static void on_timing(void *arg, uint64_t pause_ns, uint64_t unwind_ns)
{
	struct pt_sampler *s = arg;

	pthread_mutex_lock(&s->lock);
	pt__stats_ring_add(&s->ring, pause_ns, unwind_ns);
	pthread_mutex_unlock(&s->lock);
}

/* Marks the sessions of tg this tick serves (each at its own rate). Returns
 * the tick's callbacks, or NULL if no session of tg takes it. */
static const struct pt_tick_cbs *tick_sessions(struct pt_sampler *s, struct pt__target *tg,
					       uint64_t now, uint64_t period,
					       struct pt_tick_cbs *cbs)
{
	int any = 0, states = 0, samples = 0;

	for (struct pt_session *ss = s->sessions; ss; ss = ss->next) {
		/* The ticks a session took say which samples are its, even
		 * those whose stops come after later ticks (pt__session_took). */
		if (ss->target != tg)
			continue;
		if (!ss->period_ns || now + period / 2 < ss->next_due) {
			pt__session_tick(ss, s->ticks, 0);
			continue;
		}
		pt__session_tick(ss, s->ticks, 1);
		ss->scale = ss->period_ns > period ? (double)ss->period_ns / (double)period : 1.0;
		ss->next_due += ss->period_ns;
		if (ss->next_due < now)
			ss->next_due = now + ss->period_ns;
		any = 1;
		states |= (ss->kind->flags & PT_KIND_F_STATES) && !ss->no_states;
		samples |= ss->kind->on_sample != NULL;
	}
	/* No session takes CPU samples (the watch, block): the tick stops no
	 * running thread. */
	*cbs = (struct pt_tick_cbs){ .sample = samples ? on_sample : NULL, .timing = on_timing,
				     .state = states ? on_state : NULL, .arg = s, .tick = s->ticks };
	return any ? cbs : NULL;
}

/* The sessions of tg that took this tick, their own work after it (a poll
 * inside may add sessions, never remove one: they end in pt__serve_end). */
static void after_tick(struct pt_sampler *s, struct pt__target *tg, uint64_t now)
{
	for (struct pt_session *ss = s->sessions; ss; ss = ss->next)
		if (ss->target == tg && ss->take && ss->kind->on_tick)
			ss->kind->on_tick(ss, now);
}

/* The log line for a change of rate (see rate.c). */
static void log_rate(struct pt_sampler *s, int change, uint64_t period)
{
	if (change > 0)
		pt__log(s, 2, "sampler: cannot keep up (sampling took %.1f%% of a core, over "
				"its budget of %.0f%%): sampling at 1/%d of the requested rate, a tick "
				"every %.2f ms", 100 * s->rate.duty, 100 * s->rate.max_cpu, s->rate.div,
				(double)period * s->rate.div / 1e6);
	else if (change < 0)
		pt__log(s, 1, "sampler: keeping up again (sampling took %.1f%% of a core): "
				"sampling at 1/%d of the requested rate", 100 * s->rate.duty,
				s->rate.div);
}

static void tick(struct pt_sampler *s, uint64_t now)
{
	uint64_t period = UINT64_MAX, cpu0 = pt__clock_ns(CLOCK_THREAD_CPUTIME_ID), base;

	for (struct pt_session *ss = s->sessions; ss; ss = ss->next)
		if (ss->period_ns && ss->period_ns < period)
			period = ss->period_ns;
	if (period == UINT64_MAX) {
		s->next_tick = 0;
		return;
	}
	base = period;
	period *= (uint64_t)s->rate.div;   /* > 1 while the sampler cannot keep up */
	s->ticks++;
	s->ticks_late += now >= s->next_tick + period;
	for (int i = 0; i < s->ntg; i++) {
		struct pt__target *tg = &s->tg[i];
		struct pt_tick_cbs cbs;

		if (!tg->nsessions || !pt_tracee_attached(tg->t))
			continue;
		/* The earlier ticks' late stops, to the sessions of theirs. */
		pt_stop_report_late(tg->t);
		if (tick_sessions(s, tg, now, period, &cbs)) {
			pt_rule_tick(tg->rule, period, &cbs);
			after_tick(s, tg, now);
		}
	}
	log_rate(s, pt_rate_account(&s->rate, pt__now_ns(), base,
				    pt__clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0 +
				    pt_tracer_take_late_ns(s->tr)), base);
	/* Ticks land at a random point of the middle half of each period: at
	 * a fixed phase they lock onto periodic events in the target (a timer
	 * signal at the same rate is then caught in its handler every time).
	 * Never queue ticks: after an overrun the next tick is a period away. */
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	period *= pt__backend_tick_every(s, period);   /* perf_event: only reading */
	s->next_tick += period - period / 4 + s->rng % (period / 2 + 1);
	if (s->next_tick < pt__now_ns())
		s->next_tick = pt__now_ns() + period / 4;
}

/* ---- stats -------------------------------------------------------------- */

void pt_sampler_stats(struct pt_sampler *s, struct pt_sampler_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->st;
	pt__stats_ring_quantiles(&s->ring, out);   /* its scratch guarded by s->lock */
	pthread_mutex_unlock(&s->lock);
}

static void update_stats(struct pt_sampler *s)
{
	struct pt_sampler_stats st = s->retired;

	for (int i = 0; i < s->ntg; i++) {
		pt__stats_add_target(&st, s->tg[i].t, s->tg[i].rule);
		if (pt_tracee_attached(s->tg[i].t)) {
			st.targets_attached++;
			st.threads_traced += pt_threads_count(s->tg[i].t);
		}
	}
	st.sessions_active = (uint64_t)pt__serve_count(s);
	st.ticks = s->ticks;
	st.ticks_late = s->ticks_late;
	st.rate_div = (uint64_t)s->rate.div;
	st.rate_changes = s->rate.changes;
	st.forks_followed = s->forks_followed;
	pthread_mutex_lock(&s->lock);
	st.sessions_done = s->st.sessions_done;
	s->st = st;
	pthread_mutex_unlock(&s->lock);
}

/* ---- the thread ---------------------------------------------------------- */

/* One read empties either fd: an eventfd's read takes its whole count, and
 * the signalfd carries SIGCHLD alone, which is pending at most once (a
 * standard signal does not queue). A second read would only say EAGAIN, a
 * system call on every wake-up before a new thread's stop is answered. */
static void drain_fd(int fd)
{
	char buf[1024];

	if (read(fd, buf, sizeof(buf)) < 0) {
		/* EAGAIN: nothing was pending */
	}
}

/* Asks for short scheduler slices for the calling thread if it runs at a
 * negative nice value (EEVDF, Linux 6.12 and later: sched_attr's runtime of
 * a SCHED_OTHER thread; older kernels ignore it). A waking thread whose
 * slice is shorter than the running one's may preempt it at once;
 * otherwise the running thread keeps the core to the end of its slice
 * (1.4 ms here), nice or not: with 64 busy threads on 2 cores at 1000 Hz the
 * sampler at nice -10 then woke over a period late for most ticks, and
 * threads stopped between ticks waited a median 3.6 ms for it (28 us with
 * 100 us slices). At nice 0 it is seldom eligible to run first anyway
 * (stops waited 7-9 ms either way), and a short slice only gets its ticks
 * preempted sooner. Returns 0 or -errno. */
static int short_slice(uint64_t ns)
{
	struct {
		uint32_t size, policy;
		uint64_t flags;
		int32_t nice;
		uint32_t priority;
		uint64_t runtime, deadline, period;
	} a = { .size = sizeof(a), .policy = 0 /* SCHED_OTHER */, .runtime = ns };
	int nice;

	errno = 0;
	nice = getpriority(PRIO_PROCESS, 0);   /* this thread's */
	if (nice == -1 && errno)
		return -errno;
	if (nice >= 0)
		return 0;
	a.nice = nice;
	return syscall(SYS_sched_setattr, 0, &a, 0) ? -errno : 0;
}

/* Ends polled this long after the sampler woke are timed as seen. */
#define WAKE_WORK_MAX_NS 1000000ull

/* Whether a session wants the ends of threads timed (struct pt_exit at_ns:
 * the kinds that follow threads' states, their waits to their ends). */
static int times_ends(const struct pt_sampler *s)
{
	for (const struct pt_session *ss = s->sessions; ss; ss = ss->next)
		if (ss->kind->flags & PT_KIND_F_STATES)
			return 1;
	return 0;
}

/* When the loop must wake next: the next tick, a target's detach grace or a
 * session's end, at most a second away; sleeps on the request, SIGCHLD
 * and watched (pt_tracer_watch) fds until then (at once if `again`). Returns 1 if ppoll filled pfd. */
static int sleep_until_due(struct pt_sampler *s, struct pollfd *pfd, int again)
{
	uint64_t now = pt__now_ns(), wake = UINT64_MAX, slept = 0, delay0 = 0;
	int timeout_ms, polled = 0, timed = times_ends(s);

	s->woke_est_ns = 0;
	if (s->sessions && s->next_tick)
		wake = s->next_tick;
	for (int i = 0; i < s->ntg; i++)
		if (pt_tracee_attached(s->tg[i].t) && !s->tg[i].nsessions &&
		    s->tg[i].idle_since + s->o.detach_grace_ns < wake)
			wake = s->tg[i].idle_since + s->o.detach_grace_ns;
	for (struct pt_session *ss = s->sessions; ss; ss = ss->next)
		if (ss->end_ns < wake)
			wake = ss->end_ns;
	if (wake == UINT64_MAX)
		timeout_ms = 1000;
	else
		timeout_ms = wake <= now ? 0 : (int)((wake - now + 999999) / 1000000);
	if (timeout_ms > 1000)
		timeout_ms = 1000;
	if (again || s->follow)
		timeout_ms = 0;   /* events were left, or group members to serve: back to them */
	if (timeout_ms > 0) {
		struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000 };

		/* ms granularity is coarse for 1 kHz; sleep to the exact tick. */
		if (wake != UINT64_MAX && wake > now && wake - now < 2000000ull)
			ts = (struct timespec){ 0, (long)(wake - now) };
		if (timed) {
			slept = pt__now_ns();
			delay0 = pt__stop_own_wait_ns(s->tr);
		}
		polled = ppoll(pfd, 3, &ts, NULL) >= 0;
		pt_tracer_woke(s->tr);
		/* SIGCHLD woke it (a thread ended, or another stop came), and
		 * it may then have waited for a core (its own run delay): the
		 * wake was that much before now, and no tick looked at a
		 * thread since `slept`. */
		if (timed && polled && pfd[1].revents) {
			uint64_t woke = pt__now_ns(), delay1 = pt__stop_own_wait_ns(s->tr);
			uint64_t waited = delay1 > delay0 ? delay1 - delay0 : 0;

			s->woke_at_ns = woke;
			s->woke_est_ns = woke - slept > waited ? woke - waited : slept;
		}
	}
	return polled;
}

/* Takes the queued requests and serves them in arrival order (the queue is
 * LIFO); cancels them all when stopping or paused. Returns `stopping`;
 * *paused tells whether the sampler is paused. */
static int serve_queue(struct pt_sampler *s, int *paused)
{
	struct pt_request *q, *rev = NULL;
	int stopping;

	pthread_mutex_lock(&s->lock);
	q = s->queue;
	s->queue = NULL;
	stopping = s->stopping;
	*paused = s->paused;
	pthread_mutex_unlock(&s->lock);
	while (q) {
		struct pt_request *nx = q->next;

		q->next = rev;
		rev = q;
		q = nx;
	}
	while (rev) {
		struct pt_request *req = rev;

		rev = rev->next;
		if (stopping || *paused) {
			req->err = -ECANCELED;
			pt__serve_complete(s, req);
		} else {
			pt__serve(s, req);   /* the attach, maybe */
		}
	}
	return stopping;
}

/* 1 if target tg is to be let go: no session used it for the grace
 * period, or it got a signal since its last session ended (pt__target_idle:
 * a signal to a traced thread is a round trip through podprof, for nothing
 * while no session needs the target; the loop wakes for it, SIGCHLD);
 * any, when stopping. */
static int idle(const struct pt_sampler *s, const struct pt__target *tg, uint64_t now, int stopping)
{
	return pt_tracee_attached(tg->t) && !tg->nsessions &&
	       (stopping || now >= tg->idle_since + s->o.detach_grace_ns ||
		pt_tracee_signals(tg->t) != tg->signals_idle);
}

/* Detaches the targets no session used for the grace period (all of them
 * when stopping). Every thread of them all is interrupted first, then
 * each target is let go as its threads' stops come: with many processes
 * (a pre-fork server's workers on busy cores, each stopping only when it
 * next runs) the waits overlap instead of adding up. */
static void detach_idle(struct pt_sampler *s, uint64_t now, int stopping)
{
	uint64_t t0 = pt__now_ns(), deadline = t0 + 500000000ull;
	int n = 0, done = 0;

	/* Every session that sampled an old program has ended: move on. */
	for (int i = 0; i < s->ntg; i++)
		pt_tracee_ack_exec(s->tg[i].t);
	for (int i = 0; i < s->ntg; i++)
		if (idle(s, &s->tg[i], now, stopping)) {
			(void)pt_tracee_detach(s->tg[i].t, 0);   /* interrupts, takes what stopped */
			s->tg[i].detach_started = 1;
			n++;
		}
	for (int i = 0; i < s->ntg; i++) {
		struct pt__target *tg = &s->tg[i];
		uint64_t left = deadline > pt__now_ns() ? deadline - pt__now_ns() : 0;
		int rc;

		if (!tg->detach_started)
			continue;
		tg->detach_started = 0;
		rc = pt_tracee_attached(tg->t) ? pt_tracee_detach(tg->t, left) : 0;
		done += !rc;
		pt__log(s, rc ? 2 : 1, "ptrace: %s pid=%d in %.1f ms",
				rc ? "detach pending" : "detached", (int)pt_tracee_pid(tg->t),
				(double)(pt__now_ns() - t0) / 1e6);
	}
	if (n > 1)
		pt__log(s, 1, "ptrace: detached %d processes in %.1f ms%s", done,
				(double)(pt__now_ns() - t0) / 1e6, done < n ? " (the others pending)" : "");
}

static void loop(struct pt_sampler *s)
{
	int again = 0, stopping, paused;

	do {
		struct pollfd pfd[3] = { { s->evfd, POLLIN, 0 }, { s->sigfd, POLLIN, 0 },
					 { pt_tracer_watch_fd(s->tr), POLLIN, 0 } };
		int polled = sleep_until_due(s, pfd, again);
		uint64_t now;

		/* New threads told of (perf_event FORK records): seized and
		 * sampled first, as they run. */
		if (!polled || pfd[2].revents)
			(void)pt_tracer_run_watches(s->tr);
		/* Each drain is a read(); skip the ones ppoll says would find nothing. */
		if (!polled || pfd[0].revents)
			drain_fd(s->evfd);
		atomic_store(&s->beat_ns, pt__now_ns());
		stopping = serve_queue(s, &paused);
		if (!polled || pfd[1].revents)
			drain_fd(s->sigfd);
		/* Every tracee's events before the tick: a new thread waits in
		 * its first stop and its parent in its clone event until they
		 * are answered (a thread resumed with its signal is not sampled
		 * before it has run again: pt_thread_signal_pending). */
		/* The ends polled now are timed by the wake (sleep_until_due),
		 * unless an attach's work came first: a thread may have ended
		 * meanwhile, after the wake. */
		if (s->woke_est_ns && pt__now_ns() - s->woke_at_ns > WAKE_WORK_MAX_NS)
			s->woke_est_ns = 0;
		if (!polled || pfd[1].revents)
			pt_tracer_poll_before_tick(s->tr);
		s->woke_est_ns = 0;   /* events from here on: timed as seen */
		pt__serve_follows(s);   /* processes forked, followed */
		now = pt__now_ns();
		if (s->sessions && s->next_tick && now >= s->next_tick)
			tick(s, now);
		/* and the stops that came after their tick */
		again = pt_tracer_poll(s->tr);
		pt__serve_follows(s);
		now = pt__now_ns();
		/* Paused: every session ends (cancelled) and every target is
		 * detached now, as when stopping, but the thread goes on. */
		pt__serve_end(s, now, stopping || paused);
		detach_idle(s, now, stopping || paused);
		update_stats(s);
	} while (!stopping);
}

static void *run(void *arg)
{
	struct pt_sampler *s = arg;
	int err;

	if ((err = short_slice(100000)))
		pt__log(s, 1, "sampler: cannot ask for short scheduler slices (%s): threads "
				"stopped between ticks may wait longer for it", strerror(-err));
	loop(s);
	atomic_store(&s->running, 0);
	/* The tracees are freed after this thread ends (pt_sampler_free): the
	 * kernel detaches what is still pending then, at once. */
	return NULL;
}

int pt_sampler_new(struct pt_sampler **out, const struct pt_sampler_opts *opts, pt_done_cb done,
		   pt_log_cb log, void *arg)
{
	struct pt_sampler *s;
	sigset_t set;
	int err;

	*out = NULL;
	s = base_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = *opts;
	s->rng = pt__now_ns() | 1;
	pt_rate_init(&s->rate, s->o.max_cpu);
	s->done = done;
	s->log = log;
	s->arg = arg;
	s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	s->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (s->evfd < 0 || s->sigfd < 0) {
		err = -errno;
		goto fail;
	}
	if ((err = pt_tracer_new(&s->tr, s->sigfd)))
		goto fail;
	pt_tracer_set_events(s->tr, on_event, s);
	pthread_mutex_init(&s->lock, NULL);
	atomic_store(&s->running, 1);
	atomic_store(&s->beat_ns, pt__now_ns());
	if ((err = -pthread_create(&s->thread, NULL, run, s)))
		goto fail_mutex;
	pthread_setname_np(s->thread, "sampler");   /* for top -H and the like */
	*out = s;
	return 0;
fail_mutex:
	pthread_mutex_destroy(&s->lock);
fail:
	pt_tracer_free(s->tr);
	if (s->evfd >= 0)
		close(s->evfd);
	if (s->sigfd >= 0)
		close(s->sigfd);
	base_free(s);
	return err;
}

static void wake(struct pt_sampler *s)
{
	uint64_t one = 1;

	if (write(s->evfd, &one, sizeof(one)) < 0) {
		/* The counter is already non-zero: the sampler will wake. */
	}
}

void pt_sampler_submit(struct pt_sampler *s, struct pt_request *req)
{
	atomic_store(&req->cancel, 0);
	req->err = 0;
	req->profile = NULL;
	req->names = NULL;
	pthread_mutex_lock(&s->lock);
	req->next = s->queue;
	s->queue = req;
	pthread_mutex_unlock(&s->lock);
	wake(s);
}

void pt_sampler_cancel(struct pt_sampler *s, struct pt_request *req)
{
	atomic_store(&req->cancel, 1);
	wake(s);
}

void pt_sampler_pause(struct pt_sampler *s, int paused)
{
	pthread_mutex_lock(&s->lock);
	s->paused = paused != 0;
	pthread_mutex_unlock(&s->lock);
	wake(s);
}

int pt_sampler_alive(struct pt_sampler *s, uint64_t max_ns)
{
	return atomic_load(&s->running) && pt__now_ns() - atomic_load(&s->beat_ns) <= max_ns;
}

void pt_sampler_free(struct pt_sampler *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = 1;
	pthread_mutex_unlock(&s->lock);
	wake(s);
	pthread_join(s->thread, NULL);
	for (int i = 0; i < s->ntg; i++)
		pt__target_free(&s->tg[i]);
	pt_tracer_free(s->tr);
	pthread_mutex_destroy(&s->lock);
	close(s->evfd);
	close(s->sigfd);
	base_free(s);
}
