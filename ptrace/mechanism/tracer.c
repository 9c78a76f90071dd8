/* The tracer: the one thread that traces (ptrace is per thread), taking
 * the events of all its tracees with one wait per event (stops looked at,
 * not reaped: events.c) and handing each to its tracee. Sampler thread
 * only, but for new and free. */
#include "ptrace/mechanism/tracer.h"

#include <errno.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/array.h"
#include "base/mem.h"
#include "ptrace/mechanism/events.h"
#include "ptrace/mechanism/follow.h"
#include "ptrace/space/mem.h"
#include "ptrace/space/objects.h"
#include "ptrace/proc/proc.h"
#include "ptrace/core/internal.h"
#include "ptrace/mechanism/mechanism.h"
#include "ptrace/mechanism/stop.h"
#include "ptrace/mechanism/threads.h"

int pt_tracer_new(struct pt_tracer **out, int wake_fd)
{
	struct pt_tracer *tr = base_calloc(1, sizeof(*tr));

	*out = NULL;
	if (!tr)
		return -ENOMEM;
	tr->wake_fd = wake_fd;
	tr->self_sched_fd = tr->loadavg_fd = tr->watch_fd = -1;
	if (pt_mem_pool_new(&tr->pages) || pt_objects_new(&tr->objects)) {
		pt_tracer_free(tr);
		return -ENOMEM;
	}
	*out = tr;
	return 0;
}

void pt_tracer_free(struct pt_tracer *tr)
{
	if (!tr)
		return;
	if (tr->self_sched_fd >= 0)
		close(tr->self_sched_fd);
	if (tr->loadavg_fd >= 0)
		close(tr->loadavg_fd);
	if (tr->watch_fd >= 0)
		close(tr->watch_fd);
	pt_mem_pool_free(tr->pages);
	pt_objects_free(tr->objects);
	base_free(tr);
}

void pt_tracer_set_events(struct pt_tracer *tr, pt_event_cb cb, void *arg)
{
	tr->event = cb;
	tr->event_arg = arg;
}

uint64_t pt_tracer_take_late_ns(struct pt_tracer *tr)
{
	uint64_t ns = tr->late_ns;

	tr->late_ns = 0;
	return ns;
}

void pt_tracer_woke(struct pt_tracer *tr)
{
	tr->woke_ns = pt__now_ns();
}

int pt_tracer_watch(struct pt_tracer *tr, int fd, struct pt_watch *w)
{
	/* Edge-triggered: an event whose thread has ended answers every poll
	 * with EPOLLHUP, which level-triggered would report for ever (the
	 * sampler spinning until the thread is forgotten: a leader that ended
	 * before its threads stays a zombie until they all have). */
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.ptr = w };

	if (tr->watch_fd < 0 && (tr->watch_fd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return -errno;
	if (epoll_ctl(tr->watch_fd, EPOLL_CTL_ADD, fd, &ev))
		return -errno;
	w->fd = fd;
	w->next = tr->watches;
	w->pprev = &tr->watches;
	if (w->next)
		w->next->pprev = &w->next;
	tr->watches = w;
	return 0;
}

void pt_tracer_unwatch(struct pt_tracer *tr, struct pt_watch *w)
{
	if (!w->pprev)
		return;
	(void)epoll_ctl(tr->watch_fd, EPOLL_CTL_DEL, w->fd, NULL);
	*w->pprev = w->next;
	if (w->next)
		w->next->pprev = w->pprev;
	w->next = NULL;
	w->pprev = NULL;
}

int pt_tracer_watch_fd(const struct pt_tracer *tr)
{
	return tr->watch_fd;
}

int pt_tracer_run_watches(struct pt_tracer *tr)
{
	struct epoll_event ev[16];
	int n = 0;

	if (!tr->watches)
		return 0;
	/* The doorbell's readiness, spent (its fds' own, spent by the poll);
	 * edge-triggered, an fd is not reported again before it is woken
	 * again, so this ends (bounded all the same). */
	for (int round = 0; round < 64 && epoll_wait(tr->watch_fd, ev, 16, 0) == 16; round++) {
	}
	for (struct pt_watch *w = tr->watches, *nx; w; w = nx, n++) {
		nx = w->next;
		w->fn(w);
	}
	return n;
}

static struct pt_tracee *known(struct pt_tracer *tr, pid_t tid, struct pt_thread **thp)
{
	for (struct pt_tracee *x = tr->tracees; x; x = x->next)
		if ((*thp = pt_threads_find(x, tid)))
			return x;
	return NULL;
}

/* The tracee and thread of an event that no tracee knew while its batch was
 * reaped: usually a new thread whose first stop came before its parent's
 * clone event, registered since; else it joins its process's tracee here.
 * NULL if no tracee holds it. */
static struct pt_tracee *owner(struct pt_tracer *tr, pid_t tid, struct pt_thread **thp)
{
	char path[64], buf[2048];
	long long tgid;
	struct pt_tracee *x = known(tr, tid, thp);

	if (x)
		return x;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_status_value(buf, "Tgid", &tgid))
		return NULL;
	for (x = tr->tracees; x; x = x->next)
		if (x->pid == (pid_t)tgid && x->attached && pt__threads_add(x, tid, 0) == 0 &&
		    (*thp = pt_threads_find(x, tid)))
			return x;
	return NULL;
}

#define REAP_MAX 4096   /* events per pt_tracer_poll: the sampler has more to do */

static int poll_events(struct pt_tracer *tr, int keep_woke)
{
	int more = 1, pending = 0, last_status = 0;
	pid_t last = 0;

	/* Not the tracer (no tracee of this thread): reap nothing, not even
	 * the thread's own children's exits, which are not ours to take. */
	if (!tr->tracees)
		return 0;
	/* The poll before a tick and the one after it answer one wake-up: the
	 * second keeps what the first found of it (see poll_ns, late_from and
	 * rq_base in mechanism.h). */
	tr->poll_ns = tr->woke_ns ? tr->woke_ns : pt__now_ns();
	if (!tr->mid_wake)
		tr->late_from = 0;
	tr->mid_wake = keep_woke;
	if (!keep_woke)
		tr->woke_ns = 0;

	/* Stop reaping while reaped[] is full: a status taken must be acted on
	 * (a stop nobody resumes leaves its thread stopped). */
	tr->nreaped = 0;
	for (int k = 0; k < REAP_MAX && tr->nreaped < (int)BASE_LEN(tr->reaped); k++) {
		struct pt_tracee *x;
		struct pt_thread *th;
		int status, held;
		pid_t r = pt__events_wait(-1, &status, __WNOTHREAD, &held);

		if (r <= 0) {
			more = 0;
			break;
		}
		/* The status just acted on, again: what should have ended it
		 * failed (no path of ours leaves a stop held, but a kernel
		 * might refuse to resume one), or the thread stopped again
		 * just so at once. Reaped, acted on as any (the first case no
		 * more returned for ever, the second only without the signal
		 * kept held). */
		if (held && r == last && status == last_status) {
			if (pt__events_reap(r, &status) <= 0)
				continue;
			held = 0;
		}
		last = r;
		last_status = status;
		if ((x = known(tr, r, &th))) {
			pt__stop_on_status(x, th, status, held);
		} else {
			/* Reaped now, else the next wait would return it again;
			 * what is reaped is kept (an exit that came since, maybe). */
			if (held && pt__events_reap(r, &status) <= 0)
				continue;
			tr->reaped[tr->nreaped].tid = r;
			tr->reaped[tr->nreaped++].status = status;
		}
	}
	for (int k = 0; k < tr->nreaped; k++) {
		struct pt__reaped *rp = &tr->reaped[k];
		struct pt_tracee *x;
		struct pt_thread *th;

		if (!rp->tid)
			continue;   /* a birth stop its parent's clone event answered */
		if ((x = owner(tr, rp->tid, &th))) {
			pt__stop_on_status(x, th, rp->status, 0);
		} else if (WIFSTOPPED(rp->status)) {
			/* Traced by us, known to no tracee (its process was
			 * forgotten): let it go, with its signal if it had one. */
			int sig = (rp->status >> 16) == 0 ? WSTOPSIG(rp->status) : 0;

			ptrace(PTRACE_DETACH, rp->tid, 0, (void *)(long)sig);
		}
	}
	tr->nreaped = 0;
	for (struct pt_tracee *x = tr->tracees; x; x = x->next) {
		pt_threads_compact(x);
		pt__follow_interrupt_stale(x);   /* the next, once the last stopped */
		for (size_t i = 0; i < x->n && !pending; i++)
			pending = (x->th[i]->flags & PT_TH_LATE) != 0;
	}
	if (pending && !keep_woke)
		tr->rq_base = pt__stop_own_wait_ns(tr);   /* see poll_ns */
	return more;
}

/* A poll from inside a poll (an event's handler that ends up polling: a
 * fork's child adopted, whose attach failed and detaches) is none: the
 * outer poll's statuses taken but not acted on yet (reaped[]) would be
 * lost, their threads left stopped. The outer poll takes what comes. */
static int poll_once(struct pt_tracer *tr, int keep_woke)
{
	int more;

	if (tr->polling)
		return 0;
	tr->polling = 1;
	more = poll_events(tr, keep_woke);
	tr->polling = 0;
	return more;
}

int pt_tracer_poll(struct pt_tracer *tr)
{
	return poll_once(tr, 0);
}

int pt_tracer_poll_before_tick(struct pt_tracer *tr)
{
	return poll_once(tr, 1);
}

void pt_tracer_breathe(struct pt_tracer *tr)
{
	uint64_t now = pt__now_ns();

	if (now - tr->breathed_ns < PT_TRACER_BREATHE_NS)
		return;
	tr->breathed_ns = now;
	(void)poll_once(tr, 1);
}
