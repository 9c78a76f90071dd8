/* The perf_event backend's tick (see perftick.h) and the choice of
 * backend. A thread's event opens as it is adopted (a thread born while a
 * session samples: perfborn.h), or in its birth stop where clone stops are
 * kept (the threadcreate profile's), else at the first tick that samples;
 * its first period is a random part of one (of its last three
 * quarters at a tick; whole when it opens again at another size). It is
 * sized to the thread's stack: at first 8 KiB, as perf's own default, then
 * what its unwinds read and a quarter more (struct pt_thread's
 * kstack_want, grown when two unwinds in a row had to read past the copy:
 * batch.c), at most --stack-bytes and 65 528 (the kernel's limit); a size
 * grown, or shrunk by an eighth and 1 KiB or more (once a second at most),
 * is a new event. The kernel copies the stack at every sample, so a copy
 * larger than the stack needs is a cost the target pays, about 0.15 us
 * per KiB (a child sampled at 10 kHz on this project's VMs used 2.7 us more
 * CPU per sample with 8 KiB copied, 5.3 us with 32 000 B, 10.4 us with
 * 65 528 B). Sampler thread only. */
#include "ptrace/rule/perftick.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/user.h>

#include "base/mem.h"
#include "ptrace/perf/perfev.h"
#include "ptrace/core/internal.h"
#include "ptrace/rule/cpudraw.h"
#include "ptrace/rule/perfborn.h"
#include "ptrace/rule/rulestate.h"
#include "ptrace/mechanism/stop.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/mechanism/tracee.h"

#define FIRST_STACK 8192u
#define RETRY_NS 1000000000ull   /* an open that failed is tried again a second later */
#define MIN_PERIOD_NS 10000ull   /* the kernel's least hrtimer period */
#define RESIZE_NS 1000000000ull  /* a copy is made smaller once a second at most */

/* The stack copy th's event should take. */
static size_t want_stack(const struct pt_rule *r, const struct pt_thread *th,
			 const struct pt_rule_thread *rt)
{
	size_t max = r->pcfg.stack_bytes, want;

	want = rt->pf_learned && th->kstack_want ? th->kstack_want : FIRST_STACK;
	if (want > max)
		want = max;
	return want & ~(size_t)7;
}

enum open_how {
	OPEN_TICK,     /* at a tick: a thread present when sampling began */
	OPEN_BORN,     /* in its birth stop, its CPU 0 (its /proc files are not opened there) */
	OPEN_CLONED,   /* just born: adopted, found, or at its parent's clone event (its birth stop came first) */
	OPEN_RESIZE,   /* again, at another stack size: it was sampled until now */
};

/* Opens th's event. */
static void open_event(struct pt_rule *r, struct pt_thread *th, struct pt_rule_thread *rt,
		       uint64_t now, enum open_how how)
{
	int born = how == OPEN_BORN;
	struct pt_perfev_cfg c = r->pcfg;
	uint64_t run = 0, lo;
	int err;

	/* (no period before the first tick that samples: a thread born
	 * between a session's start and that tick waits for it) */
	if (!r->pf_period || now < rt->pf_retry_ns ||
	    (!born && pt_thread_read_sched(th, &run, NULL, NULL)))
		return;
	/* The first sample comes after a random part of a period of the
	 * thread's CPU, as a tick would catch it at a random point: with a
	 * whole period first, a thread that lives for less (a thread per
	 * request) would never be sampled, and its CPU would go under no
	 * stack of its own. Later ones come a period apart (from the next
	 * tick: pt__perf_tick); every sample is weighed by the CPU it
	 * carries, so the first one's length biases nothing. But a short
	 * first period samples the thread that often until the next tick,
	 * each sample on its time, and overfills its ring: a thread present
	 * when sampling began takes its first sample after a quarter of a
	 * period at least (one that uses less of its CPU in the whole window
	 * has it settled as pending, under no stack of its own), and an
	 * event opened again at another stack size starts at the period. */
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	lo = how == OPEN_TICK ? r->pf_period / 4 : MIN_PERIOD_NS;   /* (born, cloned: the whole range) */
	if (lo < MIN_PERIOD_NS)
		lo = MIN_PERIOD_NS;
	c.period_ns = how == OPEN_RESIZE || r->pf_period <= lo ? r->pf_period :
		      lo + r->rng % (r->pf_period - lo);
	c.stack_bytes = want_stack(r, th, rt);
	c.ring_samples = (unsigned)(2 * ((PT_PERF_DRAIN_NS + r->pf_period - 1) / r->pf_period) + 3);
	if ((err = pt_perfev_open(&rt->pev, th->tid, &c))) {
		if (err != -ESRCH) {
			r->st.perf_open_failures++;
			r->pf_err = err;
			rt->pf_retry_ns = now + RETRY_NS;
		}
		return;
	}
	r->st.perf_opens++;
	/* its first period ends at the first tick after this one (born: the next) */
	rt->pf_phase = how == OPEN_RESIZE ? 0 : born ? 1 : 2;
	/* Its first sample carries what it used since its CPU was last
	 * carried (its birth, or the last sample of an event closed since). */
	rt->pf_last = -(int64_t)(run > rt->pf_mark ? run - rt->pf_mark : 0);
}

/* Closes th's event, keeping as pf_mark the point its samples carried its
 * CPU to (its CPU time now less what it used since its last sample). */
static void close_event(struct pt_thread *th, struct pt_rule_thread *rt)
{
	uint64_t run, count;

	if (!pt_thread_read_sched(th, &run, NULL, NULL)) {
		/* (a count unread: what it had pending is lost, not counted twice) */
		int64_t pend = pt_perfev_count(rt->pev, &count) ? 0 : (int64_t)count - rt->pf_last;

		rt->pf_mark = pend > 0 && (uint64_t)pend < run ? run - (uint64_t)pend : run;
	}
	pt_perfev_close(rt->pev);
	rt->pev = NULL;
}

void pt__perf_drop(struct pt_thread *th)
{
	struct pt_rule_thread *rt = th->rule;

	if (rt && rt->pev) {
		pt_perfev_close(rt->pev);
		rt->pev = NULL;
	}
}

uint64_t pt__perf_pending(struct pt_rule *r, struct pt_thread *th)
{
	struct pt_rule_thread *rt = pt__rt(th);
	uint64_t v;

	(void)r;
	if (rt->pev) {
		if (pt_perfev_count(rt->pev, &v))
			return 0;
		return (int64_t)v > rt->pf_last ? (uint64_t)((int64_t)v - rt->pf_last) : 0;
	}
	if (pt_thread_read_sched(th, &v, NULL, NULL))
		return 0;
	return v > rt->pf_mark ? v - rt->pf_mark : 0;
}

/* ---- a tick ------------------------------------------------------------- */

struct drain {
	struct pt_rule *r;
	struct pt_thread *th;
	int n, max;
	int reported;
};

static void perf_sample(void *arg, struct pt_thread *th, struct pt_sample *smp)
{
	struct pt_rule *r = arg;

	smp->cpu_ns = r->pf_w[r->pf_wi++];
	smp->tick = r->cbs.tick;
	smp->state = 'R';   /* it was on a core: the kernel sampled it there */
	pt__rt(th)->pf_learned = 1;
	if (r->cbs.sample)
		r->cbs.sample(r->cbs.arg, smp);
}

static void perf_timing(void *arg, uint64_t pause_ns, uint64_t unwind_ns)
{
	struct pt_rule *r = arg;

	if (r->cbs.timing)
		r->cbs.timing(r->cbs.arg, pause_ns, unwind_ns);
}

/* Unwinds and reports the batch of captures put so far. */
static int flush(struct drain *d)
{
	static const struct pt_stop_ops ops0 = { .sample = perf_sample, .timing = perf_timing };
	struct pt_stop_ops ops = ops0;
	int n = d->n;

	if (!n)
		return 0;
	d->n = 0;
	d->r->pf_wi = 0;
	ops.arg = d->r;
	return pt_stop_report_copies(d->r->t, n, &ops);
}

/* A sample read from a ring: weighed by the CPU its thread used since its
 * previous one (the event's count), put into the next slot of the batch.
 * Returns 1 to stop the drain: the batch is full (the caller reports it
 * and drains on), or stops of ours hold the slots (the rest waits in the
 * ring). A sample nobody takes is passed over, its CPU with it; one that
 * cannot be put (no user registers, no memory) leaves its CPU to the
 * thread's next sample. */
static int on_record(void *arg, const struct pt_perfev_sample *smp)
{
	struct drain *d = arg;
	struct pt_rule_thread *rt = pt__rt(d->th);
	int64_t w = (int64_t)smp->count - rt->pf_last;
	struct user_regs_struct regs;
	int err = 0;

	if (d->r->cbs.sample && w > 0) {
		/* Its name, read again once a second (threads rename
		 * themselves rarely, mostly right after they start). */
		if (!d->th->comm[0] || pt__now_ns() - d->th->comm_ns > 1000000000ull)
			(void)pt_thread_read_state(d->th);
		pt_perfev_regs(smp, &regs);
		err = !smp->has_regs ? -EFAULT :
		      pt_stop_put_copy(d->r->t, d->n, d->th, &regs, smp->stack, smp->stack_len,
				       smp->stack_whole);
		if (err == -EBUSY)
			return 1;
		if (!err)
			d->r->pf_w[d->n++] = (uint64_t)w;
	}
	d->r->st.perf_samples++;
	d->r->st.perf_stack_bytes += smp->stack_len;
	if (!err)
		rt->pf_last = (int64_t)smp->count;
	return d->n == d->max;
}

/* Drains th's ring into batches of d->max, each reported as it fills
 * (never from inside a drain: a report may see the thread end or exec,
 * which closes its ring). Returns 1 if samples were left (slots busy). */
static int drain_thread(struct drain *d, struct pt_thread *th)
{
	struct pt_rule_thread *rt = pt__rt(th);

	d->th = th;
	while (rt->pev) {
		int n = pt_perfev_drain(rt->pev, on_record, d, &d->r->st.perf_lost);

		if (n < 0 || d->n < d->max)
			return n >= 0 && rt->pev && pt_perfev_pending(rt->pev);
		d->reported += flush(d);
	}
	return 0;
}

/* The samples read and dropped: the thread's CPU carried all the same. */
static int on_record_drop(void *arg, const struct pt_perfev_sample *smp)
{
	struct pt_rule_thread *rt = arg;

	rt->pf_last = (int64_t)smp->count;
	return 0;
}

/* The samples of a thread that ended while stops of ours held the slots:
 * lost, and counted so. */
static int on_record_lost(void *arg, const struct pt_perfev_sample *smp)
{
	struct pt_rule *r = arg;

	(void)smp;
	r->st.perf_lost++;
	return 0;
}

int pt__perf_tick(struct pt_rule *r, uint64_t period_ns, const struct pt_tick_cbs *cbs)
{
	struct pt_tracee *t = r->t;
	int max = pt_tracee_opts(t)->max_per_tick;
	uint64_t now = pt__now_ns();
	struct drain d = { .r = r, .max = max };
	size_t n;

	/* New threads first (their events opened now are drained below). */
	pt__perfborn_tick(r, now);
	n = pt_threads_count(t);
	/* A tick of sessions that take no CPU sample (block, the watch) on a
	 * target nobody samples: its events stay off. */
	if (!cbs->sample && !r->pf_on)
		return 0;
	if (!r->pf_w && !(r->pf_w = base_calloc((size_t)max, sizeof(*r->pf_w))))
		return -ENOMEM;
	if (period_ns != r->pf_period) {
		/* The rate changed (a session's, or the sampler's budget). */
		r->pf_period = period_ns;
		for (size_t i = 0; i < n; i++) {
			struct pt_rule_thread *rt = pt__rt(pt_threads_at(t, i));

			if (rt->pev)
				(void)pt_perfev_set_period(rt->pev, period_ns);
		}
	}
	pt_perftick_resume(r);
	for (size_t i = 0; i < n; i++) {
		struct pt_thread *th = pt_threads_at(t, i);
		struct pt_rule_thread *rt = pt__rt(th);

		if (!rt->pev && !(th->flags & PT_TH_GONE))
			open_event(r, th, rt, now, OPEN_TICK);
		if (!rt->pev)
			continue;
		(void)drain_thread(&d, th);
		/* A period apart from now on: the random first period ends at
		 * the first tick after the open, sample or not (a short one
		 * would otherwise repeat until then). */
		if (rt->pev && rt->pf_phase && !--rt->pf_phase)
			(void)pt_perfev_set_period(rt->pev, r->pf_period);
	}
	/* the batch is reported before the thread table changes */
	d.reported += flush(&d);
	/* threads the rings' FORK records told of (their events opened as
	 * they are: not resized below, which walks the first n) */
	pt__perfborn_settle(r);
	/* Stack copies resized to what the unwinds found. */
	for (size_t i = 0; i < n; i++) {
		struct pt_thread *th = pt_threads_at(t, i);
		struct pt_rule_thread *rt = pt__rt(th);
		size_t cur, want;

		if (!rt->pev || (th->flags & PT_TH_GONE) || !rt->pf_learned)
			continue;
		cur = pt_perfev_stack_bytes(rt->pev);
		want = want_stack(r, th, rt);
		/* Grown at once (two unwinds in a row read past the copy);
		 * shrunk by an eighth and 1 KiB or more, once a second at most
		 * (a new event: its open and close interrupt the thread's
		 * core). */
		if (want > cur || (want <= cur - cur / 8 && want + 1024 <= cur &&
				   now >= rt->pf_resized_ns + RESIZE_NS)) {
			rt->pf_resized_ns = now;
			/* samples left in the ring, passed over: their CPU goes to
			 * the new event's first (close_event's pending count) */
			(void)pt_perfev_drain(rt->pev, NULL, NULL, &r->st.perf_lost);
			close_event(th, rt);
			open_event(r, th, rt, now, OPEN_RESIZE);
			r->st.perf_reopens += rt->pev != NULL;
		}
	}
	return d.reported;
}

int pt__perf_early(void *arg)
{
	const struct pt_rule *r = arg;

	return r->backend == PT_BACKEND_PERF && r->pf_on && r->pf_period;
}

void pt__perf_born(void *arg, struct pt_thread *th)
{
	struct pt_rule *r = arg;
	struct pt_rule_thread *rt = pt__rt(th);

	if (!rt->pev)
		open_event(r, th, rt, pt__now_ns(), OPEN_BORN);
}

void pt_perftick_born(struct pt_rule *r, pid_t tid)
{
	struct pt_thread *th;

	/* Opened now, as the thread starts (its parent's clone event let it
	 * go), rather than at the next tick: a thread that lives for less
	 * than a tick is sampled too. */
	if (r->backend != PT_BACKEND_PERF || !r->pf_on || !(th = pt_threads_find(r->t, tid)) ||
	    pt__rt(th)->pev)
		return;
	open_event(r, th, pt__rt(th), pt__now_ns(), OPEN_CLONED);
}

void pt_perftick_ended(struct pt_rule *r, pid_t tid)
{
	struct pt_thread *th;
	struct pt_rule_thread *rt;
	struct drain d = { .r = r, .max = pt_tracee_opts(r->t)->max_per_tick };

	/* Its last samples, before the thread is forgotten (at the end of
	 * this poll) and told ended to the sessions. */
	if (r->backend != PT_BACKEND_PERF || !r->pf_w || !(th = pt_threads_find_any(r->t, tid)) ||
	    !(rt = pt__rt(th))->pev)
		return;
	if (drain_thread(&d, th) && rt->pev)
		(void)pt_perfev_drain(rt->pev, on_record_lost, r, &r->st.perf_lost);
	flush(&d);
	if (rt->pev) {
		pt_perfev_close(rt->pev);
		rt->pev = NULL;
	}
}

/* ---- the backend -------------------------------------------------------- */

void pt_perftick_resume(struct pt_rule *r)
{
	if (r->backend != PT_BACKEND_PERF || r->pf_on)
		return;
	for (size_t i = 0; i < pt_threads_count(r->t); i++) {
		struct pt_rule_thread *rt = pt__rt(pt_threads_at(r->t, i));

		if (rt->pev)
			(void)pt_perfev_enable(rt->pev, 1);
	}
	pt__perfborn_enable(r, 1);
	r->pf_on = 1;
}

void pt_perftick_idle(struct pt_rule *r)
{
	if (r->backend != PT_BACKEND_PERF) {
		pt__draw_idle(r);   /* (the ptrace backend's draws) */
		return;
	}
	if (!r->pf_on)
		return;
	/* Nobody samples the target now: its threads stop paying for samples.
	 * What the rings hold is before any later window. */
	for (size_t i = 0; i < pt_threads_count(r->t); i++) {
		struct pt_rule_thread *rt = pt__rt(pt_threads_at(r->t, i));

		if (!rt->pev)
			continue;
		(void)pt_perfev_enable(rt->pev, 0);
		(void)pt_perfev_drain(rt->pev, on_record_drop, rt, &r->st.perf_lost);
	}
	pt__perfborn_enable(r, 0);
	r->pf_on = 0;
}

int pt_perftick_choose(struct pt_rule *r, enum pt_backend want, int *fresh)
{
	size_t stack = pt_tracee_opts(r->t)->stack_bytes;
	int python = pt_tracee_reads_in_stop(r->t), err;
	char why[320];

	*fresh = 0;
	if (r->decided)
		return 0;
	r->pcfg = (struct pt_perfev_cfg){
		.period_ns = 10000000,
		.stack_bytes = (stack < PT_PERFEV_MAX_STACK ? stack : PT_PERFEV_MAX_STACK) & ~(size_t)7,
	};
	if (want == PT_BACKEND_PTRACE) {
		r->backend = PT_BACKEND_PTRACE;
		snprintf(r->why, sizeof(r->why), "--backend ptrace");
	} else if (want == PT_BACKEND_AUTO && python) {
		r->backend = PT_BACKEND_PTRACE;
		snprintf(r->why, sizeof(r->why),
			 "the target runs CPython, whose frame chain lives in its heap and is read "
			 "while the thread is stopped (a kernel sample copies only the stack)");
	} else if ((err = pt_perfev_probe(pt_tracee_pid(r->t), &r->pcfg, why, sizeof(why)))) {
		if (want == PT_BACKEND_PERF) {
			snprintf(r->why, sizeof(r->why), "%s", why);
			return err;   /* asked for, refused: nothing else will do */
		}
		r->backend = PT_BACKEND_PTRACE;
		snprintf(r->why, sizeof(r->why), "%s; ptrace instead", why);
	} else {
		r->backend = PT_BACKEND_PERF;
		pt__perfborn_start(r);
		snprintf(r->why, sizeof(r->why), "%s%s", why,
			 python ? "; CPython's frames are not read (its frame chain lives in its heap: "
				  "--backend auto samples CPython with ptrace), its interpreter's C "
				  "frames are" : "");
	}
	r->decided = 1;
	r->rng = (uint64_t)pt__now_ns() | 1;
	*fresh = 1;
	return 0;
}

enum pt_backend pt_perftick_backend(const struct pt_rule *r, const char **why)
{
	if (why)
		*why = r->why;   /* a refusal's reason too */
	return r->decided ? r->backend : PT_BACKEND_PTRACE;
}
