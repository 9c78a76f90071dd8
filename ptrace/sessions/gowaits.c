/* Where a Go program's goroutines wait: Go's block and mutex profiles
 * without SetBlockProfileRate, from outside. Its threads' waits say little
 * of a Go program (its threads park in futex whatever its goroutines wait
 * for), so for a Go program podprof reads (gort.h) the waiting profiles
 * look at its goroutines instead, every period (at least MIN_PERIOD_NS,
 * longer when reading them costs more than 1/COST_SHARE of it: 2 % of a
 * core, and the unwinding of each new wait's stack once; a session that
 * took another's read of them no sooner than that one), without a stop;
 * the session's ticks come no faster than the looks:
 *   - every goroutine parked (_Gwaiting) at a look is credited the time
 *     since the look before: the time parked, sampled;
 *   - a wait is the goroutine's id, its saved SP and PC, its wait reason
 *     and its count of leaving the running state (g.trackingSeq, a byte):
 *     one that differs from the last look's is a new wait, one contention,
 *     and its stack is unwound from where it parked (parked.h), once per
 *     wait, re-checked after (left out and counted if it moved: the next
 *     look tries again); a wait that ended and began again at the same
 *     place 256 times between two looks counts as one;
 *   - the stack's last frame is a label token, wait=<Go's wait reason>
 *     ("chan receive", "select", "sync.Mutex.Lock", "sleep", "IO wait"), so
 *     that pprof groups and filters by it (-tagfocus=wait=select);
 *   - mutex: the waits for a sync.Mutex or RWMutex (pt_go_is_lock_wait).
 *     Go's own mutex profile is the holder's stack at its unlock; this one
 *     is the waiters', where the time was lost.
 * A goroutine counts from the first look (the window's start), so one
 * parked all along is credited the whole window, as Go's block profile
 * would credit it once it woke. Running goroutines and those in system
 * calls are not waits (Go's block profile has neither). */
#include "ptrace/sessions/gowaits.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/array.h"
#include "base/map.h"
#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/core/stacks.h"
#include "ptrace/mechanism/tracee.h"
#include "ptrace/runtimes/go/go.h"
#include "ptrace/runtimes/go/gort.h"
#include "ptrace/runtimes/go/parked.h"
#include "ptrace/runtimes/runtimes.h"
#include "ptrace/sampler/log.h"
#include "ptrace/sampler/request.h"
#include "ptrace/sampler/session.h"
#include "ptrace/sampler/targets.h"

#define MIN_PERIOD_NS 10000000ull      /* looks at most 100 times a second */
#define MAX_PERIOD_NS 5000000000ull
#define COST_SHARE 50                  /* a look takes at most 1/50 of the period */
#define MAX_GOROUTINES 100000          /* read per look (more: the rest left out, counted) */

#define ID_UNKNOWN (-1)                /* its stack not yet unwound */
#define ID_NONE (-2)                   /* not in this table (not a lock wait, or the table full) */

/* A wait as the last look saw it. */
struct wait {
	uint64_t goid, sp, pc;
	const char *state;       /* Go's wait reason (a static string) */
	uint8_t seq;
	int32_t block, mutex;    /* its entry in each table, or ID_* */
};

/* The goroutines of a target as read at a tick, shared by the sessions
 * that look at that tick (a block and a mutex window at once read them
 * once): one per target (pt__target_slot), its list kept while a session
 * looks. */
struct read {
	uint64_t at_ns;              /* the tick read at, 0: none kept */
	uint64_t read_ns;            /* what the read took (a sharer's cost too) */
	uint64_t period_ns;          /* the period of the session that made it (or tried) */
	struct pt_go_g *list;
	size_t n, cap, torn;
	int users;                   /* the sessions that look at them: the list kept */
	int refs;                    /* users and the target's slot: the read kept */
};

struct pt__gowaits {
	struct pt_session *ss;
	struct pt_stacks *block, *mutex;
	struct wait *prev, *cur;     /* the last look's waits, this look's */
	size_t nprev, ncur, prev_cap, cur_cap;
	struct base_map by_goid;     /* goid + 1 -> index into prev */
	struct read *rd;             /* this look's goroutines: the target's read */
	struct pt_go_parked *pk;
	uint64_t at_ns;              /* the last look, 0 before the first */
	uint64_t unwind_ns;          /* of the last look, spent unwinding new waits */
	int shared;                  /* the last look took another session's read */
	struct pt__gowaits_stats st;
	char version[32];
};

static struct pt_go *go_of(struct pt__gowaits *gw, struct pt_rt **rt)
{
	*rt = pt_runtimes_get(pt_tracee_runtimes(gw->ss->t), "go");
	return *rt ? pt_go_of(*rt) : NULL;
}

static int same_wait(const struct wait *a, const struct wait *b)
{
	return a->goid == b->goid && a->sp == b->sp && a->pc == b->pc && a->state == b->state &&
	       a->seq == b->seq;
}

/* Adds v to w's entry of st (id), or, the entry not yet made, makes it of
 * frames[0..n) and stores its id. */
static void credit(struct pt__gowaits *gw, struct pt_stacks *st, int32_t *id, const uint64_t *frames,
		   int n, const int64_t *v)
{
	struct pt_sample smp = { .pid = gw->ss->req->pid, .comm = "", .state = 'S', .syscall = -1,
				 .frames = frames, .n = n };
	int got;

	if (!st || *id == ID_NONE)
		return;
	if (*id >= 0) {
		pt_stacks_add_to(st, (size_t)*id, v);
		return;
	}
	got = pt_stacks_add(st, &smp, v);
	*id = got >= 0 ? got : ID_NONE;   /* refused: the table counts it dropped */
}

/* The new waits batch[0..n) (cur's entries at idx[]): unwound, then given
 * their first credit, dt, under a last frame saying their wait reason. */
static int first_credit(struct pt__gowaits *gw, struct pt_go *go, struct pt_rt *rt,
			const struct pt_go_g *const *batch, const size_t *idx, size_t n, uint64_t dt)
{
	struct pt_space *as = pt_tracee_space(gw->ss->t);
	uint64_t t0 = pt__now_ns();
	int err = pt_go_unwind_parked(go, as, batch, n, gw->pk);

	pt_tracee_breathe(gw->ss->t);

	for (size_t i = 0; i < n && !err; i++) {
		struct wait *w = &gw->cur[idx[i]];
		uint64_t *frames = gw->pk->frames[i], token;
		int k = gw->pk->n[i];
		int64_t v[PT_MAX_VALUES] = { 1, (int64_t)dt };

		if (!gw->pk->ok[i]) {
			gw->st.torn++;   /* it moved while read: the next look tries again */
			continue;
		}
		gw->st.waits++;
		if (gw->mutex && !pt_go_is_lock_wait(go, batch[i], frames, k))
			w->mutex = ID_NONE;
		if (k < PT_GO_MAX_FRAMES && (token = pt_go_label_token(rt, "wait", w->state)))
			frames[k++] = token;
		credit(gw, gw->block, &w->block, frames, k, v);
		credit(gw, gw->mutex, &w->mutex, frames, k, v);
	}
	gw->unwind_ns += pt__now_ns() - t0;
	return err;
}

/* This look's waits (cur, indexed by next) become the next one's to
 * compare with (prev); prev's room is reused for the next. */
static void keep_look(struct pt__gowaits *gw, struct base_map *next)
{
	struct wait *room = gw->prev;
	size_t cap = gw->prev_cap;

	base_map_free(&gw->by_goid);
	gw->by_goid = *next;
	gw->prev = gw->cur;
	gw->prev_cap = gw->cur_cap;
	gw->nprev = gw->ncur;
	gw->cur = room;
	gw->cur_cap = cap;
	gw->ncur = 0;
	gw->st.parked = gw->nprev;
}

/* Between the pieces of a look: a signal on its way to one of the
 * target's threads waits no longer than a piece (pt_tracee_breathe; every
 * look runs outside the walks over the target's threads: the tick's end,
 * start, finish). */
static void breathe(void *t)
{
	pt_tracee_breathe(t);
}

/* The goroutines at now: read, or the read another session made at the
 * same tick. Returns their count or a negative errno. */
static int goroutines(struct pt__gowaits *gw, struct pt_go *go, uint64_t now)
{
	struct read *rd = gw->rd;
	size_t max = pt_go_count(go) + 64;
	uint64_t t0;
	int n;

	gw->shared = rd->at_ns == now && now;
	if (gw->shared) {
		gw->st.reads_shared++;
		gw->st.torn += rd->torn;
		return (int)rd->n;
	}
	rd->at_ns = 0;
	if (max > MAX_GOROUTINES)
		max = MAX_GOROUTINES;
	if (BASE_ARRAY_GROW(rd->list, rd->cap, max))
		return -ENOMEM;
	rd->torn = 0;
	t0 = pt__now_ns();
	if ((n = pt_go_goroutines(go, rd->list, max, &rd->torn, breathe, gw->ss->t)) < 0)
		return n;
	rd->read_ns = pt__now_ns() - t0;
	gw->st.torn += rd->torn;
	rd->n = (size_t)n;
	rd->at_ns = now;
	return n;
}

/* One look at now: the goroutines parked, each credited dt since the last
 * look (0 at the first: nothing counted). */
static int look(struct pt__gowaits *gw, struct pt_go *go, struct pt_rt *rt, uint64_t now, uint64_t dt)
{
	const struct pt_go_g *batch[PT_GO_BATCH];
	size_t idx[PT_GO_BATCH], nb = 0;
	struct base_map next = { 0 };
	int n, err = 0;

	if ((n = goroutines(gw, go, now)) < 0)
		return n;
	gw->ncur = 0;
	/* About as many parked as at the last look: one sizing, not a growth
	 * per doubling (no room: the puts below grow it, or fail). */
	(void)base_map_reserve(&next, gw->nprev);
	for (int i = 0; i < n && !err; i++) {
		const struct pt_go_g *g = &gw->rd->list[i];
		struct wait *w;
		uint64_t *at;

		if (g->system || !g->waiting)
			continue;
		if (!(w = BASE_ARRAY_PUSH(gw->cur, gw->ncur, gw->cur_cap)) ||
		    base_map_put(&next, g->goid + 1, gw->ncur - 1)) {
			err = -ENOMEM;
			break;
		}
		*w = (struct wait){ g->goid, g->sp, g->pc, g->state, g->seq, ID_UNKNOWN,
				    gw->mutex ? ID_UNKNOWN : ID_NONE };
		if (!gw->block)
			w->block = ID_NONE;
		if ((at = base_map_get(&gw->by_goid, g->goid + 1)) && same_wait(&gw->prev[*at], w)) {
			w->block = gw->prev[*at].block;
			w->mutex = gw->prev[*at].mutex;
		}
		if (!dt)
			continue;
		if (w->block == ID_UNKNOWN || w->mutex == ID_UNKNOWN) {
			idx[nb] = gw->ncur - 1;
			batch[nb++] = g;
			if (nb == PT_GO_BATCH) {
				err = first_credit(gw, go, rt, batch, idx, nb, dt);
				nb = 0;
			}
		} else {
			int64_t v[PT_MAX_VALUES] = { 0, (int64_t)dt };

			credit(gw, gw->block, &w->block, NULL, 0, v);
			credit(gw, gw->mutex, &w->mutex, NULL, 0, v);
		}
	}
	if (!err && nb)
		err = first_credit(gw, go, rt, batch, idx, nb, dt);
	keep_look(gw, &next);
	return err;
}

void pt__gowaits_look(struct pt__gowaits *gw, uint64_t now, int force)
{
	struct pt_rt *rt;
	struct pt_go *go;
	uint64_t t0;
	int err;

	if (!gw || !gw->ss || now <= gw->at_ns)
		return;
	if (force == PT__GOWAITS_FRESH && now < gw->at_ns + MIN_PERIOD_NS)
		return;
	/* Not due yet, but another session read the goroutines at this tick
	 * and half the period has passed: looked at now too, so that the
	 * sessions keep in step and go on sharing (a session's due time is
	 * its own start's phase, at most one tick from another's). */
	if (!force && now < gw->at_ns + gw->st.period_ns &&
	    !(gw->rd->at_ns == now && now >= gw->at_ns + gw->st.period_ns / 2))
		return;
	if (!(go = go_of(gw, &rt)))
		return;
	t0 = pt__now_ns();
	gw->unwind_ns = 0;
	err = look(gw, go, rt, now, gw->at_ns ? now - gw->at_ns : 0);
	gw->at_ns = now;
	gw->st.looks++;
	/* A look on another's read costs that read too, so that both come
	 * to about the same period (and the log says what a look costs); the
	 * one on another's read keeps at least that one's (below). */
	gw->st.look_ns = pt__now_ns() - t0 + (gw->shared ? gw->rd->read_ns : 0);
	/* Reading at most 1/COST_SHARE of a core, however many goroutines
	 * (a new wait's unwinding is paid once, not each look). */
	gw->st.period_ns = (gw->st.look_ns - gw->unwind_ns) * COST_SHARE;
	if (gw->st.period_ns < MIN_PERIOD_NS)
		gw->st.period_ns = MIN_PERIOD_NS;
	if (gw->st.period_ns > MAX_PERIOD_NS)
		gw->st.period_ns = MAX_PERIOD_NS;
	/* A session on another's read is not due before that one: each
	 * look's cost is its own, and with a period a little shorter (a busy
	 * machine's noise) it would read on its own at the tick before the
	 * other's, and again, and the two would not share (a Go target's
	 * block and mutex windows together beside two busy loops, under
	 * ASan: 57 of 77 looks shared). Not due sooner, it takes the other's
	 * read at the tick it is made, or at the half-period rule above. */
	if (gw->shared && gw->st.period_ns < gw->rd->period_ns)
		gw->st.period_ns = gw->rd->period_ns;
	else if (!gw->shared)
		gw->rd->period_ns = gw->st.period_ns;
	if (err)
		pt__log(gw->ss->s, 2, "%s: pid=%d: a look at the goroutines failed: %s",
				gw->ss->kind->name, (int)gw->ss->req->pid, strerror(-err));
}

/* Drops a reference to rd (its slot's, or a session's): the last frees it. */
static void read_put(struct read *rd)
{
	if (rd && !--rd->refs) {
		base_free(rd->list);
		base_free(rd);
	}
}

/* The target's slot goes (the target forgotten, podprof ending); a
 * session may still hold the read. */
static void read_free(void *p)
{
	read_put(p);
}

static int slot_key;   /* the target's struct read */

int pt__gowaits_new(struct pt_session *ss, struct pt_stacks *block, struct pt_stacks *mutex,
		    struct pt__gowaits **out)
{
	struct pt__gowaits *gw;
	struct pt_rt *rt;
	void **slot;

	*out = NULL;
	if (!(rt = pt_runtimes_get(pt_tracee_runtimes(ss->t), "go")))
		return 0;
	if (!(slot = pt__target_slot(ss, &slot_key, read_free, NULL)))
		return -ENOMEM;
	if (!*slot) {
		if (!(*slot = base_calloc(1, sizeof(struct read))))
			return -ENOMEM;
		((struct read *)*slot)->refs = 1;   /* the slot's */
	}
	if (!(gw = base_calloc(1, sizeof(*gw))) || !(gw->pk = base_malloc(sizeof(*gw->pk)))) {
		base_free(gw);
		return -ENOMEM;
	}
	gw->rd = *slot;
	gw->rd->users++;
	gw->rd->refs++;
	gw->ss = ss;
	gw->block = block;
	gw->mutex = mutex;
	gw->st.period_ns = MIN_PERIOD_NS;
	/* Its ticks only bring the looks: none faster than they can come. */
	if (ss->period_ns && ss->period_ns < MIN_PERIOD_NS)
		ss->period_ns = MIN_PERIOD_NS;
	snprintf(gw->version, sizeof(gw->version), "%s", pt_go_version(pt_go_of(rt)));
	pt__gowaits_look(gw, pt__now_ns(), PT__GOWAITS_NOW);
	*out = gw;
	return 0;
}

void pt__gowaits_end(struct pt__gowaits *gw)
{
	if (gw)
		gw->ss = NULL;   /* freed after this: its target, its log */
}

void pt__gowaits_stats(const struct pt__gowaits *gw, struct pt__gowaits_stats *out)
{
	*out = gw->st;
}

const char *pt__gowaits_version(const struct pt__gowaits *gw)
{
	return gw->version;
}

void pt__gowaits_free(struct pt__gowaits *gw)
{
	if (!gw)
		return;
	/* The last to look: the list's room goes (256 processes' of up to
	 * MAX_GOROUTINES each would stay otherwise). */
	if (!--gw->rd->users) {
		base_free(gw->rd->list);
		gw->rd->list = NULL;
		gw->rd->cap = gw->rd->n = 0;
		gw->rd->at_ns = 0;
	}
	read_put(gw->rd);
	base_free(gw->prev);
	base_free(gw->cur);
	base_free(gw->pk);
	base_map_free(&gw->by_goid);
	base_free(gw);
}
