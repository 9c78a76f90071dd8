/* The synthetic tracee of the rule and session tests (see fake.h). */
#include "tests/unit/fake.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ptrace/core/internal.h"
#include "ptrace/rule/rule.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/mechanism/tracee.h"
#include "ptrace/mechanism/tracer.h"
#include "tests/harness.h"

struct fake F;

static void put(int fd, const char *text)
{
	ASSERT(ftruncate(fd, 0) == 0);
	ASSERT(pwrite(fd, text, strlen(text), 0) == (ssize_t)strlen(text));
}

static int memfile(void)
{
	int fd = memfd_create("proc", 0);

	ASSERT(fd >= 0);
	return fd;
}

void fake_running(int i)
{
	put(F.th[i]->sys_fd, "running\n");
}

static void put_stat(int i)
{
	char stat[256];

	snprintf(stat, sizeof(stat), "%d (worker%d) %c 1 1 1 0 -1 0 0 0 0 0 1 %llu 0 0 20 0 1 0 5 0 0",
		 FAKE_TID0 + i, i, F.state[i], (unsigned long long)F.stime[i]);
	put(F.th[i]->stat_fd, stat);
}

void fake_blocked(int i, int nr, uint64_t sp, uint64_t pc)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "%d 0x0 0x0 0x0 0x0 0x0 0x0 %#llx %#llx\n", nr,
		 (unsigned long long)sp, (unsigned long long)pc);
	put(F.th[i]->sys_fd, buf);
	F.state[i] = 'S';
	put_stat(i);
}

void fake_kernel_time(int i, uint64_t ticks)
{
	F.stime[i] += ticks;
	put_stat(i);
}

void fake_burn(int i, uint64_t ns, uint64_t wait)
{
	char buf[96];

	F.run[i] += ns;
	F.wait[i] += wait;
	F.slices[i] += ns ? 1 : 0;
	F.pcpu += ns;
	snprintf(buf, sizeof(buf), "%llu %llu %llu\n", (unsigned long long)F.run[i],
		 (unsigned long long)F.wait[i], (unsigned long long)F.slices[i]);
	put(F.th[i]->sched_fd, buf);
}

static int fake_collect(struct pt_tracee *t, struct pt_thread **sel, int nsel, uint64_t wait_ns,
			int snap, const struct pt_stop_ops *ops)
{
	static const uint64_t frames[2] = { 0x401000, 0x402000 };
	int n = 0;

	(void)t;
	(void)wait_ns;
	F.calls++;
	F.snap = snap;
	for (int i = 0; i < F.ndeferred; i++) {
		F.deferred[i]->flags &= ~PT_TH_INTERRUPTING;
		F.deferred_ops[i].sample(F.deferred_ops[i].arg, F.deferred[i], &F.deferred_smp[i]);
	}
	F.ndeferred = 0;
	for (int i = 0; i < nsel; i++) {
		struct pt_sample smp = { .pid = sel[i]->pid, .tid = sel[i]->tid, .comm = sel[i]->comm,
					 .state = sel[i]->state, .syscall = (int)F.regs.orig_rax,
					 .frames = F.frames ? F.frames : frames,
					 .n = F.frames ? F.nframes : 2, .sp = F.regs.rsp, .pc = F.regs.rip };

		if (F.nsel < 64)
			F.sel[F.nsel++] = sel[i]->tid;
		if (!snap)
			sel[i]->flags |= PT_TH_TICK;
		if (F.wait_at_stop) {
			int k = sel[i]->tid - FAKE_TID0;

			F.wait[k] += F.wait_at_stop;
			fake_burn(k, 0, 0);
		}
		if (F.lose) {   /* a capture that failed: no sample, nothing said */
			F.lose--;
			sel[i]->flags &= ~PT_TH_TICK;
			continue;
		}
		if ((sel[i]->flags & PT_TH_TICK) && ops->keep &&
		    !ops->keep(ops->arg, sel[i], &F.regs)) {
			sel[i]->flags &= ~PT_TH_TICK;
			continue;
		}
		sel[i]->flags &= ~PT_TH_TICK;
		F.kept++;
		if (ops->timing)
			ops->timing(ops->arg, 1000, 1000);
		if (F.defer && F.ndeferred < 64) {
			sel[i]->flags |= PT_TH_INTERRUPTING;   /* its stop still to come */
			F.deferred[F.ndeferred] = sel[i];
			F.deferred_ops[F.ndeferred] = *ops;
			F.deferred_smp[F.ndeferred++] = smp;
			continue;
		}
		ops->sample(ops->arg, sel[i], &smp);
		n++;
	}
	return n;
}

static uint64_t fake_cpu(const struct pt_tracee *t)
{
	(void)t;
	return F.pcpu;
}

void fake_on_sample(void *arg, const struct pt_sample *s)
{
	(void)arg;
	if (F.nsampled < 64) {
		F.sampled[F.nsampled] = s->tid;
		F.tick[F.nsampled] = s->tick;
		F.weight[F.nsampled++] = s->cpu_ns;
	}
}

void fake_on_state(void *arg, const struct pt_thread_state *st)
{
	(void)arg;
	if (F.nstates < 64)
		F.states[F.nstates++] = *st;
}

void fake_setup(int n, int max_per_tick)
{
	struct pt_tracee_opts o = { .stack_bytes = 4096, .max_frames = 64, .max_threads = 64,
				    .max_per_tick = max_per_tick };

	memset(&F, 0, sizeof(F));
	F.regs.orig_rax = (uint64_t)-1;   /* stopped in user code */
	ASSERT_OK(pt_tracer_new(&F.tr, -1));
	ASSERT_OK(pt_tracee_new(&F.t, F.tr, getpid(), &o));
	ASSERT_OK(pt_rule_new(&F.r, F.t));
	F.r->io.collect = fake_collect;
	F.r->io.cpu_ns = fake_cpu;
	for (int i = 0; i < n; i++) {
		ASSERT_OK(pt__threads_add(F.t, FAKE_TID0 + i, 0));
		F.th[i] = pt_threads_find(F.t, FAKE_TID0 + i);
		ASSERT(F.th[i]);
		ASSERT_EQ(F.th[i]->sys_fd, -1);   /* no such task: the files are ours */
		F.th[i]->sys_fd = memfile();
		F.th[i]->sched_fd = memfile();
		F.th[i]->stat_fd = memfile();
		snprintf(F.th[i]->comm, sizeof(F.th[i]->comm), "worker%d", i % 10);
		F.th[i]->comm_ns = pt__now_ns();
		F.stime[i] = 1;
		fake_burn(i, 0, 0);
		fake_blocked(i, SYS_futex, 0x7000, 0x401234);
	}
	F.pcpu = 0;
	F.t->attached = 1;
}

void fake_teardown(void)
{
	F.t->attached = 0;
	pt_tracee_free(F.t);   /* closes the memfds with the threads */
	pt_rule_free(F.r);
	pt_tracer_free(F.tr);
}
