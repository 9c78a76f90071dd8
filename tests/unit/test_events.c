/* The events of a traced process (ptrace/mechanism/events.h), passed on as
 * the kernel meant them, on a real child of ours (kid.h): a signal is
 * delivered exactly once and its handler runs, whether or not a stop of
 * ours met it; a group-stop (SIGSTOP from outside) keeps the child
 * stopped, through our own stops, until SIGCONT; a thread created while
 * traced is known and runs, and its end is told with the CPU it used; an
 * exec is followed and the new program runs; a process's end is told with
 * its CPU, read while it was a zombie; a stop is only looked at until it
 * is resumed, so that a tracer killed meanwhile loses no signal; long work
 * of the tracer that breathes passes signals on while it runs. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrace/mechanism/events.h"
#include "ptrace/mechanism/mechanism.h"
#include "ptrace/mechanism/stop.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/mechanism/tracee.h"
#include "ptrace/mechanism/tracer.h"
#include "ptrace/space/space.h"
#include "tests/harness.h"
#include "tests/unit/kid.h"

static struct pt_tracee_stats stats(struct kid *k)
{
	struct pt_tracee_stats st;

	pt_tracee_stats(k->t, &st);
	return st;
}

/* The kid turns its loop 1000 times more than now (the tracer polled
 * meanwhile: whatever was pending has been acted on). */
static void assert_kid_runs(struct kid *k)
{
	uint64_t spins = k->pg->spins;

	KID_UNTIL(k->tr, k->pg->spins > spins + 1000);
}

TEST(events_signal_is_reinjected_exactly_once_and_its_handler_runs)
{
	struct kid k;

	kid_start(&k, KID_SPIN);
	KID_UNTIL(k.tr, k.pg->spins > 0);
	kill(k.pid, SIGUSR1);
	KID_UNTIL(k.tr, k.pg->usr1 == 1);
	assert_kid_runs(&k);
	ASSERT_EQ(k.pg->usr1, 1);
	ASSERT_EQ(stats(&k).signals_reinjected, 1);
	/* Each signal is one run of the handler. */
	kill(k.pid, SIGUSR1);
	KID_UNTIL(k.tr, k.pg->usr1 == 2);
	assert_kid_runs(&k);
	ASSERT_EQ(k.pg->usr1, 2);
	ASSERT_EQ(stats(&k).signals_reinjected, 2);
	kid_end(&k);
}

/* The signal's stop comes first and our interrupt meets it: the sample is
 * taken there, where the kid ran, and the kid resumed with its signal. */
TEST(events_signal_met_by_our_interrupt_is_delivered_once_after_the_sample)
{
	struct kid k;
	struct rec r;
	struct pt_stop_ops ops;
	struct pt_thread *sel[1];
	int status = 0, again = 0, held = 0;

	kid_start(&k, KID_SPIN);
	ops = rec_ops(&r, k.t, k.pg);
	KID_UNTIL(k.tr, k.pg->spins > 0);
	kill(k.pid, SIGUSR1);
	/* Its signal-delivery stop, looked at (the tracer is not polled). */
	KID_UNTIL(NULL, pt__events_wait(k.pid, &status, 0, &held) == k.pid);
	ASSERT(held);
	ASSERT(WIFSTOPPED(status) && WSTOPSIG(status) == SIGUSR1 && (status >> 16) == 0);
	/* Looked at, not reaped: there again, the kid still stopped in it. */
	ASSERT_EQ(pt__events_wait(k.pid, &again, 0, &held), k.pid);
	ASSERT(held);
	ASSERT_EQ(again, status);
	ASSERT_EQ(kid_state(k.pid, k.pid), 't');
	ASSERT_EQ(k.pg->usr1, 0);
	sel[0] = kid_thread(&k);
	ASSERT_EQ(pt_stop_collect(k.t, sel, 1, 1000000000ull, 1, &ops), 1);
	ASSERT(kid_in_loop(r.smp[0].pc));
	ASSERT_U64_EQ(r.regs[0].r12, KID_R12);
	KID_UNTIL(k.tr, k.pg->usr1 == 1);
	assert_kid_runs(&k);
	ASSERT_EQ(k.pg->usr1, 1);
	ASSERT_EQ(stats(&k).signals_reinjected, 1);
	kid_end(&k);
}

/* The signal comes while our interrupt waits for the kid (pinned beside
 * us, it reaches it only once we sleep): our stop is captured, then the
 * signal delivered, once. */
TEST(events_signal_sent_while_we_stop_the_thread_is_delivered_once)
{
	struct kid k;
	struct rec r;
	struct pt_stop_ops ops;

	kid_pin();
	kid_start(&k, KID_SPIN);
	KID_UNTIL(k.tr, k.pg->spins > 0);
	ops = rec_ops(&r, k.t, k.pg);
	ASSERT_EQ(kid_tick_late(&k, kid_thread(&k), &ops), 0);
	memset(&r, 0, sizeof(r));
	r.t = k.t;
	r.pg = k.pg;
	kill(k.pid, SIGUSR1);
	KID_UNTIL(k.tr, k.pg->usr1 == 1);
	assert_kid_runs(&k);
	ASSERT_EQ(k.pg->usr1, 1);
	ASSERT_EQ(stats(&k).signals_reinjected, 1);
	/* The sample is where the kid was, not in its handler. */
	pt_stop_report_late(k.t);
	ASSERT_EQ(r.n, 1);
	ASSERT(kid_in_loop(r.smp[0].pc));
	kid_end(&k);
}

TEST(events_group_stop_keeps_the_child_stopped_until_sigcont)
{
	struct kid k;
	struct rec r;
	struct pt_stop_ops ops;
	struct pt_thread *sel[1], *th;
	uint64_t spins, until;

	kid_start(&k, KID_SPIN);
	ops = rec_ops(&r, k.t, k.pg);
	KID_UNTIL(k.tr, k.pg->spins > 0);
	th = kid_thread(&k);
	kill(k.pid, SIGSTOP);
	KID_UNTIL(k.tr, th->flags & PT_TH_GROUPSTOP);
	ASSERT_EQ(stats(&k).group_stops, 1);
	ASSERT(kid_state(k.pid, k.pid) == 't' || kid_state(k.pid, k.pid) == 'T');
	/* Stopped it stays, the tracer polling, for 20 ms... */
	spins = k.pg->spins;
	until = kid_now_ns() + 20000000ull;
	while (kid_now_ns() < until) {
		pt_tracer_poll(k.tr);
		kid_nap();
	}
	ASSERT_U64_EQ(k.pg->spins, spins);
	/* ...and through a stop of ours: no sample, not resumed. */
	sel[0] = th;
	ASSERT_EQ(pt_stop_collect(k.t, sel, 1, 50000000ull, 1, &ops), 0);
	ASSERT_EQ(r.n, 0);
	pt_tracer_poll(k.tr);
	ASSERT(th->flags & PT_TH_GROUPSTOP);
	ASSERT_U64_EQ(k.pg->spins, spins);
	ASSERT(kid_state(k.pid, k.pid) == 't' || kid_state(k.pid, k.pid) == 'T');
	/* SIGCONT ends it. */
	kill(k.pid, SIGCONT);
	assert_kid_runs(&k);
	ASSERT(!(th->flags & PT_TH_GROUPSTOP));
	kid_end(&k);
}

static const struct pt_event *clone_of(const struct kid *k, pid_t tid)
{
	for (int i = 0; i < k->nev; i++)
		if (k->ev[i].kind == PT_EV_CLONE && k->ev[i].child == tid)
			return &k->ev[i];
	return NULL;
}

static int names(struct kid *k, const uint64_t *frames, int n, const char *want)
{
	for (int i = 0; i < n; i++) {
		const struct pt_module *mod;
		const char *name;

		pt_space_name(pt_tracee_space(k->t), frames[i], &name, &mod);
		if (name && !strcmp(name, want))
			return 1;
	}
	return 0;
}

TEST(events_thread_created_while_traced_is_known_runs_and_ends_with_its_cpu)
{
	struct kid k;
	struct rec r;
	struct pt_stop_ops ops;
	struct pt_thread *sel[1];
	const struct pt_event *ev;
	pid_t tid;
	uint64_t spins;

	kid_start(&k, KID_THREADS);
	ops = rec_ops(&r, k.t, k.pg);
	ASSERT_EQ(pt_threads_count(k.t), 1);
	kid_send(&k, 'c');
	/* It runs (its first stop let go), and it is known. */
	KID_UNTIL(k.tr, k.pg->worker_tid != 0);
	tid = k.pg->worker_tid;
	ASSERT(tid != k.pid);
	ASSERT(pt_threads_find(k.t, tid) != NULL);
	ASSERT_EQ(pt_threads_count(k.t), 2);
	spins = k.pg->worker_spins;
	KID_UNTIL(k.tr, k.pg->worker_spins > spins + 1000);
	/* Its birth was told, with its parent's stack at the clone: in
	 * pthread_create, called from kid_threads. */
	ASSERT((ev = clone_of(&k, tid)) != NULL);
	ASSERT_EQ(ev->pid, k.pid);
	ASSERT_EQ(ev->tid, k.pid);
	ASSERT(ev->stack != NULL && ev->n >= 2);
	ASSERT(names(&k, ev->stack, ev->n, "kid_threads"));
	ASSERT_EQ(stats(&k).clones, 1);
	/* A stop of it is a sample of it, taken and let go at once. */
	sel[0] = pt_threads_find(k.t, tid);
	r.watch = &k.pg->worker_spins;
	ASSERT_EQ(pt_stop_collect(k.t, sel, 1, 1000000000ull, 1, &ops), 1);
	ASSERT_EQ(r.smp[0].tid, tid);
	ASSERT(names(&k, r.smp[0].frames, r.smp[0].n, "worker"));
	ASSERT(r.ran[0]);
	/* Its end is told with the CPU it used, all of it. */
	k.pg->worker_stop = 1;
	KID_UNTIL(k.tr, kid_event(&k, PT_EV_EXIT, tid) != NULL);
	ev = kid_event(&k, PT_EV_EXIT, tid);
	ASSERT(k.pg->cpu_ns > 0);
	ASSERT(ev->run_ns >= k.pg->cpu_ns);
	ASSERT(pt_threads_find(k.t, tid) == NULL);
	ASSERT(pt_threads_find(k.t, k.pid) != NULL);
	ASSERT(!pt_tracee_gone(k.t));
	kid_end(&k);
}

/* The tracer of tid's (TracerPid in its status), 0 if untraced or gone. */
static long tracer_of(pid_t pid, pid_t tid)
{
	char path[64], buf[2048], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	if (!(f = fopen(path, "r")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return (p = strstr(buf, "TracerPid:")) ? strtol(p + 10, NULL, 10) : 0;
}

/* A worker started by a 'c', running: its tid. */
static pid_t start_worker(struct kid *k)
{
	k->pg->worker_stop = 0;
	k->pg->worker_tid = 0;
	kid_send(k, 'c');
	KID_UNTIL(k->tr, k->pg->worker_tid != 0);
	return k->pg->worker_tid;
}

/* The worker of tid ends; its end is told with all its CPU. */
static void end_worker(struct kid *k, pid_t tid)
{
	const struct pt_event *ev;

	k->pg->worker_stop = 1;
	KID_UNTIL(k->tr, kid_event(k, PT_EV_EXIT, tid) != NULL);
	ev = kid_event(k, PT_EV_EXIT, tid);
	ASSERT(k->pg->cpu_ns > 0);
	ASSERT(ev->run_ns >= k->pg->cpu_ns);
}

/* Without clone stops (the perf_event backend's way, follow.h): no thread
 * is stopped for it. A thread that creates one drops its clone events at
 * that clone event, and the child too in its birth stop (it has its
 * parent's old options: the kernel's copy); a thread it creates after is
 * not traced and never stops at its birth, until it is adopted (no stop
 * either, its birth told without a stack) or found by a rescan; its end
 * is told with its CPU as any traced thread's. Clone stops asked for again
 * come back, the threads interrupted for them one at a time. */
TEST(events_threads_followed_without_a_birth_stop)
{
	struct kid k;
	const struct pt_event *ev;
	uint64_t spins;
	pid_t tid, tid2;

	kid_start(&k, KID_THREADS);
	ASSERT(pt_tracee_clone_stops(k.t));
	pt_tracee_set_clone_stops(k.t, 0);
	/* (clone stacks, which the kid asks for, keep the clone events) */
	ASSERT(pt_tracee_clone_stops(k.t));
	pt_tracee_clone_stacks(k.t, 0);
	ASSERT(!pt_tracee_clone_stops(k.t));
	/* The kid's thread, blocked in read, is not stopped for it. */
	pt_tracer_poll(k.tr);
	ASSERT(!(pt_threads_find(k.t, k.pid)->flags & PT_TH_INTERRUPTING));
	ASSERT_EQ(stats(&k).options_set, 0);

	/* Its next thread comes by its clone event, where both change. */
	tid = start_worker(&k);
	ASSERT(pt_threads_find(k.t, tid) != NULL);
	ASSERT_EQ(stats(&k).clones, 1);
	KID_UNTIL(k.tr, stats(&k).options_set == 2);
	ASSERT_EQ(pt_threads_find(k.t, tid)->opts, pt_threads_find(k.t, k.pid)->opts);
	ASSERT_EQ(pt_threads_find(k.t, tid)->opts & PTRACE_O_TRACECLONE, 0);
	end_worker(&k, tid);

	/* Born untraced: no clone event, no stop. */
	tid = start_worker(&k);
	ASSERT(pt_threads_find(k.t, tid) == NULL);
	ASSERT_EQ(tracer_of(k.pid, tid), 0);
	ASSERT_EQ(stats(&k).clones, 1);
	ASSERT(clone_of(&k, tid) == NULL);
	/* Adopted: traced, told born by its parent, with no stack; it runs. */
	ASSERT_OK(pt_tracee_adopt(k.t, tid, k.pid, 12345));
	ASSERT(pt_threads_find(k.t, tid) != NULL);
	ASSERT_EQ(tracer_of(k.pid, tid), (long)gettid());
	ASSERT((ev = clone_of(&k, tid)) != NULL);
	ASSERT_EQ(ev->tid, k.pid);
	ASSERT(ev->stack == NULL && ev->n == 0);
	ASSERT_U64_EQ(ev->born_ns, 12345);   /* its FORK record's time, passed on */
	ASSERT_EQ(stats(&k).adopted, 1);
	ASSERT_OK(pt_tracee_adopt(k.t, tid, k.pid, 0));   /* known already: nothing */
	ASSERT_EQ(stats(&k).adopted, 1);
	spins = k.pg->worker_spins;
	KID_UNTIL(k.tr, k.pg->worker_spins > spins + 1000);
	end_worker(&k, tid);
	ASSERT(pt_threads_find(k.t, tid) == NULL);
	/* One that ended is not adopted, nor a thread of another process. */
	ASSERT_EQ(pt_tracee_adopt(k.t, tid, k.pid, 0), -ESRCH);
	ASSERT_EQ(pt_tracee_adopt(k.t, gettid(), k.pid, 0), -ESRCH);
	ASSERT_EQ(tracer_of(getpid(), gettid()), 0);

	/* Found by a rescan, told born with no parent known. */
	tid = start_worker(&k);
	ASSERT(pt_threads_find(k.t, tid) == NULL);
	ASSERT_EQ(pt_tracee_rescan(k.t), 1);
	ASSERT(pt_threads_find(k.t, tid) != NULL);
	ASSERT((ev = clone_of(&k, tid)) != NULL && ev->tid == 0);
	ASSERT_EQ(stats(&k).rescanned, 1);
	ASSERT_EQ(pt_tracee_rescan(k.t), 0);
	ASSERT_EQ(stats(&k).clones, 1);

	/* Clone stops again, with two threads lacking them (the kid's and
	 * the running worker): never both interrupted at once; each stops
	 * once, and the next worker comes through its clone event. */
	pt_tracee_set_clone_stops(k.t, 1);
	ASSERT(pt_threads_find(k.t, k.pid)->flags & PT_TH_INTERRUPTING);
	ASSERT(!(pt_threads_find(k.t, tid)->flags & PT_TH_INTERRUPTING));
	for (uint64_t until = kid_now_ns() + 2000000000ull; stats(&k).options_set < 4;) {
		struct pt_thread *a = pt_threads_find(k.t, k.pid), *b = pt_threads_find(k.t, tid);

		ASSERT(!((a->flags & b->flags) & PT_TH_INTERRUPTING));
		ASSERT(kid_now_ns() < until);
		pt_tracer_poll(k.tr);
		kid_nap();
	}
	ASSERT(!(pt_threads_find(k.t, k.pid)->flags & PT_TH_INTERRUPTING));
	ASSERT(!(pt_threads_find(k.t, tid)->flags & PT_TH_INTERRUPTING));
	end_worker(&k, tid);
	tid2 = start_worker(&k);
	ASSERT(pt_threads_find(k.t, tid2) != NULL);
	ASSERT_EQ(stats(&k).clones, 2);
	ASSERT((ev = clone_of(&k, tid2)) != NULL && ev->tid == k.pid);
	end_worker(&k, tid2);
	ASSERT_EQ(stats(&k).options_set, 4);
	kid_end(&k);
}

/* Clone events wanted back while a thread never answers its interrupt (a
 * leader that ended before its threads, a long uninterruptible sleep:
 * here, the leader marked interrupted a second ago, never sent one): the
 * others are not kept waiting for it; it is given them once it stops. */
TEST(events_clone_stops_back_past_a_thread_that_never_stops)
{
	struct kid k;
	struct pt_thread *lead;
	pid_t tid;

	kid_start(&k, KID_THREADS);
	pt_tracee_clone_stacks(k.t, 0);
	pt_tracee_set_clone_stops(k.t, 0);
	tid = start_worker(&k);   /* by a clone event: both drop theirs there */
	KID_UNTIL(k.tr, stats(&k).options_set == 2);
	lead = pt_threads_find(k.t, k.pid);
	lead->flags |= PT_TH_INTERRUPTING;
	lead->t_interrupt = kid_now_ns() - 1000000000ull;
	pt_tracee_set_clone_stops(k.t, 1);
	ASSERT(pt_threads_find(k.t, tid)->flags & PT_TH_INTERRUPTING);
	KID_UNTIL(k.tr, stats(&k).options_set == 3);
	ASSERT(pt_threads_find(k.t, tid)->opts & PTRACE_O_TRACECLONE);
	ASSERT(!(pt_threads_find(k.t, k.pid)->opts & PTRACE_O_TRACECLONE));
	/* It stops at last (the interrupt sent now): given them there. */
	ASSERT_EQ(ptrace(PTRACE_INTERRUPT, k.pid, 0, 0), 0);
	KID_UNTIL(k.tr, stats(&k).options_set == 4);
	ASSERT(!(pt_threads_find(k.t, k.pid)->flags & PT_TH_INTERRUPTING));
	ASSERT(pt_threads_find(k.t, k.pid)->opts & PTRACE_O_TRACECLONE);
	end_worker(&k, tid);
	kid_end(&k);
}

/* Reads what is there of n bytes into buf past *got: 1 once all came. */
static int read_some(int fd, char *buf, size_t n, size_t *got)
{
	ssize_t r = read(fd, buf + *got, n - *got);

	if (r > 0)
		*got += (size_t)r;
	return *got == n;
}

/* The kid (cat now) echoes a line: it runs. */
static void assert_cat_echoes(struct kid *k, const char *line)
{
	char buf[16] = { 0 };
	size_t got = 0, n = strlen(line);

	ASSERT(n < sizeof(buf));
	ASSERT(write(k->in, line, n) == (ssize_t)n);
	KID_UNTIL(k->tr, read_some(k->out, buf, n, &got));
	ASSERT_STR_EQ(buf, line);
}

TEST(events_exec_is_followed_and_the_new_program_runs)
{
	struct kid k;
	struct rec r;
	struct pt_stop_ops ops;
	struct pt_thread *sel[1];
	struct user_regs_struct regs = { 0 };
	uint8_t word[8] = { 0 };

	kid_start(&k, KID_EXEC);
	ops = rec_ops(&r, k.t, k.pg);
	kid_send(&k, 'e');
	assert_cat_echoes(&k, "ping\n");
	ASSERT_EQ(pt_tracee_exec_pending(k.t), 1);
	ASSERT_EQ(stats(&k).execs, 1);
	/* The same thread (the leader), a new program. */
	sel[0] = kid_thread(&k);
	ASSERT_EQ(pt_threads_count(k.t), 1);
	/* Until the exec is acknowledged (the sessions that saw the old
	 * program have ended), no stack is unwound against the old program:
	 * not a stop's, not a copy's; and cat is let go from our stop. */
	ASSERT_EQ(pt_stop_collect(k.t, sel, 1, 1000000000ull, 1, &ops), 0);
	ASSERT_EQ(r.n, 0);
	ASSERT_OK(pt_stop_put_copy(k.t, 0, sel[0], &regs, word, sizeof(word), 1));
	ASSERT_EQ(pt_stop_report_copies(k.t, 1, &ops), 0);
	ASSERT_EQ(r.n, 0);
	assert_cat_echoes(&k, "pong\n");
	/* Acknowledged: cat's own stack, waiting in read(2). */
	pt_tracee_ack_exec(k.t);
	ASSERT_EQ(pt_tracee_exec_pending(k.t), 0);
	ASSERT_EQ(pt_stop_collect(k.t, sel, 1, 1000000000ull, 1, &ops), 1);
	ASSERT_EQ(r.n, 1);
	ASSERT_EQ(r.smp[0].tid, k.pid);
	ASSERT_EQ(r.smp[0].syscall, SYS_read);
	ASSERT(!kid_in_loop(r.smp[0].pc));
	assert_cat_echoes(&k, "again\n");
	kid_end(&k);
}

TEST(events_process_end_is_told_with_its_cpu_read_while_a_zombie)
{
	struct kid k;
	const struct pt_event *ev;
	int status;

	kid_start(&k, KID_EXIT);
	kid_send(&k, 'x');
	KID_UNTIL(k.tr, pt_tracee_gone(k.t));
	ASSERT((ev = kid_event(&k, PT_EV_EXIT, k.pid)) != NULL);
	ASSERT(k.pg->cpu_ns >= 5000000ull);
	ASSERT(ev->run_ns >= k.pg->cpu_ns);
	/* Reaped by the tracer once its clocks were read; nothing is left. */
	ASSERT(waitpid(k.pid, &status, WNOHANG) < 0 && errno == ECHILD);
	ASSERT_EQ(pt_threads_count(k.t), 0);
	ASSERT(!pt_tracee_attached(k.t));
	kid_end(&k);
}

/* A tracer of our own in its own process: attaches to pid, says 'a', looks
 * at the signal stop that comes (twice: it is still there), says 'h' (or
 * 'x' if the look was not that), and waits to be killed. */
static void holding_tracer(pid_t pid, int say)
{
	struct pt_tracer *tr;
	struct pt_tracee *t;
	int status = 0, again = 0, held = 0, r = 0;
	uint64_t until;
	char c = 'h';

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (pt_tracer_new(&tr, -1) || pt_tracee_new(&t, tr, pid, &kid_opts) || pt_tracee_attach(t))
		_exit(1);
	if (write(say, "a", 1) != 1)
		_exit(1);
	until = kid_now_ns() + 2000000000ull;
	while ((r = pt__events_wait(pid, &status, 0, &held)) == 0 && kid_now_ns() < until)
		kid_nap();
	if (r != pid || !held || !WIFSTOPPED(status) || WSTOPSIG(status) != SIGUSR1 ||
	    pt__events_wait(pid, &again, 0, &held) != pid || again != status)
		c = 'x';
	if (write(say, &c, 1) != 1)
		_exit(1);
	for (;;)
		pause();
}

TEST(events_a_stop_is_only_looked_at_so_a_tracer_killed_in_it_loses_no_signal)
{
	struct kid k;
	int p[2];
	pid_t tracer;
	uint64_t spins;
	char c = 0;

	kid_fork(&k, KID_SPIN);
	KID_UNTIL(NULL, k.pg->spins > 0);
	ASSERT(pipe(p) == 0);
	fflush(NULL);
	tracer = fork();
	ASSERT(tracer >= 0);
	if (tracer == 0) {
		close(p[0]);
		holding_tracer(k.pid, p[1]);
	}
	close(p[1]);
	ASSERT(read(p[0], &c, 1) == 1 && c == 'a');
	kill(k.pid, SIGUSR1);
	ASSERT(read(p[0], &c, 1) == 1);
	ASSERT_EQ(c, 'h');
	close(p[0]);
	ASSERT_EQ(kid_state(k.pid, k.pid), 't');
	ASSERT_EQ(k.pg->usr1, 0);
	/* The tracer dies (podprof SIGKILLed) with the stop held: the kernel
	 * lets the kid go, and its signal with it. */
	kill(tracer, SIGKILL);
	ASSERT(waitpid(tracer, NULL, 0) == tracer);
	KID_UNTIL(NULL, k.pg->usr1 == 1);
	spins = k.pg->spins;
	KID_UNTIL(NULL, k.pg->spins > spins + 1000);
	ASSERT_EQ(k.pg->usr1, 1);
	kid_end(&k);
}

/* Signals sent one after another while the tracer works for ms on
 * something else (or until `enough` reached the kid): how many reached the
 * kid's handler. breathe: the work calls pt_tracer_breathe between its
 * pieces, as a goroutine dump does. */
static uint64_t delivered_during_work(struct kid *k, int breathe, uint64_t ms, uint64_t enough)
{
	uint64_t base = k->pg->usr1, sent = 0, end = kid_now_ns() + ms * 1000000ull;
	volatile uint64_t spin = 0;

	while (kid_now_ns() < end && k->pg->usr1 - base < enough) {
		if (k->pg->usr1 - base == sent) {
			kill(k->pid, SIGUSR1);
			sent++;
		}
		for (int i = 0; i < 1000; i++)   /* a piece of the work */
			spin++;
		if (breathe)
			pt_tracer_breathe(k->tr);
	}
	return k->pg->usr1 - base;
}

/* Long work on the tracer thread that breathes holds no signal for its
 * whole length: a Go program's running goroutine, sent SIGURG every 10 ms
 * by its runtime, lost 1-2 % of its progress to a goroutine dump a second
 * while its signals waited for the dump's end. */
TEST(events_long_work_that_breathes_passes_signals_on_meanwhile)
{
	struct kid k;

	kid_start(&k, KID_SPIN);
	KID_UNTIL(k.tr, k.pg->spins > 0);
	/* Without breathing, the first signal's stop waits for the work's
	 * end: nothing is delivered meanwhile (it is, after). */
	ASSERT_U64_EQ(delivered_during_work(&k, 0, 200, UINT64_MAX), 0);
	KID_UNTIL(k.tr, k.pg->usr1 == 1);
	/* Breathing every PT_TRACER_BREATHE_NS: one signal after another
	 * (each a round trip through the kid's stop and handler: about 800 in
	 * 200 ms on a quiet machine; with every core taken the kid waits for
	 * one at each, so the work lasts until 5 or 2 s). */
	ASSERT(delivered_during_work(&k, 1, 2000, 5) >= 5);
	assert_kid_runs(&k);
	ASSERT_EQ(stats(&k).signals_reinjected, k.pg->usr1);
	kid_end(&k);
}
