/* A tracee of synthetic threads for unit tests of the sampling rule and the
 * sessions: a tracee of the test's own pid (its maps and names are real),
 * whose threads do not exist: their /proc files (schedstat, syscall, stat)
 * are memfds the test writes, and the mechanism's stop cycle is stood in
 * for by a recorder (struct pt__rule_io) that "captures" each selected
 * thread with F.frames. */
#ifndef TESTS_UNIT_FAKE_H
#define TESTS_UNIT_FAKE_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "ptrace/rule/rulestate.h"
#include "ptrace/mechanism/mechanism.h"

#define FAKE_PERIOD 10000000ull   /* a 100 Hz tick */
#define FAKE_NTH 8
#define FAKE_TID0 4000000         /* no such thread: its /proc files are the test's */

struct fake {
	struct pt_tracer *tr;
	struct pt_tracee *t;
	struct pt_rule *r;
	struct pt_thread *th[FAKE_NTH];
	uint64_t run[FAKE_NTH], wait[FAKE_NTH], slices[FAKE_NTH];
	uint64_t stime[FAKE_NTH];    /* kernel-mode CPU in clock ticks (stat's stime) */
	char state[FAKE_NTH];        /* stat's state */
	uint64_t pcpu;               /* the process clock the rule sees, 0: unknown */
	/* the stand-in stop cycle: what it saw, and what each stop gives */
	pid_t sel[64];
	int nsel, snap, calls;
	struct user_regs_struct regs;   /* the registers of each stop */
	uint64_t wait_at_stop;          /* a wait for a core that ends at each stop */
	const uint64_t *frames;         /* each capture's stack */
	int nframes;
	int kept;                       /* stops keep() accepted */
	int lose;                       /* stops that give no sample (a capture that failed) */
	/* defer: the kept stops' samples come at the next collect call, before
	 * its own (a late stop, reported by a later tick) */
	int defer, ndeferred;
	struct pt_thread *deferred[64];
	struct pt_sample deferred_smp[64];
	struct pt_stop_ops deferred_ops[64];   /* the ops of their own tick, as t->late keeps */
	/* what fake_on_sample and fake_on_state got */
	pid_t sampled[64];
	uint64_t weight[64];
	uint64_t tick[64];              /* the tick each sample said it is for */
	int nsampled;
	struct pt_thread_state states[64];
	int nstates;
};
extern struct fake F;

/* n threads (tids FAKE_TID0 + i, each blocked in futex), at most
 * max_per_tick stopped per batch, the tracee marked attached. */
void fake_setup(int n, int max_per_tick);
void fake_teardown(void);
/* Thread i runs now (state R). */
void fake_running(int i);
/* Thread i is blocked (S) in system call nr, at stack and instruction
 * pointers sp and pc. */
void fake_blocked(int i, int nr, uint64_t sp, uint64_t pc);
/* Thread i spent `ticks` more clock ticks of its CPU in kernel mode. */
void fake_kernel_time(int i, uint64_t ticks);
/* Thread i used ns more CPU and waited `wait` more for a core (the process
 * clock moves with it). */
void fake_burn(int i, uint64_t ns, uint64_t wait);
/* Recorders for struct pt_tick_cbs. */
void fake_on_sample(void *arg, const struct pt_sample *s);
void fake_on_state(void *arg, const struct pt_thread_state *st);

#endif
