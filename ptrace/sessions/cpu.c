/* The CPU profile: on-CPU stacks over a window, weighted by the CPU each
 * thread used since its previous sample (the tick's rule is in rule.c),
 * and at the end the CPU no sample carried: the process's CPU clock over
 * the window (the exited threads' too) less the samples' total. That is
 * the CPU of threads that ran between ticks and ended (a thread per
 * request: each lives for less than a tick, most are never caught
 * running), and what a thread sampled once used after its sample until it
 * ended. It goes to the stacks of the threads that were sampled and ended
 * in the window, in proportion to their samples (threads caught running
 * are a fair draw of those that were not: 150 samples of short-lived
 * threads in a 5 s window at 100 Hz stood for 1.50 s, their clocks said
 * 1.52), each under a frame that says so (PT_MARK_UNSAMPLED); with none
 * sampled, to that frame alone. Before that, what the live threads used
 * since their last sample (their next one would carry it: up to a period
 * each, more for a thread a loaded machine kept off its core at the
 * ticks), as far as the samples fall short: each thread's on its last stack
 * of the window under PT_MARK_PENDING (alone for a thread not sampled in
 * it). A thread's first samples of the window carry what it used since
 * its last one, less what it had pending at the window's start (which a
 * profile just before may have settled: back to back, 13 % counted twice).
 * Settling only fills what the samples lack, so the total never passes
 * the process's CPU; but where threads born in the window were
 * drawn (ptrace/rule/cpudraw.h: each draw stands for a period of its
 * thread's CPU, so short threads' draws may carry more than they used),
 * what the samples and the live threads' pending pass the process's CPU
 * by is taken off the ended threads' stacks, in proportion to their CPU;
 * and under perf_event, whose samples and pending carry the kernel's
 * cpu-clock count (it counts time the host took from a thread, which the
 * process's CPU clock leaves out), what they carried over the process's CPU comes
 * off both in proportion. The profile's comment says
 * how much. Owns
 * the session's stack table. Sampler thread only, as every session
 * hook. */
#include "ptrace/sessions/cpu.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/map.h"
#include "base/mem.h"
#include "ptrace/sampler/log.h"
#include "ptrace/sampler/group.h"
#include "ptrace/profile/profile.h"
#include "ptrace/rule/perftick.h"
#include "ptrace/rule/rule.h"
#include "ptrace/core/internal.h"
#include "ptrace/sampler/sampler.h"
#include "ptrace/sampler/session.h"
#include "ptrace/core/stacks.h"
#include "ptrace/mechanism/tracee.h"

struct cpu_session {
	struct pt_session base;
	struct pt_stacks *stacks;
	uint64_t thread_samples;
	uint64_t cpu0;           /* the process's CPU clock at the start */
	int cpu0_ok;             /* it was read (0 is a process forked a moment ago) */
	uint64_t cpu1;           /* and as the window ended (on_end), 0: read at finish */
	uint64_t dropped_ns;     /* CPU of the samples the table refused */
	int scaled;              /* a sample was scaled (ss->scale > 1) */
	struct base_map exited;  /* tids of the threads that ended in the window */
	uint64_t exited_n;
	int exited_full;         /* a tid could not be kept: no settling */
	struct base_map last;    /* tid -> 1 + the entry of its last sample */
	struct base_map by_entry;   /* at the end: entry + 1 -> its threads' pending CPU */
	struct base_map before;  /* tid -> its pending CPU at the start (used before the window) */
	uint64_t pend_alone;     /* pending CPU of threads with no stack in the window */
	uint64_t pend_sum;       /* all the pending CPU of the window */
	int pend_read;           /* the pending was read (on_end, or at finish) */
	uint64_t edge_ns[2];     /* the process's CPU while each edge was read */
	int edge_tries[2];
};

/* The process's CPU clock and every live thread's pending CPU are read as
 * one instant at each edge of the window: a thread's CPU between the
 * clock's read and its own is counted by neither the window nor its
 * samples (at the start) or by both (at the end). The reads take
 * microseconds, but a sampler that loses its core between them (a busy
 * machine) would part them by milliseconds (docs/how-it-works.md). So
 * they are read again while the process's clock moved more than
 * EDGE_MOVED_NS meanwhile, EDGE_TRIES times at most (a target of many
 * busy threads moves it that much in a read of them all: the last try
 * stands). */
#define EDGE_TRIES 3
#define EDGE_MOVED_NS 1000000ull

/* Each live thread's pending CPU at an edge: tid -> ns. */
struct edge {
	struct base_map pend;
	int lost;                /* a thread's could not be kept (no memory) */
};

static void note_edge(void *arg, pid_t tid, uint64_t ns)
{
	struct edge *e = arg;

	if (base_map_put(&e->pend, (uint64_t)tid, ns))
		e->lost = 1;
}

/* One edge of the window (see EDGE_TRIES): the process's CPU clock as the
 * reads began, each live thread's pending into e (emptied at each try). */
static uint64_t read_edge(struct cpu_session *cs, int end, struct edge *e)
{
	struct pt_session *ss = &cs->base;
	uint64_t clock = 0, after, moved = 0;
	int tries = 0;

	do {
		clock = pt_tracee_cpu_ns(ss->t);
		if (!ss->rule)
			break;
		base_map_free(&e->pend);
		e->lost = 0;
		pt_rule_pending_ns(ss->rule, note_edge, e);
		after = pt_tracee_cpu_ns(ss->t);
		moved = after > clock ? after - clock : 0;
	} while (++tries < EDGE_TRIES && clock && moved > EDGE_MOVED_NS);
	cs->edge_ns[end] = moved;
	cs->edge_tries[end] = tries;
	return clock;
}

static int cpu_start(struct pt_session *ss)
{
	struct cpu_session *cs = PT_SESSION_OF(ss, struct cpu_session);
	struct edge e = { 0 };

	/* With what each thread's next sample would carry from before the
	 * window: not the window's, if it has no sample in it (a thread not
	 * kept for want of memory: counted as the window's). */
	cs->cpu0 = read_edge(cs, 0, &e);
	cs->before = e.pend;
	/* (the clock of a live process reads; 0 is a child followed from its
	 * fork that has not run yet) */
	cs->cpu0_ok = cs->cpu0 || !pt_tracee_gone(ss->t);
	return pt_stacks_new(&cs->stacks, (size_t)ss->o->max_stacks);
}

static void cpu_on_exit(struct pt_session *ss, const struct pt_exit *x)
{
	struct cpu_session *cs = PT_SESSION_OF(ss, struct cpu_session);

	cs->exited_n++;
	if (x->tid > 0 && base_map_put(&cs->exited, (uint64_t)x->tid, 1))
		cs->exited_full = 1;
	if (x->tid > 0)
		base_map_del(&cs->last, (uint64_t)x->tid);   /* live threads only */
}

/* At the end, each live thread's CPU since its last sample: summed per
 * entry of its last stack of the window (by_entry: entry + 1 -> ns), or
 * alone for a thread not sampled in it (or no room), less what it had
 * pending at the start and its samples did not carry. */
static void note_pending(void *arg, pid_t tid, uint64_t ns)
{
	struct cpu_session *cs = arg;
	uint64_t *id = base_map_get(&cs->last, (uint64_t)tid), *sum, *was;

	if ((was = base_map_get(&cs->before, (uint64_t)tid)))
		ns = ns > *was ? ns - *was : 0;
	cs->pend_sum += ns;
	if (!id)
		cs->pend_alone += ns;
	else if ((sum = base_map_get(&cs->by_entry, *id)))
		*sum += ns;
	else if (base_map_put(&cs->by_entry, *id, ns))
		cs->pend_alone += ns;
}

static uint64_t pending_weight(void *arg, size_t id, const struct pt_sample *e, const int64_t *v)
{
	struct cpu_session *cs = arg;
	uint64_t *ns = base_map_get(&cs->by_entry, (uint64_t)id + 1);

	(void)e;
	(void)v;
	return ns ? *ns : 0;
}

static uint64_t exited_weight(void *arg, size_t id, const struct pt_sample *e, const int64_t *v)
{
	struct cpu_session *cs = arg;

	(void)id;
	return e->tid > 0 && v[0] > 0 && base_map_get(&cs->exited, (uint64_t)e->tid) ? (uint64_t)v[0] : 0;
}

/* 1 if threads were drawn in the window (ptrace/rule/cpudraw.h). */
static int drew(struct pt_session *ss)
{
	struct pt_rule_stats rs;

	if (!ss->rule)
		return 0;
	pt_rule_stats(ss->rule, &rs);
	return rs.draws > ss->draws0;
}

static uint64_t any_weight(void *arg, size_t id, const struct pt_sample *e, const int64_t *v)
{
	(void)arg;
	(void)id;
	(void)e;
	return v[1] > 0 ? (uint64_t)v[1] : 0;
}

/* Takes `over` off the entries `weight` picks, in proportion to their CPU
 * (rounding loses nothing). Returns what it took: all of it, unless their
 * CPU is less. */
static uint64_t trim(struct cpu_session *cs,
		     uint64_t (*weight)(void *, size_t, const struct pt_sample *, const int64_t *),
		     uint64_t over)
{
	struct pt_stacks *st = cs->stacks;
	size_t n = pt_stacks_count(st);
	uint64_t sum = 0, left;
	struct pt_sample e;
	int64_t v[PT_MAX_VALUES];

	for (size_t i = 0; i < n; i++) {
		pt_stacks_get(st, i, &e, v);
		sum += weight(cs, i, &e, v) ? (uint64_t)v[1] : 0;
	}
	if (!sum)
		return 0;
	if (over > sum)
		over = sum;
	left = over;
	/* each entry's share of what is left, in proportion to the CPU left:
	 * rounding loses nothing */
	for (size_t i = 0; i < n && left; i++) {
		int64_t d[PT_MAX_VALUES] = { 0 };
		uint64_t share;

		pt_stacks_get(st, i, &e, v);
		if (!weight(cs, i, &e, v))
			continue;
		share = (uint64_t)((double)left * (double)v[1] / (double)sum);
		if (share > (uint64_t)v[1])
			share = (uint64_t)v[1];
		if (share > left)
			share = left;
		sum -= (uint64_t)v[1];
		if (!sum)
			share = left;
		d[1] = -(int64_t)share;
		pt_stacks_add_to(st, i, d);
		left -= share;
	}
	return over - left;
}

/* The window's CPU that no sample carried, settled as the header says. A
 * stack refused (past max_stacks: counted as dropped) or no memory: the
 * profile goes out with what is settled so far. */
static void settle(struct cpu_session *cs, struct pt_profile *p)
{
	struct pt_stacks *st = cs->stacks;
	size_t n = pt_stacks_count(st);
	uint64_t cpu1 = cs->cpu1 ? cs->cpu1 : pt_tracee_cpu_ns(cs->base.t), total, due, want;
	int perf;
	struct pt_spread spread = { .arg = cs };
	struct pt_sample e;
	int64_t v[PT_MAX_VALUES];

	p->exited_threads = cs->exited_n;
	/* A window cut short by the target's exec: its CPU clock then holds
	 * what the new program did. One cut by its exit settles against its
	 * clock at the end (0 if it was not read: nothing to settle against).
	 * A session at a lower rate than the ticks': its samples are scaled
	 * estimates, whose noise is no thread's unsampled CPU. */
	if (!cs->cpu0_ok || cpu1 <= cs->cpu0 || cs->exited_full || cs->scaled ||
	    (cs->base.cut && !pt_tracee_gone(cs->base.t)))
		return;
	p->process_cpu_ns = cpu1 - cs->cpu0;
	total = cs->dropped_ns;   /* samples past max_stacks: carried, not kept */
	for (size_t i = 0; i < n; i++) {
		pt_stacks_get(st, i, &e, v);
		total += (uint64_t)v[1];
	}
	/* What the live threads used since their last sample (read as the
	 * window ended: on_end), so the ended threads' part is what is left
	 * after it. */
	if (!cs->pend_read && cs->base.rule)
		pt_rule_pending_ns(cs->base.rule, note_pending, cs);
	cs->pend_read = 1;
	/* Draws that carried more than the ended threads used: the samples
	 * and the live threads' pending pass the process's CPU by that much
	 * (if the samples alone do not, the live threads would otherwise
	 * lose it from their pending). Taken off the ended threads' samples
	 * in proportion to their CPU (as their shortfall is added to them,
	 * the other way), so that their share is the process's CPU less the
	 * live threads'. */
	if (total + cs->pend_sum > p->process_cpu_ns && drew(&cs->base)) {
		p->overdrawn_ns = trim(cs, exited_weight, total + cs->pend_sum - p->process_cpu_ns);
		total -= p->overdrawn_ns;
	}
	/* A perf_event sample carries the kernel's cpu-clock count, which on
	 * a virtual machine also counts time the host took from the thread
	 * while it ran (steal): 1-4 % more than the threads' own CPU clocks
	 * beside another guest's disk writes here, 2 % for a thread that
	 * sleeps and wakes a thousand times a second (docs/how-it-works.md).
	 * The process's CPU clock, as every other, leaves that out: what the
	 * samples and the live threads' pending (the same clock) pass it by
	 * comes off both in proportion, shares unchanged: the samples' part
	 * off every stack here, the pending's as it is capped by what is due
	 * below. */
	perf = cs->base.rule && pt_perftick_backend(cs->base.rule, NULL) == PT_BACKEND_PERF;
	if (perf && total + cs->pend_sum > p->process_cpu_ns) {
		uint64_t over = total + cs->pend_sum - p->process_cpu_ns;

		over = (uint64_t)((double)over * (double)total / (double)(total + cs->pend_sum));
		p->clock_over_ns = trim(cs, any_weight, over < total ? over : total);
		total -= p->clock_over_ns;
	}
	if (p->process_cpu_ns <= total)
		return;
	due = p->process_cpu_ns - total;
	if (perf && due < cs->pend_sum)
		p->clock_over_ns += cs->pend_sum - due;
	/* The live threads' first (a part the table refused is left
	 * unsettled, no ended thread's). */
	if ((want = due < cs->pend_sum ? due : cs->pend_sum)) {
		spread.mark = PT_MARK_PENDING;
		spread.weight = pending_weight;
		spread.alone = cs->pend_alone;
		p->pending_ns = pt_stacks_spread(st, n, &spread, want, &p->pending_stacks);
		p->unsettled_ns = want - p->pending_ns;
		due -= want;
	}
	/* The rest is the ended threads' (with none ended, nobody's: left
	 * out, the comment says how much the profile lacks). */
	if (!due)
		return;
	if (!cs->exited_n) {
		p->unsettled_ns += due;
		return;
	}
	spread.mark = PT_MARK_UNSAMPLED;
	spread.weight = exited_weight;
	spread.alone = 0;
	p->unsampled_ns = pt_stacks_spread(st, n, &spread, due, &p->exited_stacks);
	p->unsettled_ns += due - p->unsampled_ns;
}

static void cpu_on_sample(struct pt_session *ss, const struct pt_sample *smp)
{
	struct cpu_session *cs = PT_SESSION_OF(ss, struct cpu_session);
	/* The CPU a thread used since it was last looked at covers one tick
	 * period, or the session's if that is longer. */
	/* A draw comes to every CPU session: its weight is its thread's CPU,
	 * not one of this session's ticks'. */
	double scale = smp->tick == PT_TICK_DRAW ? 1.0 : ss->scale;
	uint64_t cpu = smp->cpu_ns, *was;
	int64_t v[PT_MAX_VALUES] = { 0 };   /* all added up, not only the two shown */
	int id;

	/* A thread's first samples of the window carry what it used since
	 * its last one, before the window too (another profile's, maybe
	 * settled there as pending): that part is not this window's. Mostly
	 * the first carries it all; one kept at a biased place carries only a
	 * period (rule.c's biased_stop), and the rest comes with the next. */
	if (smp->tid > 0 && (was = base_map_get(&cs->before, (uint64_t)smp->tid))) {
		if (cpu >= *was) {
			cpu -= *was;
			base_map_del(&cs->before, (uint64_t)smp->tid);
		} else {
			*was -= cpu;
			cpu = 0;
		}
	}
	v[0] = 1;
	v[1] = (int64_t)((double)cpu * scale);

	cs->thread_samples++;
	cs->scaled |= scale > 1.0;
	if ((id = pt_stacks_add(cs->stacks, smp, v)) < 0) {
		cs->dropped_ns += (uint64_t)v[1];
		if (smp->tid > 0)
			base_map_del(&cs->last, (uint64_t)smp->tid);   /* its pending goes alone */
	} else if (smp->tid > 0 && base_map_put(&cs->last, (uint64_t)smp->tid, (uint64_t)id + 1)) {
		base_map_del(&cs->last, (uint64_t)smp->tid);   /* no memory: the same */
	}
}

static void cpu_on_end(struct pt_session *ss)
{
	struct cpu_session *cs = PT_SESSION_OF(ss, struct cpu_session);
	struct edge e = { 0 };

	/* the live threads' pending as the window ends too, not at finish
	 * (sessions ending together finish one after another) */
	cs->cpu1 = read_edge(cs, 1, &e);
	if (ss->rule && e.lost) {
		/* no memory for them all: read again, as they come */
		pt_rule_pending_ns(ss->rule, note_pending, cs);
	} else {
		const struct base_map_slot *slot;
		size_t pos = 0;

		while ((slot = base_map_next(&e.pend, &pos)))
			note_pending(cs, (pid_t)slot->key, slot->val);
	}
	base_map_free(&e.pend);
	cs->pend_read = 1;
}

static int cpu_finish(struct pt_session *ss)
{
	struct cpu_session *cs = PT_SESSION_OF(ss, struct cpu_session);
	struct pt_request *req = ss->req;
	struct pt_profile *p;
	struct pt_sampler_stats st;
	struct pt_tracee_stats ts;
	struct pt_profile acct = { 0 };
	int err;

	settle(cs, &acct);
	err = pt_profile_build(cs->stacks, ss->t, &req->profile);
	p = req->profile;
	if (p) {
		p->time_ns = ss->start_wall;
		p->duration_ns = pt__now_ns() - ss->start_ns;
		p->hz = req->hz;
		p->thread_samples = cs->thread_samples;
		p->process_cpu_ns = acct.process_cpu_ns;
		p->unsampled_ns = acct.unsampled_ns;
		p->pending_ns = acct.pending_ns;
		p->pending_stacks = acct.pending_stacks;
		p->unsettled_ns = acct.unsettled_ns;
		p->exited_threads = acct.exited_threads;
		p->exited_stacks = acct.exited_stacks;
		p->overdrawn_ns = acct.overdrawn_ns;
		p->clock_over_ns = acct.clock_over_ns;
	}
	pt_sampler_stats(ss->s, &st);
	pt_tracee_stats(ss->t, &ts);
	pt__log(ss->s, 1, "profile: done pid=%d thread_samples=%llu stacks=%zu dropped=%llu "
			"pause_us p50=%.1f p99=%.1f unwind_us p50=%.1f p99=%.1f "
			"symbolize_us_per_loc=%.2f locs=%zu symtabs=%llu in %.1f ms"
			" python_captures=%llu python_us_per_capture=%.2f"
			" process_cpu_ms=%.1f pending_ms=%.1f unsampled_ms=%.1f unsettled_ms=%.1f"
			" exited_threads=%llu exited_stacks=%llu overdrawn_ms=%.1f clock_over_ms=%.1f"
			" edges_ms=%.2f/%.2f edge_tries=%d/%d%s",
			(int)req->pid, (unsigned long long)cs->thread_samples,
			pt_stacks_count(cs->stacks), (unsigned long long)pt_stacks_dropped(cs->stacks),
			(double)st.pause_p50_ns / 1e3, (double)st.pause_p99_ns / 1e3,
			(double)st.unwind_p50_ns / 1e3, (double)st.unwind_p99_ns / 1e3,
			p && p->nlocs ? (double)p->symbolize_ns / 1e3 / (double)p->nlocs : 0.0,
			p ? p->nlocs : 0, (unsigned long long)ts.symtab_loads,
			(double)ts.symtab_load_ns / 1e6, (unsigned long long)ts.py_captures,
			ts.py_captures ? (double)ts.py_capture_ns / 1e3 / (double)ts.py_captures : 0.0,
			(double)acct.process_cpu_ns / 1e6, (double)acct.pending_ns / 1e6,
			(double)acct.unsampled_ns / 1e6, (double)acct.unsettled_ns / 1e6,
			(unsigned long long)acct.exited_threads, (unsigned long long)acct.exited_stacks,
			(double)acct.overdrawn_ns / 1e6, (double)acct.clock_over_ns / 1e6,
			(double)cs->edge_ns[0] / 1e6, (double)cs->edge_ns[1] / 1e6,
			cs->edge_tries[0], cs->edge_tries[1], pt__request_cancelled(req) ? " (client gone)" : "");
	return err;
}

static void cpu_free(struct pt_session *ss)
{
	struct cpu_session *cs = PT_SESSION_OF(ss, struct cpu_session);

	pt_stacks_free(cs->stacks);
	base_map_free(&cs->exited);
	base_map_free(&cs->last);
	base_map_free(&cs->by_entry);
	base_map_free(&cs->before);
}

const struct pt_session_kind pt_kind_cpu = {
	.name = "profile",
	.size = sizeof(struct cpu_session),
	.flags = PT_KIND_F_ATTACH | PT_KIND_F_WINDOW | PT_KIND_F_TICKS,
	.start = cpu_start,
	.on_sample = cpu_on_sample,
	.on_exit = cpu_on_exit,
	.finish = cpu_finish,
	.on_end = cpu_on_end,
	.free = cpu_free,
};
