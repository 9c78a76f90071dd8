/* The session kinds driven directly through their ops (struct
 * pt_session_kind) with synthetic samples and thread states, and the stack
 * table they aggregate into, against the unit-test binary's own maps and
 * names: what each turns its input into, without a sampler loop or a
 * target. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>

#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/sampler/sampler.h"
#include "ptrace/sampler/session.h"
#include "ptrace/sessions/cpu.h"
#include "ptrace/sessions/threads.h"
#include "ptrace/sessions/waiting.h"
#include "ptrace/core/stacks.h"
#include "tests/harness.h"
#include "tests/unit/fake.h"

/* Functions whose addresses stand for frames: their names must come back. */
void unit_marker_leaf(void);
void unit_marker_caller(void);

__attribute__((noinline)) void unit_marker_leaf(void)
{
	__asm__ volatile("nop; nop; nop; nop");
}

__attribute__((noinline)) void unit_marker_caller(void)
{
	unit_marker_leaf();
	__asm__ volatile("nop; nop; nop; nop");
}

static uint64_t leaf_pc(void)
{
	return (uint64_t)(uintptr_t)&unit_marker_leaf + 2;
}

static uint64_t caller_ret(void)
{
	return (uint64_t)(uintptr_t)&unit_marker_caller + 6;
}

static struct pt_sampler *sampler;
static struct pt_sampler_opts sopts = { .stack_bytes = 4096, .max_frames = 64, .max_threads = 64,
					 .max_per_tick = 16, .max_sessions = 4,
					 .max_stacks = 1000 };

static void on_done(struct pt_request *req, void *arg)
{
	(void)req;
	(void)arg;
}

/* A session of kind k for req, started, on the fake tracee. */
static struct pt_session *begin(const struct pt_session_kind *k, struct pt_request *req)
{
	struct pt_session *ss = base_calloc(1, k->size);

	ASSERT(ss);
	if (!sampler)
		ASSERT_OK(pt_sampler_new(&sampler, &sopts, on_done, NULL, NULL));
	req->kind = k;
	*ss = (struct pt_session){ .kind = k, .s = sampler, .o = &sopts, .req = req, .t = F.t,
				   .rule = F.r, .start_ns = pt__now_ns(), .start_wall = pt__wall_ns(),
				   .scale = 1.0 };
	ss->end_ns = ss->start_ns + req->duration_ns;
	ASSERT_OK(k->start(ss));
	return ss;
}

static void end(struct pt_session *ss)
{
	if (ss->kind->free)
		ss->kind->free(ss);
	base_free(ss);
}

static const struct pt_profile_sample *sample_of(const struct pt_profile *p, pid_t tid)
{
	for (size_t i = 0; i < p->nsamples; i++)
		if (p->samples[i].tid == tid)
			return &p->samples[i];
	return NULL;
}

static const char *leaf_name(const struct pt_profile *p, const struct pt_profile_sample *s, int k)
{
	return p->locs[p->loc_ids[s->first + (uint32_t)k]].name;
}

TEST(session_cpu_weighs_samples_and_names_their_frames)
{
	struct pt_request req = { .pid = 0, .duration_ns = 1000000000ull, .hz = 100 };
	uint64_t frames[2] = { leaf_pc(), caller_ret() - 1 };
	struct pt_sample smp = { .tid = FAKE_TID0, .comm = "worker", .state = 'R', .syscall = -1,
				 .frames = frames, .n = 2 };
	const struct pt_profile_sample *s;
	struct pt_session *ss;

	fake_setup(1, 16);
	ss = begin(&pt_kind_cpu, &req);
	/* A session at half the tick's rate weighs each sample twice. */
	ss->scale = 2.0;
	smp.cpu_ns = 3000000;
	pt_kind_cpu.on_sample(ss, &smp);
	smp.cpu_ns = 5000000;
	pt_kind_cpu.on_sample(ss, &smp);
	ASSERT_OK(pt_kind_cpu.finish(ss));
	ASSERT(req.profile);
	ASSERT_EQ(req.profile->nsamples, 1);   /* one (thread, stack): summed */
	s = sample_of(req.profile, FAKE_TID0);
	ASSERT(s);
	ASSERT_EQ(s->value[0], 2);
	ASSERT_EQ(s->value[1], 16000000);
	ASSERT_STR_EQ(s->thread, "worker");
	ASSERT_EQ(s->n, 2);
	ASSERT_STR_EQ(leaf_name(req.profile, s, 0), "unit_marker_leaf");
	ASSERT_STR_EQ(leaf_name(req.profile, s, 1), "unit_marker_caller");
	ASSERT_EQ(req.profile->thread_samples, 2);
	ASSERT_EQ(req.profile->hz, 100);
	pt_profile_free(req.profile);
	end(ss);
	fake_teardown();
}

static uint64_t process_cpu_now(void);
static void burn_process_cpu(uint64_t ns);
static uint64_t profile_cpu(const struct pt_profile *p);
static void feed(struct pt_session *ss, struct pt_sample *smp, pid_t tid, uint64_t ns);

/* The CPU the profile holds for thread tid, all its stacks. */
static uint64_t cpu_of(const struct pt_profile *p, pid_t tid)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < p->nsamples; i++)
		if (p->samples[i].tid == tid)
			sum += (uint64_t)p->samples[i].value[1];
	return sum;
}

/* What a thread had pending as a window began is not the window's. Its
 * first sample mostly carries it all; one kept at a biased place carries a
 * period only (ptrace/rule/rule.c's biased_stop), the rest coming with its
 * next sample, or at the end as pending. Either way the window holds only
 * its own CPU: here two periods for each thread. */
TEST(session_cpu_takes_the_pending_from_before_off_the_samples_that_carry_it)
{
	const uint64_t P = FAKE_PERIOD;
	struct pt_request req = { .pid = 0, .duration_ns = 1000000000ull, .hz = 100 };
	uint64_t frames[2] = { leaf_pc(), caller_ret() - 1 };
	struct pt_sample smp = { .comm = "worker", .state = 'R', .syscall = -1, .frames = frames, .n = 2 };
	struct pt_session *ss;

	fake_setup(2, 16);
	pt__rt(F.th[0])->acc_ns = 16 * P;
	pt__rt(F.th[1])->acc_ns = 16 * P;
	ss = begin(&pt_kind_cpu, &req);
	/* Thread 0: a biased stop kept with a period, then a fair one with
	 * the 16 left and one more. */
	feed(ss, &smp, FAKE_TID0, P);
	smp.cpu_ns = 17 * P;
	pt_kind_cpu.on_sample(ss, &smp);
	pt__rt(F.th[0])->acc_ns = 0;
	/* Thread 1: the biased one only; the 16 left and one more pending at
	 * the end. */
	feed(ss, &smp, FAKE_TID0 + 1, P);
	pt__rt(F.th[1])->acc_ns = 17 * P;
	/* The process uses 60 ms or so in the window: room for the pending
	 * (what the samples did not carry: 40 ms). */
	burn_process_cpu(6 * P);
	ASSERT_OK(pt_kind_cpu.finish(ss));
	ASSERT(req.profile);
	ASSERT_U64_EQ(cpu_of(req.profile, FAKE_TID0), 2 * P);
	ASSERT_U64_EQ(req.profile->pending_ns, 2 * P);   /* thread 1's: 17 less the 15 left */
	pt_profile_free(req.profile);
	end(ss);
	fake_teardown();
}

static uint64_t process_cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Spins until the process has used ns more of its CPU. */
static void burn_process_cpu(uint64_t ns)
{
	uint64_t t0 = process_cpu_now();
	volatile uint64_t spin = 0;

	while (process_cpu_now() - t0 < ns)
		spin++;
}

/* The CPU the profile holds, all its samples. */
static uint64_t profile_cpu(const struct pt_profile *p)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < p->nsamples; i++)
		sum += (uint64_t)p->samples[i].value[1];
	return sum;
}

/* A sample of thread tid carrying ns of its CPU. */
static void feed(struct pt_session *ss, struct pt_sample *smp, pid_t tid, uint64_t ns)
{
	smp->tid = tid;
	smp->cpu_ns = ns;
	pt_kind_cpu.on_sample(ss, smp);
}

/* Draws (ptrace/rule/cpudraw.h) stand for a period each, so the ended
 * threads' may carry more than the process used: that much is taken off
 * their stacks in proportion to their CPU, the live thread's left as it
 * is, and the total is the process's CPU, not a nanosecond lost. */
TEST(session_cpu_takes_what_draws_overcarried_off_the_ended_threads)
{
	struct pt_request req = { .pid = 0, .duration_ns = 1000000000ull, .hz = 100 };
	uint64_t frames[2] = { leaf_pc(), caller_ret() - 1 };
	struct pt_sample smp = { .comm = "worker", .state = 'R', .syscall = -1, .frames = frames, .n = 2 };
	struct pt_exit x = { 0 };
	const struct pt_profile_sample *a, *b, *live;
	struct pt_session *ss;
	uint64_t total, used;

	fake_setup(1, 16);
	ss = begin(&pt_kind_cpu, &req);
	F.r->st.draws = ss->draws0 + 3;   /* the window had draws */
	feed(ss, &smp, FAKE_TID0, 5000000);
	feed(ss, &smp, FAKE_TID0 + 100, 60000000);
	feed(ss, &smp, FAKE_TID0 + 101, 40000000);
	x.tid = FAKE_TID0 + 100;
	pt_kind_cpu.on_exit(ss, &x);
	x.tid = FAKE_TID0 + 101;
	pt_kind_cpu.on_exit(ss, &x);
	/* the process uses 20 ms or so in the window: less than the 105 ms
	 * carried */
	burn_process_cpu(20000000ull);
	ASSERT_OK(pt_kind_cpu.finish(ss));
	ASSERT(req.profile);
	used = req.profile->process_cpu_ns;
	ASSERT(used >= 20000000ull && used < 100000000ull);
	total = profile_cpu(req.profile);
	ASSERT_U64_EQ(total, used);
	ASSERT_U64_EQ(req.profile->overdrawn_ns, 105000000ull - used);
	live = sample_of(req.profile, FAKE_TID0);
	a = sample_of(req.profile, FAKE_TID0 + 100);
	b = sample_of(req.profile, FAKE_TID0 + 101);
	ASSERT(live && a && b);
	ASSERT_EQ(live->value[1], 5000000);
	/* 60:40 before, 60:40 after, within the rounding of the shares (a
	 * nanosecond each: 2 * 1 + 3 * 1) */
	ASSERT(a->value[1] > 0 && b->value[1] > 0);
	ASSERT(llabs(2 * a->value[1] - 3 * b->value[1]) <= 5);
	ASSERT_EQ(a->value[0], 1);   /* the samples are still one each */
	pt_profile_free(req.profile);
	end(ss);
	fake_teardown();
}

/* Leaves a pattern in the stack below the caller's frame, where the
 * frames of the next call it makes will lie. */
static __attribute__((noinline)) void dirty_stack(void)
{
	volatile unsigned char junk[8192];

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = 0x5a;
}

/* A CPU sample adds its count and its CPU to its stack, and nothing else:
 * values the profile does not show are added up all the same, and one
 * left unset (stack garbage, summed) overflowed, which a sanitized build
 * stops at (CI: sampler_lowers_its_rate_when_it_cannot_keep_up). */
TEST(session_cpu_samples_add_only_their_count_and_cpu)
{
	struct pt_request req = { .pid = 0, .duration_ns = 1000000000ull, .hz = 100 };
	uint64_t frames[2] = { leaf_pc(), caller_ret() - 1 };
	struct pt_sample smp = { .comm = "worker", .state = 'R', .syscall = -1, .frames = frames, .n = 2 };
	const struct pt_profile_sample *a;
	struct pt_session *ss;

	fake_setup(1, 16);
	ss = begin(&pt_kind_cpu, &req);
	for (int i = 0; i < 3; i++) {
		dirty_stack();
		feed(ss, &smp, FAKE_TID0, 1000000);
	}
	ASSERT_OK(pt_kind_cpu.finish(ss));
	ASSERT(req.profile);
	a = sample_of(req.profile, FAKE_TID0);
	ASSERT(a);
	ASSERT_EQ(a->value[0], 3);
	for (int k = 2; k < PT_MAX_VALUES; k++)
		ASSERT_EQ(a->value[k], 0);
	pt_profile_free(req.profile);
	end(ss);
	fake_teardown();
}

/* The target's CPU clock, moved on by 5 ms at its jump_at-th read (from
 * 1; every read with every_read), as if the target ran that long while
 * the sampler waited for its core between two reads. */
static struct {
	int reads, jump_at, every_read;
	uint64_t jumped;
} clk;

static uint64_t jumping_clock(pid_t pid)
{
	if (++clk.reads == clk.jump_at || clk.every_read)
		clk.jumped += 5000000ull;
	return pt__process_cpu_ns(pid) + clk.jumped;
}

/* Each edge of the window reads the process's CPU clock and then every
 * thread's pending CPU: a thread's CPU in between is counted by neither
 * at the start or by both at the end. An edge whose clock moved more than
 * a millisecond as it was read is read again, three times at most. */
TEST(session_cpu_reads_an_edge_again_if_the_process_ran_meanwhile)
{
	struct pt_request req = { .pid = 0, .duration_ns = 1000000000ull, .hz = 100 };
	/* the clock jumps: before the start's second read, before the end's
	 * second read, at every read */
	static const struct {
		int jump_at, every_read, reads;
		uint64_t lo, hi;
	} c[] = {
		{ 2, 0, 6, 0, 4000000ull },             /* after the jump: not the window's */
		{ 4, 0, 6, 5000000ull, 9000000ull },    /* before it: the window's */
		{ 0, 1, 12, 30000000ull, 34000000ull }, /* three tries an edge, the last stands */
	};

	for (size_t k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
		struct pt_session *ss;
		uint64_t used;

		fake_setup(1, 16);
		memset(&clk, 0, sizeof(clk));
		clk.jump_at = c[k].jump_at;
		clk.every_read = c[k].every_read;
		F.t->cpu_clock = jumping_clock;
		ss = begin(&pt_kind_cpu, &req);
		pt_kind_cpu.on_end(ss);
		ASSERT_OK(pt_kind_cpu.finish(ss));
		ASSERT(req.profile);
		used = req.profile->process_cpu_ns;
		fprintf(stderr, "  case %zu: %d reads, the window's CPU %.3f ms\n", k, clk.reads, (double)used / 1e6);
		/* (the test's own CPU between the reads: well under 4 ms) */
		ASSERT(used >= c[k].lo && used < c[k].hi);
		ASSERT_EQ(clk.reads, c[k].reads);
		pt_profile_free(req.profile);
		req.profile = NULL;
		end(ss);
		fake_teardown();
	}
}

/* The live threads' pending comes from their own clocks: where draws
 * carried more than the ended threads used but the samples alone do not
 * pass the process's CPU, the excess is still the ended threads' to give
 * back, and the live thread keeps all its pending (before, it lost what
 * the draws had taken, and the comment said nothing was overdrawn). The
 * pending is read as the window ends, not as the profile is finished. */
TEST(session_cpu_keeps_the_live_threads_pending_when_draws_overcarried)
{
	struct pt_request req = { .pid = 0, .duration_ns = 1000000000ull, .hz = 100 };
	uint64_t frames[2] = { leaf_pc(), caller_ret() - 1 };
	struct pt_sample smp = { .comm = "worker", .state = 'R', .syscall = -1, .frames = frames, .n = 2 };
	struct pt_exit x = { 0 };
	struct pt_session *ss;
	uint64_t total, used;

	fake_setup(1, 16);
	ss = begin(&pt_kind_cpu, &req);
	F.r->st.draws = ss->draws0 + 2;
	feed(ss, &smp, FAKE_TID0, 5000000);
	feed(ss, &smp, FAKE_TID0 + 100, 100000000);
	x.tid = FAKE_TID0 + 100;
	pt_kind_cpu.on_exit(ss, &x);
	pt__rt(F.th[0])->acc_ns = 30000000;   /* the live thread's, since its sample */
	/* the process uses 115 ms or so: more than the 105 ms carried, less
	 * than that and the 30 ms pending */
	burn_process_cpu(115000000ull);
	pt_kind_cpu.on_end(ss);
	/* what it runs after the window (while sessions ending with this
	 * one finish) is not the window's */
	pt__rt(F.th[0])->acc_ns += 50000000;
	ASSERT_OK(pt_kind_cpu.finish(ss));
	ASSERT(req.profile);
	used = req.profile->process_cpu_ns;
	ASSERT(used >= 115000000ull && used < 135000000ull);
	total = profile_cpu(req.profile);
	ASSERT_U64_EQ(total, used);
	ASSERT_U64_EQ(req.profile->pending_ns, 30000000ull);
	ASSERT_U64_EQ(req.profile->overdrawn_ns, 135000000ull - used);
	ASSERT_U64_EQ(req.profile->unsampled_ns, 0);
	/* (the pending goes on a stack of its own, under its mark) */
	ASSERT_U64_EQ(cpu_of(req.profile, FAKE_TID0), 5000000ull);
	ASSERT_U64_EQ(cpu_of(req.profile, FAKE_TID0 + 100), used - 35000000ull);
	pt_profile_free(req.profile);
	end(ss);
	fake_teardown();
}

/* Under perf_event a sample carries the kernel's cpu-clock count, which counts
 * time the threads' CPU clocks leave out (steal, on a virtual machine): 1-4 %
 * more beside another guest's disk writes. What the samples and the live
 * threads' pending (the same clock) carried over the process's CPU comes
 * off both in proportion, shares unchanged, and the profile says how much:
 * with the samples alone over it (100 ms carried, 20 used), and with the
 * pending taking them over (100 ms carried and 30 pending, 115 used: the
 * pending is not cut alone). The ptrace backend's samples are the threads'
 * own clocks: nothing is taken there, and the pending fills what is due. */
TEST(session_cpu_takes_the_perf_clocks_excess_off_every_stack)
{
	uint64_t frames[2] = { leaf_pc(), caller_ret() - 1 };
	struct pt_sample smp = { .comm = "worker", .state = 'R', .syscall = -1, .frames = frames, .n = 2 };
	const uint64_t MS = 1000000ull;

	for (int k = 0; k < 4; k++) {
		int perf = k & 1, pend = k >> 1;
		struct pt_request req = { .pid = 0, .duration_ns = 1000000000ull, .hz = 100 };
		const struct pt_profile_sample *a, *b;
		struct pt_session *ss;
		uint64_t total, used, carried;

		fake_setup(2, 16);
		F.r->decided = 1;
		F.r->backend = perf ? PT_BACKEND_PERF : PT_BACKEND_PTRACE;
		ss = begin(&pt_kind_cpu, &req);
		feed(ss, &smp, FAKE_TID0, 60 * MS);
		feed(ss, &smp, FAKE_TID0 + 1, 40 * MS);
		if (pend) {
			/* thread 0 ran 30 ms since its sample (its clock: no
			 * event open, the last sample read at its start) */
			fake_burn(0, 30 * MS, 0);
			if (!perf)
				pt__rt(F.th[0])->last_run_ns = 0;
		}
		burn_process_cpu((pend ? 115 : 20) * MS);
		pt_kind_cpu.on_end(ss);
		ASSERT_OK(pt_kind_cpu.finish(ss));
		ASSERT(req.profile);
		used = req.profile->process_cpu_ns;
		ASSERT(used >= (pend ? 115 : 20) * MS && used < (pend ? 130 : 100) * MS);
		total = profile_cpu(req.profile);
		a = sample_of(req.profile, FAKE_TID0);
		b = sample_of(req.profile, FAKE_TID0 + 1);
		ASSERT(a && b);
		ASSERT_U64_EQ(req.profile->overdrawn_ns, 0);
		/* (ptrace, no pending: the samples stay over the process's CPU) */
		ASSERT_U64_EQ(total, perf || pend ? used : 100 * MS);
		carried = pend ? 130 * MS : 100 * MS;
		if (perf) {
			ASSERT_U64_EQ(req.profile->clock_over_ns, carried - used);
			/* 60:40 still, within the rounding (a nanosecond each) */
			ASSERT(llabs(2 * a->value[1] - 3 * b->value[1]) <= 5);
			/* the pending cut as much as the samples, in proportion */
			ASSERT(llabs((int64_t)(req.profile->pending_ns * 130) - (int64_t)(pend ? 30 * used : 0)) <=
			       (pend ? 130000 : 0));
		} else {
			ASSERT_U64_EQ(req.profile->clock_over_ns, 0);
			ASSERT_EQ(a->value[1], 60 * MS);
			ASSERT_EQ(b->value[1], 40 * MS);
			ASSERT_U64_EQ(req.profile->pending_ns, pend ? used - 100 * MS : 0);
		}
		pt_profile_free(req.profile);
		end(ss);
		fake_teardown();
	}
}

/* One look of thread tid at t ms: blocked in syscall (S), or running. */
static void state(struct pt_session *ss, pid_t tid, uint64_t t0, uint64_t ms, char st, int syscall,
		  int ran)
{
	static const uint64_t frames[1] = { 0x401000 };
	struct pt_thread_state s = { .at_ns = t0 + ms * 1000000ull, .tid = tid, .comm = "w",
				     .state = st, .syscall = syscall, .ran = ran,
				     .stack = st == 'S' ? frames : NULL, .n = st == 'S' };

	ss->kind->on_thread_state(ss, &s);
}

TEST(session_block_and_mutex_count_new_waits_and_their_time)
{
	struct pt_request breq = { .duration_ns = 1000000000ull, .hz = 100 };
	struct pt_request mreq = { .duration_ns = 1000000000ull, .hz = 100 };
	struct pt_session *b, *m;
	const struct pt_profile_sample *s;
	uint64_t t0;

	fake_setup(1, 16);
	b = begin(&pt_kind_block, &breq);
	m = begin(&pt_kind_mutex, &mreq);
	t0 = b->start_ns;
	/* tid 1: one futex wait seen at 10, 20, 30 ms: one contention, 30 ms
	 * (counted from the window's start); then it ran, and waited again
	 * at 40 ms: a second contention, 10 ms more. tid 2: a read wait (not a
	 * lock: block only), 20 ms, then running. */
	for (int k = 1; k <= 3; k++) {
		state(b, 1, t0, 10 * k, 'S', SYS_futex, 0);
		state(m, 1, m->start_ns, 10 * k, 'S', SYS_futex, 0);
		if (k < 3) {
			state(b, 2, t0, 10 * k, 'S', SYS_read, 0);
			state(m, 2, m->start_ns, 10 * k, 'S', SYS_read, 0);
		} else {
			state(b, 2, t0, 10 * k, 'R', -1, 1);
			state(m, 2, m->start_ns, 10 * k, 'R', -1, 1);
		}
	}
	state(b, 1, t0, 40, 'S', SYS_futex, 1);
	state(m, 1, m->start_ns, 40, 'S', SYS_futex, 1);
	ASSERT_OK(pt_kind_block.finish(b));
	ASSERT_OK(pt_kind_mutex.finish(m));
	s = sample_of(breq.profile, 1);
	ASSERT(s);
	ASSERT_EQ(s->value[0], 2);
	ASSERT_EQ(s->value[1], 40000000);
	s = sample_of(breq.profile, 2);
	ASSERT(s);
	ASSERT_EQ(s->value[0], 1);
	ASSERT_EQ(s->value[1], 20000000);
	ASSERT_EQ(s->syscall, SYS_read);
	s = sample_of(mreq.profile, 1);
	ASSERT(s && s->value[0] == 2 && s->value[1] == 40000000);
	ASSERT(!sample_of(mreq.profile, 2));
	pt_profile_free(breq.profile);
	pt_profile_free(mreq.profile);
	end(b);
	end(m);
	fake_teardown();
}

/* One look at thread tid at t ms in state st with its clocks then. */
static void look(struct pt_session *ss, pid_t tid, uint64_t t0, uint64_t ms, char st, uint64_t run_ms,
		 uint64_t rq_ms)
{
	static const uint64_t frames[1] = { 0x401000 };
	struct pt_thread_state s = { .at_ns = t0 + ms * 1000000ull, .tid = tid, .comm = "w", .state = st,
				     .syscall = st == 'S' ? SYS_read : -1, .stack = st == 'S' ? frames : NULL,
				     .n = st == 'S', .run_ns = run_ms * 1000000ull, .wait_ns = rq_ms * 1000000ull };

	ss->kind->on_thread_state(ss, &s);
}

/* Thread tid's birth told: at born_ns (its FORK record's time), or, with
 * born_ns 0, now with its clocks then. */
static void born(struct pt_session *ss, pid_t tid, uint64_t born_ns, uint64_t run_ns, uint64_t wait_ns)
{
	struct pt_event ev = { .kind = PT_EV_CLONE, .tid = 1, .child = tid, .born_ns = born_ns,
			       .run_ns = run_ns, .wait_ns = wait_ns };

	ss->kind->on_clone(ss, &ev);
}

/* A thread followed with no stop is told born after it has run (the
 * perf_event backend's FORK record, read late on a busy machine): its
 * waits count from its birth, as the record stamped it, not from when
 * podprof heard of it; one born before the window counts from then. One
 * told at its birth stop counts from then, less what its clocks then
 * said it had run and waited for a core (to reach that stop), which is
 * no part of a wait since. */
TEST(session_block_counts_a_late_told_thread_from_its_birth)
{
	struct pt_request req = { .duration_ns = 1000000000ull, .hz = 100 };
	struct pt_session *b;
	const struct pt_profile_sample *s;
	struct pt_exit x = { .tid = 7 };
	uint64_t t0, ms = 1000000ull;

	fake_setup(1, 16);
	b = begin(&pt_kind_block, &req);
	t0 = b->start_ns;
	/* tid 7 born at 10 ms, told now; seen in read() at 40 ms; ended at
	 * 50 ms, having run 5 ms and waited 2 ms for a core in all: blocked
	 * 30 ms to the look, 3 ms after it. */
	born(b, 7, t0 + 10 * ms, 0, 0);
	state(b, 7, t0, 40, 'S', SYS_read, 0);
	x.at_ns = x.seen_ns = t0 + 50 * ms;
	x.run_ns = 5 * ms;
	x.wait_ns = 2 * ms;
	pt_kind_block.on_exit(b, &x);
	/* tid 8 born before the window: counted from when it was told */
	born(b, 8, t0 - 500 * ms, 0, 0);
	state(b, 8, t0, 40, 'S', SYS_read, 0);
	/* tid 9 told at its birth stop (now), having run 2 ms and waited 3 ms
	 * for a core; seen in read() at 40 ms with 4 and 5 ms: blocked the
	 * 40 ms less 4 (less the little before now) */
	born(b, 9, 0, 2 * ms, 3 * ms);
	look(b, 9, t0, 40, 'S', 4, 5);
	ASSERT_OK(pt_kind_block.finish(b));
	s = sample_of(req.profile, 9);
	ASSERT(s);
	ASSERT(s->value[1] > 35000000 && s->value[1] <= 36000000);
	s = sample_of(req.profile, 7);
	ASSERT(s);
	ASSERT_EQ(s->value[1], 33000000);
	s = sample_of(req.profile, 8);
	ASSERT(s);
	ASSERT(s->value[1] > 0 && s->value[1] <= 40000000);
	pt_profile_free(req.profile);
	end(b);
	fake_teardown();
}

/* A short thread's waits that no look saw come from its whole life's
 * clocks at its end, less what its seen waits put into stacks, not from
 * the looks' clocks, which lag for a thread waiting for a core (its run
 * delay is added when it gets one): they once made 17 ms of 9. A thread a
 * look found stopped is left out of that. */
TEST(session_block_counts_a_short_threads_unseen_waits_from_its_whole_life)
{
	struct pt_request req = { .duration_ns = 1000000000ull, .hz = 100 };
	struct pt_session *b;
	struct pt_exit x = { 0 };
	uint64_t t0, ms = 1000000ull;

	fake_setup(1, 16);
	b = begin(&pt_kind_block, &req);
	t0 = b->start_ns;
	/* tid 10, born at 5 ms, seen in read() at 10 ms, ended at 15 ms having
	 * run 1 ms: 9 ms on its stack, nothing unseen (and an ended stack for
	 * the unseen to go to) */
	born(b, 10, t0 + 5 * ms, 0, 0);
	look(b, 10, t0, 10, 'S', 0, 0);
	x = (struct pt_exit){ .tid = 10, .at_ns = t0 + 15 * ms, .seen_ns = t0 + 15 * ms, .run_ns = 1 * ms };
	pt_kind_block.on_exit(b, &x);
	/* tid 11, born at 10 ms; looks at 20 and 22 ms find it runnable, its
	 * clocks still 0 at the first (it had waited for a core since 12 ms),
	 * 4 and 6 ms at the second; ended at 30 ms with 5 and 6 ms: blocked 9 */
	born(b, 11, t0 + 10 * ms, 0, 0);
	look(b, 11, t0, 20, 'R', 0, 0);
	look(b, 11, t0, 22, 'R', 4, 6);
	x = (struct pt_exit){ .tid = 11, .at_ns = t0 + 30 * ms, .seen_ns = t0 + 30 * ms, .run_ns = 5 * ms,
			      .wait_ns = 6 * ms };
	pt_kind_block.on_exit(b, &x);
	/* tid 12, born at 10 ms, found stopped at 20 ms (SIGSTOP), ended at
	 * 40 ms having run 1 ms: its life cannot tell the stop from a wait */
	born(b, 12, t0 + 10 * ms, 0, 0);
	look(b, 12, t0, 20, 'T', 1, 0);
	x = (struct pt_exit){ .tid = 12, .at_ns = t0 + 40 * ms, .seen_ns = t0 + 40 * ms, .run_ns = 1 * ms };
	pt_kind_block.on_exit(b, &x);
	ASSERT_OK(pt_kind_block.finish(b));
	ASSERT(sample_of(req.profile, 10));
	ASSERT_EQ(sample_of(req.profile, 10)->value[1], 9000000);
	ASSERT_U64_EQ(req.profile->unsampled_ns, 9000000);
	pt_profile_free(req.profile);
	end(b);
	fake_teardown();
}

/* A thread's end wakes the sampler, which may then wait for a core before
 * it sees the end: the end is timed at the wake (pt_exit at_ns), not when
 * seen, else the wait runs on into the sampler's (under load, 0.6 ms a
 * thread: 20 % more short_nap than the threads slept). A thread born after
 * the wake, as the sampler waited, ended later than that: its life runs to
 * when it was seen (pt_exit_end), not dropped for ending before its birth. */
TEST(session_block_times_an_end_by_the_samplers_wake)
{
	struct pt_request req = { .duration_ns = 1000000000ull, .hz = 100 };
	struct pt_session *b;
	struct pt_exit x = { 0 };
	uint64_t t0, ms = 1000000ull;

	fake_setup(1, 16);
	b = begin(&pt_kind_block, &req);
	t0 = b->start_ns;
	/* tid 20, born at 10 ms, seen in read() at 12 ms, ended by the wake
	 * at 20 ms (seen at 26) having run 1 ms: 9 ms on its stack (its wait
	 * counts from its birth), not 15 */
	born(b, 20, t0 + 10 * ms, 0, 0);
	look(b, 20, t0, 12, 'S', 0, 0);
	x = (struct pt_exit){ .tid = 20, .at_ns = t0 + 20 * ms, .seen_ns = t0 + 26 * ms, .run_ns = 1 * ms };
	pt_kind_block.on_exit(b, &x);
	/* tid 21, born at 22 ms, seen ended with it at 26 ms, having run 1 ms:
	 * 3 ms unseen */
	born(b, 21, t0 + 22 * ms, 0, 0);
	x = (struct pt_exit){ .tid = 21, .at_ns = t0 + 20 * ms, .seen_ns = t0 + 26 * ms, .run_ns = 1 * ms };
	pt_kind_block.on_exit(b, &x);
	ASSERT_OK(pt_kind_block.finish(b));
	ASSERT(sample_of(req.profile, 20));
	ASSERT_EQ(sample_of(req.profile, 20)->value[1], 9000000);
	ASSERT_U64_EQ(req.profile->unsampled_ns, 3000000);
	pt_profile_free(req.profile);
	end(b);
	fake_teardown();
}

TEST(session_threads_delta_cancels_threads_that_did_not_change)
{
	uint64_t frames[2] = { leaf_pc(), caller_ret() - 1 };
	struct pt_request now = { 0 }, delta = { .duration_ns = 1000000000ull };
	struct pt_session *a, *d;

	fake_setup(3, 16);
	F.frames = frames;
	F.nframes = 2;
	F.regs.orig_rax = SYS_futex;
	/* Now: every thread, one sample each (stopped, named). */
	a = begin(&pt_kind_threads, &now);
	ASSERT_OK(pt_kind_threads.finish(a));
	ASSERT_EQ(now.profile->nsamples, 3);
	for (int i = 0; i < 3; i++) {
		const struct pt_profile_sample *s = sample_of(now.profile, FAKE_TID0 + i);

		ASSERT(s && s->value[0] == 1);
		ASSERT_STR_EQ(leaf_name(now.profile, s, 0), "unit_marker_leaf");
	}
	ASSERT_EQ(now.profile->threads_stopped, 3);
	/* A delta (goroutine?seconds=N): the threads at the end less those at
	 * the start, by stack; idle threads did not change (and are answered
	 * from the cache: no stop), so nothing is left. */
	d = begin(&pt_kind_threads, &delta);
	ASSERT_OK(pt_kind_threads.finish(d));
	ASSERT_EQ(delta.profile->nsamples, 0);
	ASSERT_EQ(delta.profile->threads_stopped, 0);
	pt_profile_free(now.profile);
	pt_profile_free(delta.profile);
	end(a);
	end(d);
	fake_teardown();
}

TEST(stacks_intern_by_thread_and_stack_in_first_sight_order)
{
	struct pt_stacks *st;
	uint64_t f1[2] = { 0x1000, 0x2000 }, f2[2] = { 0x1000, 0x3000 };
	struct pt_sample a = { .tid = 1, .comm = "a", .frames = f1, .n = 2 };
	struct pt_sample b = { .tid = 1, .comm = "a", .frames = f2, .n = 2 };
	struct pt_sample c = { .tid = 2, .comm = "c", .frames = f1, .n = 2 };
	struct pt_sample none = { .tid = 3, .comm = "n" };   /* no stack: a sample all the same */
	int64_t v[PT_MAX_VALUES] = { 1, 10 };

	ASSERT_OK(pt_stacks_new(&st, 4));
	ASSERT_EQ(pt_stacks_add(st, &a, v), 0);
	ASSERT_EQ(pt_stacks_add(st, &b, v), 1);
	ASSERT_EQ(pt_stacks_add(st, &c, v), 2);   /* same stack, another thread */
	ASSERT_EQ(pt_stacks_add(st, &a, v), 0);
	ASSERT_EQ(pt_stacks_add(st, &none, v), 3);
	ASSERT_EQ(pt_stacks_count(st), 4);
	/* Past the cap a new stack is refused and counted; known ones still add. */
	b.tid = 9;
	ASSERT_EQ(pt_stacks_add(st, &b, v), -E2BIG);
	ASSERT_EQ(pt_stacks_dropped(st), 1);
	ASSERT_EQ(pt_stacks_add(st, &c, v), 2);
	pt_stacks_free(st);
}

static uint64_t spread_by_tid(void *arg, size_t id, const struct pt_sample *e, const int64_t *v)
{
	(void)arg;
	(void)id;
	(void)v;
	return e->tid == 1 ? 1 : e->tid == 2 ? 3 : 0;   /* thread 1: a quarter, 2: three */
}

static uint64_t spread_none(void *arg, size_t id, const struct pt_sample *e, const int64_t *v)
{
	(void)arg;
	(void)id;
	(void)e;
	(void)v;
	return 0;
}

TEST(stacks_spread_in_proportion_losing_nothing)
{
	struct pt_stacks *st;
	uint64_t f1[2] = { 0x1000, 0x2000 }, f2[2] = { 0x1000, 0x3000 }, copies = 0;
	struct pt_sample a = { .tid = 1, .comm = "a", .frames = f1, .n = 2 };
	struct pt_sample b = { .tid = 2, .comm = "b", .frames = f2, .n = 2 };
	struct pt_sample c = { .tid = 3, .comm = "c", .frames = f2, .n = 2 };
	struct pt_spread s = { .mark = 0x60000000000099ull, .weight = spread_by_tid };
	int64_t v[PT_MAX_VALUES] = { 1, 10 };
	struct pt_sample e;
	uint64_t sum = 0;

	ASSERT_OK(pt_stacks_new(&st, 16));
	pt_stacks_add(st, &a, v);
	pt_stacks_add(st, &b, v);
	pt_stacks_add(st, &c, v);
	/* 1001 over weights 1 and 3: 250 and the rest, under the mark, for no
	 * thread; c weighs nothing */
	ASSERT_EQ(pt_stacks_spread(st, 3, &s, 1001, &copies), 1001);
	ASSERT_EQ(copies, 2);
	ASSERT_EQ(pt_stacks_count(st), 5);
	pt_stacks_get(st, 3, &e, v);
	ASSERT(e.tid == 0 && e.n == 3 && e.frames[0] == s.mark && e.frames[2] == 0x2000);
	ASSERT_EQ(v[0], 0);
	ASSERT_EQ(v[1], 250);
	pt_stacks_get(st, 4, &e, v);
	ASSERT(e.frames[0] == s.mark && e.frames[2] == 0x3000);
	ASSERT_EQ(v[1], 751);
	/* with a weight beside the entries': its share goes under the mark
	 * alone */
	s.alone = 4;
	copies = 0;
	ASSERT_EQ(pt_stacks_spread(st, 3, &s, 800, &copies), 800);
	ASSERT_EQ(copies, 1);   /* the lone one: the two others merged with the first copies */
	for (size_t i = 0; i < pt_stacks_count(st); i++) {
		pt_stacks_get(st, i, &e, v);
		if (e.n == 1 && e.frames[0] == s.mark)
			ASSERT_EQ(v[1], 400);
		if (e.tid == 0)
			sum += (uint64_t)v[1];
	}
	ASSERT_EQ(sum, 1001 + 800);
	/* nothing weighs: all of it alone */
	s.weight = spread_none;
	s.alone = 0;
	ASSERT_EQ(pt_stacks_spread(st, 3, &s, 99, NULL), 99);
	pt_stacks_free(st);
	/* a table full refuses the copies: what went in is said */
	ASSERT_OK(pt_stacks_new(&st, 3));
	pt_stacks_add(st, &a, v);
	pt_stacks_add(st, &b, v);
	s.weight = spread_by_tid;
	ASSERT_EQ(pt_stacks_spread(st, 2, &s, 1000, NULL), 250);   /* a's copy fits, b's does not */
	pt_stacks_free(st);
}

TEST(stacks_merge_with_sign_and_drop_zero)
{
	struct pt_stacks *x, *y;
	uint64_t f1[1] = { leaf_pc() }, f2[1] = { caller_ret() - 1 };
	struct pt_sample a = { .tid = 1, .comm = "a", .frames = f1, .n = 1 };
	struct pt_sample b = { .tid = 1, .comm = "a", .frames = f2, .n = 1 };
	int64_t one[PT_MAX_VALUES] = { 1, 5 }, two[PT_MAX_VALUES] = { 2, 7 };
	struct pt_profile *p;

	fake_setup(1, 16);
	ASSERT_OK(pt_stacks_new(&x, 100));
	ASSERT_OK(pt_stacks_new(&y, 100));
	pt_stacks_add(x, &a, one);
	pt_stacks_add(y, &a, one);
	pt_stacks_add(y, &b, two);
	/* y - x: a cancels, b stays */
	ASSERT_OK(pt_stacks_merge(y, x, -1));
	ASSERT_OK(pt_profile_build(y, F.t, &p));
	ASSERT_EQ(p->nsamples, 2);
	pt_profile_drop_zero(p);
	ASSERT_EQ(p->nsamples, 1);
	ASSERT_EQ(p->samples[0].value[0], 2);
	ASSERT_EQ(p->samples[0].value[1], 7);
	ASSERT_STR_EQ(p->locs[p->loc_ids[p->samples[0].first]].name, "unit_marker_caller");
	/* Each distinct address is one location, shared by the samples. */
	ASSERT_EQ(p->nlocs, 2);
	pt_profile_free(p);
	pt_stacks_free(x);
	pt_stacks_free(y);
	fake_teardown();
}

/* A tick's samples are the sessions' that took it, whenever its stops come:
 * one interrupted at tick 5 may stop after tick 6, which a session at a
 * lower rate (or after a tick that came early) skipped. */
TEST(session_gets_its_ticks_samples_after_a_tick_it_skipped)
{
	struct pt_session a = { 0 }, late = { 0 };

	pt__session_tick(&a, 4, 1);
	pt__session_tick(&a, 5, 1);
	pt__session_tick(&a, 6, 0);          /* skipped */
	ASSERT(pt__session_took(&a, 5));     /* tick 5's stop, come after tick 6 */
	ASSERT(pt__session_took(&a, 4));
	ASSERT(!pt__session_took(&a, 6));    /* not its tick */
	ASSERT(!pt__session_took(&a, 7));    /* a tick it has not seen */
	ASSERT(!pt__session_took(&a, 0));    /* untagged: the current tick's flag */
	pt__session_tick(&a, 7, 1);
	ASSERT(pt__session_took(&a, 0) && pt__session_took(&a, 7) && pt__session_took(&a, 5));
	/* A session that starts later gets none of the ticks before it; a
	 * draw (no tick's) goes to every session that has begun its ticks. */
	ASSERT(!pt__session_took(&late, PT_TICK_DRAW));
	pt__session_tick(&late, 7, 1);
	ASSERT(pt__session_took(&late, 7) && !pt__session_took(&late, 5));
	ASSERT(pt__session_took(&late, PT_TICK_DRAW) && pt__session_took(&a, PT_TICK_DRAW));
	/* Ticks it was not told of (its target not ticked) are not its. */
	pt__session_tick(&a, 20, 1);
	ASSERT(!pt__session_took(&a, 12) && pt__session_took(&a, 7) && pt__session_took(&a, 20));
	/* A stop 1000 ticks late (a thread throttled by its CPU quota) is
	 * still its tick's; past PT_TOOK_TICKS, the current tick's flag says. */
	for (uint64_t k = 21; k <= 1020; k++)
		pt__session_tick(&a, k, k % 2 == 0);
	ASSERT(pt__session_took(&a, 20) && !pt__session_took(&a, 21) && pt__session_took(&a, 1020));
	pt__session_tick(&a, 20 + PT_TOOK_TICKS, 1);
	ASSERT(pt__session_took(&a, 20) && pt__session_took(&a, 7));
	pt__session_tick(&a, 20 + PT_TOOK_TICKS + 1, 0);
	ASSERT(!pt__session_took(&a, 20) && !pt__session_took(&a, 21 + PT_TOOK_TICKS - 2 - 1000));
	ASSERT(!pt__session_took(&a, 2));   /* before its first tick */
}
