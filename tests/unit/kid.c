/* A real process to trace and a recorder of stops (see kid.h). */
#include "tests/unit/kid.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ptrace/mechanism/mechanism.h"
#include "ptrace/mechanism/stop.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/mechanism/tracee.h"
#include "ptrace/mechanism/tracer.h"
#include "ptrace/proc/proc.h"
#include "ptrace/space/stackmem.h"
#include "tests/harness.h"

#define NOINLINE __attribute__((noinline, noclone))

/* The kid's page, for its signal handler (in the kid only). */
static struct kid_page *kid_pg;

uint64_t kid_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void kid_nap(void)
{
	nanosleep(&(struct timespec){ 0, 100000 }, NULL);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- in the kid ---------------------------------------------------- */

static void on_usr1(int sig)
{
	(void)sig;
	kid_pg->usr1++;
}

/* Keeps its marks in this frame, says it is ready, and turns in a loop
 * with r12 and r13 known, counting in the page, for ever. */
static NOINLINE void kid_spin(struct kid_page *pg, int ready)
{
	volatile uint64_t mark[KID_NMARK];

	for (int i = 0; i < KID_NMARK; i++)
		mark[i] = KID_MARK;
	pg->mark_at = (uint64_t)(uintptr_t)mark;
	pg->ret_at = (uint64_t)(uintptr_t)__builtin_return_address(0);
	if (write(ready, "r", 1) != 1)
		_exit(1);
	__asm__ volatile("movabs %1, %%r12\n\t"
			 "movabs %2, %%r13\n\t"
			 ".globl kid_spin_loop\n"
			 "kid_spin_loop:\n\t"
			 "incq (%0)\n\t"
			 "jmp kid_spin_loop\n"
			 ".globl kid_spin_loop_end\n"
			 "kid_spin_loop_end:\n"
			 : : "r"(&pg->spins), "i"(KID_R12), "i"(KID_R13) : "r12", "r13", "memory");
}

static void *worker(void *arg)
{
	struct kid_page *pg = arg;

	pg->worker_tid = (int32_t)gettid();
	while (!pg->worker_stop)
		pg->worker_spins++;
	pg->cpu_ns = thread_cpu_ns();
	return NULL;
}

/* Starts a worker at each 'c'. */
static NOINLINE void kid_threads(struct kid_page *pg, int cmd, int ready)
{
	pthread_t th;
	char c;

	if (write(ready, "r", 1) != 1)
		_exit(1);
	while (read(cmd, &c, 1) == 1)
		if (c == 'c' && pthread_create(&th, NULL, worker, pg))
			_exit(2);
	_exit(0);
}

static void kid_exec(int cmd, int ready, int in, int out)
{
	char c;

	if (write(ready, "r", 1) != 1 || read(cmd, &c, 1) != 1)
		_exit(1);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0)
		_exit(1);
	execl("/bin/cat", "cat", (char *)NULL);
	_exit(127);
}

static void kid_exit(struct kid_page *pg, int cmd, int ready)
{
	char c;

	if (write(ready, "r", 1) != 1 || read(cmd, &c, 1) != 1)
		_exit(1);
	while (thread_cpu_ns() < 5000000)
		pg->spins++;
	pg->cpu_ns = thread_cpu_ns();
	_exit(7);
}

static NOINLINE void kid_main(struct kid_page *pg, enum kid_mode mode, int cmd, int ready, int in,
			      int out)
{
	struct sigaction sa = { .sa_handler = on_usr1 };

	kid_pg = pg;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	switch (mode) {
	case KID_SPIN: kid_spin(pg, ready); break;
	case KID_THREADS: kid_threads(pg, cmd, ready); break;
	case KID_EXEC: kid_exec(cmd, ready, in, out); break;
	case KID_EXIT: kid_exit(pg, cmd, ready); break;
	}
	_exit(0);
}

/* ---- in the test --------------------------------------------------- */

int kid_in_loop(uint64_t pc)
{
	return pc >= (uint64_t)(uintptr_t)kid_spin_loop &&
	       pc < (uint64_t)(uintptr_t)kid_spin_loop_end;
}

static void on_event(void *arg, const struct pt_event *ev)
{
	struct kid *k = arg;
	struct pt_event *e;

	if (k->nev >= KID_MAX_EVENTS)
		return;
	e = &k->ev[k->nev];
	*e = *ev;
	if (ev->stack) {
		e->n = ev->n < 64 ? ev->n : 64;
		memcpy(k->ev_stack[k->nev], ev->stack, (size_t)e->n * sizeof(uint64_t));
		e->stack = k->ev_stack[k->nev];
	}
	k->nev++;
}

void kid_pin(void)
{
	cpu_set_t set, one;
	int cpu = 0;

	ASSERT(sched_getaffinity(0, sizeof(set), &set) == 0);
	while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &set))
		cpu++;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	ASSERT(sched_setaffinity(0, sizeof(one), &one) == 0);
}

const struct pt_tracee_opts kid_opts = {
	.stack_bytes = 65536, .max_frames = 64, .max_threads = 16, .max_per_tick = 4,
};

void kid_fork(struct kid *k, enum kid_mode mode)
{
	int ready[2], cmd[2], in[2] = { -1, -1 }, out[2] = { -1, -1 };
	pid_t parent = getpid();
	char c;

	memset(k, 0, sizeof(*k));
	k->in = k->out = -1;
	k->pg = mmap(NULL, sizeof(*k->pg), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		     -1, 0);
	ASSERT(k->pg != MAP_FAILED);
	ASSERT(pipe2(ready, O_CLOEXEC) == 0 && pipe2(cmd, O_CLOEXEC) == 0);
	if (mode == KID_EXEC)
		ASSERT(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0);
	fflush(NULL);
	k->pid = fork();
	ASSERT(k->pid >= 0);
	if (k->pid == 0) {
		/* dies with the test, whatever ends it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		kid_main(k->pg, mode, cmd[0], ready[1], in[0], out[1]);
	}
	close(ready[1]);
	close(cmd[0]);
	k->cmd = cmd[1];
	if (mode == KID_EXEC) {
		close(in[0]);
		close(out[1]);
		k->in = in[1];
		k->out = out[0];
		ASSERT(fcntl(k->out, F_SETFL, O_NONBLOCK) == 0);
	}
	ASSERT(read(ready[0], &c, 1) == 1);
	close(ready[0]);
}

void kid_start(struct kid *k, enum kid_mode mode)
{
	kid_fork(k, mode);
	ASSERT_OK(pt_tracer_new(&k->tr, -1));
	pt_tracer_set_events(k->tr, on_event, k);
	ASSERT_OK(pt_tracee_new(&k->t, k->tr, k->pid, &kid_opts));
	pt_tracee_clone_stacks(k->t, 1);
	ASSERT_OK(pt_tracee_attach(k->t));
}

void kid_end(struct kid *k)
{
	pt_tracee_free(k->t);
	k->t = NULL;
	pt_tracer_free(k->tr);
	k->tr = NULL;
	/* Alive (0): killed and reaped; a zombie: reaped now; reaped
	 * already (the tracer took its exit): nothing to kill. */
	if (k->pid > 0 && waitpid(k->pid, NULL, WNOHANG) == 0) {
		kill(k->pid, SIGKILL);
		waitpid(k->pid, NULL, 0);
	}
	k->pid = 0;
	close(k->cmd);
	if (k->in >= 0)
		close(k->in);
	if (k->out >= 0)
		close(k->out);
	munmap(k->pg, sizeof(*k->pg));
}

void kid_send(struct kid *k, char c)
{
	ASSERT(write(k->cmd, &c, 1) == 1);
}

struct pt_thread *kid_thread(struct kid *k)
{
	struct pt_thread *th = pt_threads_find(k->t, k->pid);

	ASSERT(th != NULL);
	return th;
}

char kid_state(pid_t pid, pid_t tid)
{
	char path[96], buf[1024];
	const char *s;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || !(s = strrchr(buf, ')')) || !s[1])
		return 0;
	return s[2];
}

int kid_tick_late(struct kid *k, struct pt_thread *th, const struct pt_stop_ops *ops)
{
	uint64_t until = kid_now_ns() + 2000000000ull;
	struct pt_tracee_stats st;

	for (;;) {
		struct pt_thread *sel[1] = { th };
		uint64_t late;
		int n;

		pt_tracee_stats(k->t, &st);
		late = st.late_stops;
		n = pt_stop_collect(k->t, sel, 1, 0, 0, ops);
		ASSERT(sel[0] == th);   /* interrupted */
		pt_tracee_stats(k->t, &st);
		if (st.late_stops > late)
			return n;
		if (kid_now_ns() > until)
			FAIL_AT("no tick's stop came after it in 2 s");
		kid_nap();
	}
}

const struct pt_event *kid_event(const struct kid *k, int kind, pid_t tid)
{
	for (int i = 0; i < k->nev; i++)
		if ((int)k->ev[i].kind == kind && (tid <= 0 || k->ev[i].tid == tid))
			return &k->ev[i];
	return NULL;
}

/* ---- the recorder -------------------------------------------------- */

static int rec_keep(void *arg, struct pt_thread *th, const struct user_regs_struct *regs)
{
	struct rec *r = arg;

	(void)th;
	(void)regs;
	r->nkeep++;
	return 1;
}

static void rec_sample(void *arg, struct pt_thread *th, struct pt_sample *smp)
{
	struct rec *r = arg;
	const struct pt_capture *cap = NULL;
	int i = r->n++;

	if (i >= REC_MAX)
		return;
	r->smp[i] = *smp;
	r->smp[i].comm = NULL;   /* the thread's, not ours to keep */
	r->smp[i].n = smp->n < 64 ? smp->n : 64;
	memcpy(r->frames[i], smp->frames, (size_t)r->smp[i].n * sizeof(uint64_t));
	r->smp[i].frames = r->frames[i];
	if (r->watch) {
		uint64_t was = *r->watch, until = kid_now_ns() + 2000000000ull;

		while (*r->watch == was && kid_now_ns() < until)
			kid_nap();
		r->ran[i] = *r->watch != was;
	}
	/* The capture behind it: the slot that names th. */
	for (int k = 0; k < r->t->o.max_per_tick; k++)
		if (r->t->slot_th[k] == th)
			cap = &r->t->caps[k];
	if (!cap)
		return;
	r->regs[i] = cap->regs;
	for (int m = 0; m < KID_NMARK; m++) {
		uint64_t at = r->pg->mark_at + 8u * (uint64_t)m, w;

		if (at < cap->regs.rsp || at + 8 > cap->regs.rsp + cap->stack_len)
			continue;
		memcpy(&w, cap->stack + (at - cap->regs.rsp), 8);
		r->marks[i] += w == KID_MARK;
	}
}

static void rec_timing(void *arg, uint64_t pause_ns, uint64_t unwind_ns)
{
	struct rec *r = arg;

	(void)unwind_ns;
	if (r->ntiming < REC_MAX)
		r->pause_ns[r->ntiming] = pause_ns;
	r->ntiming++;
}

struct pt_stop_ops rec_ops(struct rec *r, struct pt_tracee *t, const struct kid_page *pg)
{
	memset(r, 0, sizeof(*r));
	r->t = t;
	r->pg = pg;
	return (struct pt_stop_ops){ .keep = rec_keep, .sample = rec_sample, .timing = rec_timing,
				     .arg = r };
}
