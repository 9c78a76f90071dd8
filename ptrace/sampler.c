#include "ptrace/sampler.h"

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

#include "ptrace/module.h"
#include "ptrace/proc.h"
#include "ptrace/ptrace_internal.h"
#include "ptrace/tracee.h"

#define RING 4096          /* recent pauses kept for medians */
#define MAX_TRACEES 64
#define MAX_RATE_DIV 64

/* One (thread, stack) in a session's aggregate. */
struct entry {
	uint64_t hash;
	uint32_t off, n;       /* frames[off .. off+n) */
	int64_t count, cpu_ns;
	pid_t tid;
	char comm[16];
	char state;
	int syscall;
};

struct session {
	struct pt_request *req;
	struct target *tg;
	uint64_t start_ns, end_ns, start_wall, period_ns, next_due;
	int take;              /* takes the current tick */
	double scale;          /* session period / tick period */
	struct entry *tab;     /* open addressing, cap power of two */
	size_t cap, used;
	uint64_t *frames;
	size_t nframes, frames_cap;
	uint64_t thread_samples, dropped;
	uint64_t late_at_start;
	struct session *next;
};

struct target {
	struct pt_tracee *t;
	int nsessions;
	uint64_t idle_since;
};

struct pt_sampler {
	struct pt_sampler_opts o;
	pt_done_cb done;
	pt_log_cb log;
	void *arg;
	pthread_t thread;
	int evfd, sigfd;
	pthread_mutex_t lock;      /* guards queue, stopping, stats ring */
	struct pt_request *queue;
	int stopping;
	struct session *sessions;
	struct target tg[MAX_TRACEES];
	int ntg;
	uint64_t next_tick;
	uint64_t rng;              /* xorshift state for tick jitter */
	uint64_t ticks, ticks_late;
	struct pt_sampler_stats retired;   /* counters of targets forgotten */
	int rate_div;              /* ticks run at 1/rate_div of the rate asked (adapt_rate) */
	uint64_t duty_wall;        /* when the last tick ended */
	uint64_t win_used, win_wall;   /* this budget window's work and time (adapt_rate) */
	uint64_t rate_changes;
	/* stats */
	uint64_t pauses[RING], unwinds[RING], sorted[RING];
	size_t ring_n;
	struct pt_sampler_stats st;
};

static void logf_(struct pt_sampler *s, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void logf_(struct pt_sampler *s, int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!s->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->log(s->arg, level, msg);
}

void pt_profile_free(struct pt_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nmaps; i++)
		free(p->maps[i].path);
	for (size_t i = 0; i < p->nlocs; i++)
		free(p->locs[i].name);
	free(p->maps);
	free(p->locs);
	free(p->samples);
	free(p->loc_ids);
	free(p);
}

/* ---- stack aggregation ------------------------------------------------ */

static uint64_t hash_frames(pid_t tid, const uint64_t *f, int n)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)tid;

	for (int i = 0; i < n; i++) {
		h ^= f[i];
		h *= 1099511628211ull;
		h ^= h >> 29;
	}
	return h | 1;   /* 0 marks an empty slot */
}

static int table_grow(struct session *ss)
{
	size_t cap = ss->cap ? ss->cap * 2 : 1024;
	struct entry *t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < ss->cap; i++) {
		size_t j;

		if (!ss->tab[i].hash)
			continue;
		for (j = ss->tab[i].hash & (cap - 1); t[j].hash; j = (j + 1) & (cap - 1)) {
		}
		t[j] = ss->tab[i];
	}
	free(ss->tab);
	ss->tab = t;
	ss->cap = cap;
	return 0;
}

static int session_add(struct session *ss, const struct pt_sample *smp, int64_t cpu_ns,
		       int max_stacks)
{
	const uint64_t *f = smp->frames;
	pid_t tid = smp->tid;
	int n = smp->n;
	uint64_t h = hash_frames(tid, f, n);
	size_t j;

	if ((ss->used + 1) * 4 > ss->cap * 3 && table_grow(ss))
		return -ENOMEM;
	for (j = h & (ss->cap - 1); ss->tab[j].hash; j = (j + 1) & (ss->cap - 1)) {
		struct entry *e = &ss->tab[j];

		if (e->hash == h && e->n == (uint32_t)n && e->tid == tid &&
		    !memcmp(ss->frames + e->off, f, (size_t)n * sizeof(*f))) {
			e->count++;
			e->cpu_ns += cpu_ns;
			return 0;
		}
	}
	if (ss->used >= (size_t)max_stacks) {
		ss->dropped++;
		return -E2BIG;
	}
	if (ss->nframes + (size_t)n > ss->frames_cap) {
		size_t cap = ss->frames_cap ? ss->frames_cap * 2 : 4096;
		uint64_t *v;

		while (cap < ss->nframes + (size_t)n)
			cap *= 2;
		v = realloc(ss->frames, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		ss->frames = v;
		ss->frames_cap = cap;
	}
	memcpy(ss->frames + ss->nframes, f, (size_t)n * sizeof(*f));
	ss->tab[j] = (struct entry){ h, (uint32_t)ss->nframes, (uint32_t)n, 1, cpu_ns, tid, "",
				     smp->state, smp->syscall };
	snprintf(ss->tab[j].comm, sizeof(ss->tab[j].comm), "%s", smp->comm);
	ss->nframes += (size_t)n;
	ss->used++;
	return 0;
}

static void session_free(struct session *ss)
{
	if (!ss)
		return;
	free(ss->tab);
	free(ss->frames);
	free(ss);
}

/* ---- building the profile --------------------------------------------- */

struct addr_slot {
	uint64_t addr;   /* + 1; 0 = empty */
	uint32_t loc;
};

static const char *basename_of(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

static int build_profile(struct session *ss, struct pt_profile **out)
{
	struct pt_tracee *t = ss->tg->t;
	struct pt_profile *p = calloc(1, sizeof(*p));
	const struct pt_maps *maps;
	struct addr_slot *idx = NULL;
	size_t icap = 64, nids = 0;
	int err = -ENOMEM;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->time_ns = ss->start_wall;
	p->duration_ns = pt__now_ns() - ss->start_ns;
	p->hz = ss->req->hz;
	p->thread_samples = ss->thread_samples;
	p->dropped_stacks = ss->dropped;
	if (!pt_tracee_gone(t))
		pt_tracee_refresh_maps(t);
	maps = pt_tracee_maps(t);
	/* Mappings: every executable mapping, as Go lists /proc/self/maps. */
	if (maps) {
		p->maps = calloc(maps->n ? maps->n : 1, sizeof(*p->maps));
		if (!p->maps)
			goto out;
		for (size_t i = 0; i < maps->n; i++) {
			const struct pt_map *m = &maps->v[i];
			struct pt_profile_map *pm;

			if (!(m->flags & PT_MAP_X) || (!m->inode && m->path[0] != '['))
				continue;
			pm = &p->maps[p->nmaps];
			pm->start = m->start;
			pm->limit = m->end;
			pm->offset = m->offset;
			if (!(pm->path = strdup(m->path)))
				goto out;
			snprintf(pm->build_id, sizeof(pm->build_id), "%s",
				 pt_tracee_build_id(t, m->start));
			p->nmaps++;
		}
	}
	/* Locations: one per distinct address. */
	while (icap < ss->nframes * 2)
		icap *= 2;
	idx = calloc(icap, sizeof(*idx));
	p->locs = calloc(ss->nframes ? ss->nframes : 1, sizeof(*p->locs));
	p->samples = calloc(ss->used ? ss->used : 1, sizeof(*p->samples));
	p->loc_ids = calloc(ss->nframes ? ss->nframes : 1, sizeof(*p->loc_ids));
	if (!idx || !p->locs || !p->samples || !p->loc_ids)
		goto out;
	for (size_t e = 0; e < ss->cap; e++) {
		const struct entry *en = &ss->tab[e];
		struct pt_profile_sample *sm;

		if (!en->hash)
			continue;
		sm = &p->samples[p->nsamples++];
		sm->first = (uint32_t)nids;
		sm->n = en->n;
		sm->count = en->count;
		sm->cpu_ns = en->cpu_ns;
		sm->tid = en->tid;
		sm->state = en->state;
		sm->syscall = en->syscall;
		memcpy(sm->thread, en->comm, sizeof(sm->thread));
		for (uint32_t k = 0; k < en->n; k++) {
			uint64_t a = ss->frames[en->off + k];
			size_t j;

			for (j = (a * 0x9e3779b97f4a7c15ull >> 20) & (icap - 1);
			     idx[j].addr && idx[j].addr != a + 1; j = (j + 1) & (icap - 1)) {
			}
			if (!idx[j].addr) {
				struct pt_profile_loc *l = &p->locs[p->nlocs];
				const struct pt_module *mod;
				const char *name;
				char buf[PT_PROC_MAX_PATH + 32];

				idx[j].addr = a + 1;
				idx[j].loc = (uint32_t)p->nlocs++;
				l->addr = a;
				l->map = -1;
				for (size_t m = 0; m < p->nmaps; m++)
					if (a >= p->maps[m].start && a < p->maps[m].limit) {
						l->map = (int)m;
						break;
					}
				uint64_t t0 = pt__now_ns();

				pt_tracee_symbolize(t, a, &name, &mod);
				p->symbolize_ns += pt__now_ns() - t0;
				if (name)
					snprintf(buf, sizeof(buf), "%s", name);
				else if (mod)
					snprintf(buf, sizeof(buf), "%s+0x%llx", basename_of(mod->path),
						 (unsigned long long)(a - mod->bias));
				else
					snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)a);
				if (!(l->name = strdup(buf)))
					goto out;
			}
			p->loc_ids[nids++] = idx[j].loc;
		}
	}
	*out = p;
	p = NULL;
	err = 0;
out:
	free(idx);
	pt_profile_free(p);
	return err;
}

/* ---- targets ----------------------------------------------------------- */

static void add_tracee_stats(struct pt_sampler_stats *st, const struct pt_tracee *t);

static struct target *target_get(struct pt_sampler *s, pid_t pid, int *err)
{
	struct pt_tracee_opts to = {
		.stack_bytes = s->o.stack_bytes,
		.max_frames = s->o.max_frames,
		.max_threads = s->o.max_threads,
		.max_per_tick = s->o.max_per_tick,
		.spin_ns = s->o.spin_ns,
		.wake_fd = s->sigfd,
		.debug_dir = s->o.debug_dir,
	};
	struct target *tg;

	*err = 0;
	for (int i = 0; i < s->ntg; i++)
		if (pt_tracee_pid(s->tg[i].t) == pid) {
			if (!pt_tracee_gone(s->tg[i].t))
				return &s->tg[i];
			if (s->tg[i].nsessions)
				break;
			/* A process gone and no one using it: forget it (its
			 * counters live on in the totals). */
			add_tracee_stats(&s->retired, s->tg[i].t);
			pt_tracee_free(s->tg[i].t);
			s->tg[i] = s->tg[--s->ntg];
			break;
		}
	if (s->ntg == MAX_TRACEES) {
		*err = -EBUSY;
		return NULL;
	}
	tg = &s->tg[s->ntg];
	memset(tg, 0, sizeof(*tg));
	if ((*err = pt_tracee_new(&tg->t, pid, &to)))
		return NULL;
	if ((*err = pt_tracee_refresh_maps(tg->t))) {
		pt_tracee_free(tg->t);
		return NULL;
	}
	s->ntg++;
	return tg;
}

/* ---- requests ---------------------------------------------------------- */

static void complete(struct pt_sampler *s, struct pt_request *req)
{
	s->done(req, s->arg);
}

static void do_symbolize(struct pt_sampler *s, struct pt_request *req)
{
	struct target *tg = target_get(s, req->pid, &req->err);

	if (!tg)
		return;
	pt_tracee_refresh_maps(tg->t);
	req->names = calloc(req->naddrs ? req->naddrs : 1, sizeof(char *));
	if (!req->names) {
		req->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < req->naddrs; i++) {
		const struct pt_module *mod;
		const char *name;

		pt_tracee_symbolize(tg->t, req->addrs[i], &name, &mod);
		if (name)
			req->names[i] = strdup(name);
	}
}

static int count_sessions(const struct pt_sampler *s)
{
	int n = 0;

	for (const struct session *ss = s->sessions; ss; ss = ss->next)
		n++;
	return n;
}

static void start_cpu(struct pt_sampler *s, struct pt_request *req)
{
	struct session *ss;
	struct target *tg;
	int err;

	if (count_sessions(s) >= s->o.max_sessions) {
		req->err = -EBUSY;
		complete(s, req);
		return;
	}
	tg = target_get(s, req->pid, &err);
	if (!tg) {
		req->err = err;
		complete(s, req);
		return;
	}
	if (!pt_tracee_attached(tg->t)) {
		uint64_t t0 = pt__now_ns();

		err = pt_tracee_attach(tg->t);
		if (err) {
			req->err = err;
			complete(s, req);
			return;
		}
		logf_(s, 1, "ptrace: attached pid=%d threads=%zu in %.1f ms", (int)req->pid,
		      pt_tracee_nthreads(tg->t), (double)(pt__now_ns() - t0) / 1e6);
	}
	ss = calloc(1, sizeof(*ss));
	if (!ss) {
		req->err = -ENOMEM;
		complete(s, req);
		return;
	}
	ss->req = req;
	ss->tg = tg;
	ss->start_ns = pt__now_ns();
	ss->start_wall = pt__wall_ns();
	ss->end_ns = ss->start_ns + (uint64_t)req->seconds * 1000000000ull;
	ss->period_ns = 1000000000ull / (uint64_t)req->hz;
	ss->next_due = ss->start_ns;
	tg->nsessions++;
	ss->next = s->sessions;
	s->sessions = ss;
	if (!s->next_tick || s->next_tick > ss->start_ns)
		s->next_tick = ss->start_ns;
	logf_(s, 1, "profile: started pid=%d seconds=%d hz=%d sessions=%d", (int)req->pid,
	      req->seconds, req->hz, count_sessions(s));
}

static void on_snap_sample(void *arg, const struct pt_sample *smp)
{
	struct session *ss = arg;

	ss->thread_samples++;
	session_add(ss, smp, 0, INT32_MAX);
}

/* The thread dump: every thread's stack now, through the snapshot cache. */
static void do_snapshot(struct pt_sampler *s, struct pt_request *req)
{
	struct session ss = { .req = req };
	struct target *tg = target_get(s, req->pid, &req->err);
	uint64_t t0 = pt__now_ns();
	int n, stopped = 0, attached_now = 0;

	if (!tg)
		return;
	if (!pt_tracee_attached(tg->t)) {
		if ((req->err = pt_tracee_attach(tg->t)))
			return;
		attached_now = 1;
	}
	ss.tg = tg;
	ss.start_ns = t0;
	ss.start_wall = pt__wall_ns();
	pt_tracee_poll();
	n = pt_tracee_snapshot(tg->t, 20000000ull, on_snap_sample, &ss, &stopped);
	if (n < 0)
		req->err = n;
	else if (!(req->err = build_profile(&ss, &req->profile))) {
		req->profile->threads_stopped = (uint64_t)stopped;
		req->profile->hz = 0;
	}
	if (!tg->nsessions)
		tg->idle_since = pt__now_ns();
	logf_(s, attached_now ? 1 : 0, "snapshot: pid=%d threads=%d stopped=%d%s in %.2f ms", (int)req->pid, n, stopped,
	      attached_now ? " (attached)" : "", (double)(pt__now_ns() - t0) / 1e6);
	free(ss.tab);
	free(ss.frames);
}

static void finish(struct pt_sampler *s, struct session *ss, int err)
{
	struct pt_request *req = ss->req;
	struct pt_sampler_stats st;
	struct pt_tracee_stats ts;

	req->err = err;
	if (!err) {
		req->err = build_profile(ss, &req->profile);
	}
	ss->tg->nsessions--;
	if (!ss->tg->nsessions)
		ss->tg->idle_since = pt__now_ns();
	pthread_mutex_lock(&s->lock);
	s->st.sessions_done++;
	pthread_mutex_unlock(&s->lock);
	pt_sampler_stats(s, &st);
	pt_tracee_stats(ss->tg->t, &ts);
	logf_(s, 1, "profile: done pid=%d thread_samples=%llu stacks=%zu dropped=%llu "
	      "pause_us p50=%.1f p99=%.1f unwind_us p50=%.1f p99=%.1f "
	      "symbolize_us_per_loc=%.2f locs=%zu symtabs=%llu in %.1f ms%s",
	      (int)req->pid, (unsigned long long)ss->thread_samples, ss->used,
	      (unsigned long long)ss->dropped, (double)st.pause_p50_ns / 1e3,
	      (double)st.pause_p99_ns / 1e3, (double)st.unwind_p50_ns / 1e3,
	      (double)st.unwind_p99_ns / 1e3,
	      req->profile && req->profile->nlocs ?
		      (double)req->profile->symbolize_ns / 1e3 / (double)req->profile->nlocs : 0.0,
	      req->profile ? req->profile->nlocs : 0, (unsigned long long)ts.symtab_loads,
	      (double)ts.symtab_load_ns / 1e6, atomic_load(&req->cancel) ? " (client gone)" : "");
	session_free(ss);
	complete(s, req);
}

/* ---- ticking ---------------------------------------------------------- */

static void on_sample(void *arg, const struct pt_sample *smp)
{
	struct pt_sampler *s = arg;

	for (struct session *ss = s->sessions; ss; ss = ss->next) {
		if (!ss->take || pt_tracee_pid(ss->tg->t) != smp->pid)
			continue;
		ss->thread_samples++;
		session_add(ss, smp, (int64_t)((double)smp->cpu_ns * ss->scale), s->o.max_stacks);
	}
}

static void on_timing(void *arg, uint64_t pause_ns, uint64_t unwind_ns)
{
	struct pt_sampler *s = arg;

	pthread_mutex_lock(&s->lock);
	s->pauses[s->ring_n % RING] = pause_ns;
	s->unwinds[s->ring_n % RING] = unwind_ns;
	s->ring_n++;
	pthread_mutex_unlock(&s->lock);
}

#define DUTY_WINDOW_NS 500000000ull   /* the budget is checked twice a second */

/* When sampling costs more than its budget of a core (--max-cpu-percent: too
 * many threads to look at, stop and unwind, a crowded machine), the sampler
 * lowers its rate by as many halvings as bring it under the budget, rather
 * than fall behind or crowd the target off its cores; it doubles it again
 * once under a quarter of the budget. The cost is the sampler thread's CPU
 * in its ticks plus the time it spent taking the stops that came after them
 * (the work a lower rate saves; not counted: the wake-ups for those stops,
 * requests, and the target's other events: a churning target's clones and
 * exits cost the same at any rate), over half a second of ticks (a gap with
 * no ticks counts as four periods at most). Over a few ticks it swings with
 * the stops that come in bursts: averaged over ten ticks, 64 busy threads
 * at 1000 Hz changed the rate 32 times in 6 s. */
static void adapt_rate(struct pt_sampler *s, uint64_t now, uint64_t period, uint64_t used)
{
	uint64_t cap = 4 * period * (uint64_t)s->rate_div;
	int div = s->rate_div;
	double duty, left;

	if (s->duty_wall && now > s->duty_wall)
		s->win_wall += now - s->duty_wall < cap ? now - s->duty_wall : cap;
	s->duty_wall = now;
	s->win_used += used;
	if (s->win_wall < DUTY_WINDOW_NS)
		return;
	duty = left = (double)s->win_used / (double)s->win_wall;
	s->win_used = s->win_wall = 0;
	while (left > s->o.max_cpu && div < MAX_RATE_DIV) {
		div *= 2;
		left /= 2;
	}
	if (div == s->rate_div && duty < s->o.max_cpu / 4 && div > 1)
		div /= 2;
	if (div == s->rate_div)
		return;
	s->rate_changes++;
	if (div > s->rate_div)
		logf_(s, 2, "sampler: cannot keep up (sampling took %.1f%% of a core, over its "
		      "budget of %.0f%%): sampling at 1/%d of the requested rate, a tick every %.2f ms",
		      100 * duty, 100 * s->o.max_cpu, div, (double)period * div / 1e6);
	else
		logf_(s, 1, "sampler: keeping up again (sampling took %.1f%% of a core): sampling at "
		      "1/%d of the requested rate", 100 * duty, div);
	s->rate_div = div;
}

static void tick(struct pt_sampler *s, uint64_t now)
{
	uint64_t period = UINT64_MAX, cpu0 = pt__clock_ns(CLOCK_THREAD_CPUTIME_ID);

	for (struct session *ss = s->sessions; ss; ss = ss->next)
		if (ss->period_ns < period)
			period = ss->period_ns;
	if (period == UINT64_MAX) {
		s->next_tick = 0;
		return;
	}
	period *= (uint64_t)s->rate_div;   /* > 1 while the sampler cannot keep up */
	s->ticks++;
	s->ticks_late += now >= s->next_tick + period;
	for (int i = 0; i < s->ntg; i++) {
		struct target *tg = &s->tg[i];
		int any = 0;

		if (!tg->nsessions || !pt_tracee_attached(tg->t))
			continue;
		/* The last tick's late stops, under that tick's flags. */
		pt_tracee_report_late(tg->t);
		for (struct session *ss = s->sessions; ss; ss = ss->next) {
			/* A session's flag holds until its target's next tick:
			 * stops that come after the tick are its samples too. */
			if (ss->tg != tg)
				continue;
			ss->take = 0;
			if (now + period / 2 < ss->next_due)
				continue;
			ss->take = 1;
			/* The CPU a thread used since it was last looked at covers
			 * one tick period, or the session's if that is longer. */
			ss->scale = ss->period_ns > period ? (double)ss->period_ns / (double)period : 1.0;
			ss->next_due += ss->period_ns;
			if (ss->next_due < now)
				ss->next_due = now + ss->period_ns;
			any = 1;
		}
		if (any)
			pt_tracee_tick(tg->t, period, on_sample, on_timing, s);
	}
	adapt_rate(s, pt__now_ns(), period / (uint64_t)s->rate_div,
		   pt__clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0 + pt_tracee_take_late_ns());
	/* Ticks land at a random point of the middle half of each period: at
	 * a fixed phase they lock onto periodic events in the target (a timer
	 * signal at the same rate is then caught in its handler every time).
	 * Never queue ticks: after an overrun the next tick is a period away. */
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	s->next_tick += period - period / 4 + s->rng % (period / 2 + 1);
	if (s->next_tick < pt__now_ns())
		s->next_tick = pt__now_ns() + period / 4;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void pt_sampler_stats(struct pt_sampler *s, struct pt_sampler_stats *out)
{
	uint64_t *tmp = s->sorted;   /* guarded by s->lock */
	size_t n;

	pthread_mutex_lock(&s->lock);
	*out = s->st;
	n = s->ring_n < RING ? s->ring_n : RING;
	if (n) {
		memcpy(tmp, s->pauses, n * sizeof(*tmp));
		qsort(tmp, n, sizeof(*tmp), cmp_u64);
		out->pause_p50_ns = tmp[n / 2];
		out->pause_p99_ns = tmp[n * 99 / 100];
		memcpy(tmp, s->unwinds, n * sizeof(*tmp));
		qsort(tmp, n, sizeof(*tmp), cmp_u64);
		out->unwind_p50_ns = tmp[n / 2];
		out->unwind_p99_ns = tmp[n * 99 / 100];
	}
	pthread_mutex_unlock(&s->lock);
}

static void add_tracee_stats(struct pt_sampler_stats *st, const struct pt_tracee *t)
{
	struct pt_tracee_stats ts;

	pt_tracee_stats(t, &ts);
	st->thread_samples += ts.thread_samples;
	st->stops += ts.stops;
	st->late_stops += ts.late_stops;
	st->incomplete_stacks += ts.incomplete_stacks;
	st->signals_reinjected += ts.signals_reinjected;
	st->frames_total += ts.frames_total;
	st->pause_ns_total += ts.pause_ns_total;
	st->unwind_ns_total += ts.unwind_ns_total;
	st->snapshot_stops += ts.snapshot_stops;
	st->snapshot_reused += ts.snapshot_reused;
	st->maps_rereads += ts.maps_rereads;
	st->short_copies += ts.short_copies;
	st->group_stops += ts.group_stops;
	st->clones += ts.clones;
	st->execs += ts.execs;
}

static void update_stats(struct pt_sampler *s)
{
	struct pt_sampler_stats st = s->retired;

	for (int i = 0; i < s->ntg; i++) {
		add_tracee_stats(&st, s->tg[i].t);
		st.targets_attached += pt_tracee_attached(s->tg[i].t) != 0;
	}
	st.sessions_active = (uint64_t)count_sessions(s);
	st.ticks = s->ticks;
	st.ticks_late = s->ticks_late;
	st.rate_div = (uint64_t)s->rate_div;
	st.rate_changes = s->rate_changes;
	pthread_mutex_lock(&s->lock);
	st.sessions_done = s->st.sessions_done;
	s->st = st;
	pthread_mutex_unlock(&s->lock);
}

/* ---- the thread ---------------------------------------------------------- */

static void drain_fd(int fd)
{
	char buf[1024];

	while (read(fd, buf, sizeof(buf)) > 0) {
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

static void *run(void *arg)
{
	struct pt_sampler *s = arg;
	int again = 0, err;

	if ((err = short_slice(100000)))
		logf_(s, 1, "sampler: cannot ask for short scheduler slices (%s): threads stopped "
		      "between ticks may wait longer for it", strerror(-err));

	for (;;) {
		struct pollfd pfd[2] = { { s->evfd, POLLIN, 0 }, { s->sigfd, POLLIN, 0 } };
		uint64_t now = pt__now_ns(), wake = UINT64_MAX;
		struct pt_request *q;
		int stopping, timeout_ms, polled = 0;

		if (s->sessions && s->next_tick)
			wake = s->next_tick;
		for (int i = 0; i < s->ntg; i++)
			if (pt_tracee_attached(s->tg[i].t) && !s->tg[i].nsessions &&
			    s->tg[i].idle_since + s->o.detach_grace_ns < wake)
				wake = s->tg[i].idle_since + s->o.detach_grace_ns;
		for (struct session *ss = s->sessions; ss; ss = ss->next)
			if (ss->end_ns < wake)
				wake = ss->end_ns;
		if (wake == UINT64_MAX)
			timeout_ms = 1000;
		else
			timeout_ms = wake <= now ? 0 : (int)((wake - now + 999999) / 1000000);
		if (timeout_ms > 1000)
			timeout_ms = 1000;
		if (again)
			timeout_ms = 0;   /* events were left: back to them */
		if (timeout_ms > 0) {
			struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000 };

			/* ms granularity is coarse for 1 kHz; sleep to the exact tick. */
			if (wake != UINT64_MAX && wake > now && wake - now < 2000000ull)
				ts = (struct timespec){ 0, (long)(wake - now) };
			polled = ppoll(pfd, 2, &ts, NULL) >= 0;
			pt_tracee_woke();
		}
		/* Each drain is a read(); skip the ones ppoll says would find nothing. */
		if (!polled || pfd[0].revents)
			drain_fd(s->evfd);
		pthread_mutex_lock(&s->lock);
		q = s->queue;
		s->queue = NULL;
		stopping = s->stopping;
		pthread_mutex_unlock(&s->lock);
		/* The queue is LIFO; serve in arrival order. */
		struct pt_request *rev = NULL;

		while (q) {
			struct pt_request *nx = q->next;

			q->next = rev;
			rev = q;
			q = nx;
		}
		while (rev) {
			struct pt_request *req = rev;

			rev = rev->next;
			if (stopping) {
				req->err = -ECANCELED;
				complete(s, req);
			} else if (req->kind == PT_REQ_SYMBOLIZE) {
				do_symbolize(s, req);
				complete(s, req);
			} else if (req->kind == PT_REQ_SNAPSHOT) {
				do_snapshot(s, req);
				complete(s, req);
			} else {
				start_cpu(s, req);   /* the attach, maybe */
			}
		}
		if (!polled || pfd[1].revents)
			drain_fd(s->sigfd);
		/* Tick before answering stops: a thread waiting in a signal stop
		 * is not running (it is skipped), whereas re-injecting first and
		 * sampling right after would catch it in its handler every time. */
		now = pt__now_ns();
		if (s->sessions && s->next_tick && now >= s->next_tick)
			tick(s, now);
		/* Every tracee's events, stops that came after their tick too. */
		again = pt_tracee_poll();
		now = pt__now_ns();
		for (struct session **pp = &s->sessions; *pp;) {
			struct session *ss = *pp;
			int gone = pt_tracee_gone(ss->tg->t) || !pt_tracee_attached(ss->tg->t);
			int execd = pt_tracee_exec_pending(ss->tg->t);

			if (stopping || now >= ss->end_ns || atomic_load(&ss->req->cancel) || gone ||
			    execd) {
				/* Its last tick's late stops are its samples. */
				pt_tracee_report_late(ss->tg->t);
				*pp = ss->next;
				if (gone)
					logf_(s, 2, "profile: pid=%d exited during the profile",
					      (int)ss->req->pid);
				else if (execd)
					logf_(s, 2, "profile: pid=%d exec'd a new program; this profile "
					      "ends with what the old one ran", (int)ss->req->pid);
				finish(s, ss, stopping ? -ECANCELED : 0);
				continue;
			}
			pp = &ss->next;
		}
		/* Every session that sampled the old program has ended: move on. */
		for (int i = 0; i < s->ntg; i++)
			pt_tracee_ack_exec(s->tg[i].t);
		for (int i = 0; i < s->ntg; i++) {
			struct target *tg = &s->tg[i];

			if (pt_tracee_attached(tg->t) && !tg->nsessions &&
			    (stopping || now >= tg->idle_since + s->o.detach_grace_ns)) {
				int rc = pt_tracee_detach(tg->t, 500000000ull);

				logf_(s, rc ? 2 : 1, "ptrace: %s pid=%d", rc ? "detach pending" : "detached",
				      (int)pt_tracee_pid(tg->t));
			}
		}
		update_stats(s);
		if (stopping)
			break;
	}
	pt_tracee_thread_end();
	return NULL;
}

int pt_sampler_new(struct pt_sampler **out, const struct pt_sampler_opts *opts, pt_done_cb done,
		   pt_log_cb log, void *arg)
{
	struct pt_sampler *s;
	sigset_t set;
	int err;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = *opts;
	if (!(s->o.max_cpu > 0))
		s->o.max_cpu = 0.15;
	s->rng = pt__now_ns() | 1;
	s->rate_div = 1;
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
	pthread_mutex_init(&s->lock, NULL);
	if ((err = -pthread_create(&s->thread, NULL, run, s)))
		goto fail_mutex;
	pthread_setname_np(s->thread, "sampler");   /* for top -H and the like */
	*out = s;
	return 0;
fail_mutex:
	pthread_mutex_destroy(&s->lock);
fail:
	if (s->evfd >= 0)
		close(s->evfd);
	if (s->sigfd >= 0)
		close(s->sigfd);
	free(s);
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
		pt_tracee_free(s->tg[i].t);
	pthread_mutex_destroy(&s->lock);
	close(s->evfd);
	close(s->sigfd);
	free(s);
}
