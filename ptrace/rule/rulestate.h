/* The sampling rule's state: the rule of a tracee (struct pt_rule) and its
 * part of each thread (struct pt_rule_thread), read and written by the
 * rule's files (listed in ptrace/rule/rule.h) and by nothing else, and the unit
 * tests that drive them. Types only: no file implements this header.
 * Sampler thread only. */
#ifndef PT_RULESTATE_H
#define PT_RULESTATE_H

#include <stddef.h>
#include <stdint.h>

#include "ptrace/perf/perfev.h"
#include "ptrace/rule/perfborn.h"
#include "ptrace/mechanism/thread.h"
#include "ptrace/core/types.h"

struct pt_tracee;

/* A thread not yet looked at by a tick: sampled at its first look if it is
 * running then, whatever its CPU (so a thread living for less than a period,
 * a churned worker, is sampled when caught running); else it starts from
 * no credit. */
#define PT_NEW_CREDIT UINT64_MAX

/* The rule's part of a thread (struct pt_thread's `rule`): zeroed by the
 * mechanism when the thread is added or exec's, set up from the thread's
 * opening at its first use (pt__rt). */
struct pt_rule_thread {
	int seen;                /* set up */
	uint64_t last_run_ns;    /* its CPU time at its last look */
	uint64_t moved_at;       /* when a tick last saw its CPU move (see pt_rule_tick) */
	uint64_t cpu_ns;         /* the weight of its pending sample: CPU since its last one */
	uint64_t acc_ns;         /* CPU used since its last tick-sample */
	uint64_t credit_ns;      /* CPU not yet paid for by a sample (see pt_rule_tick) */
	uint64_t wait_ns;        /* time runnable but waiting for a core, at its last look */
	/* its last selection for a CPU sample: its wait then, the credit the
	 * selection took, and how many selections in a row were dropped (see
	 * keep_stop in rule.c) */
	uint64_t tick_wait_ns, credit_paid;
	int preempted_in_a_row;
	uint64_t sel_tick;       /* the tick its pending sample is for (pt_sample's tick) */
	/* the kernel time (its stat's stime) it had at its first tick stop,
	 * and the CPU its samples at system call exits carried since (see
	 * kernel_time_pays in rule.c) */
	int sys_seen;
	uint64_t sys_base_ns, sys_claimed_ns;
	int syscall;             /* the system call it was blocked in at its last look, or -1 */
	int ran;                 /* it ran since the state report before */
	uint64_t sys_sp, sys_pc; /* where it was blocked at its last state read, 0 if not */
	/* snapshot cache: the stack at the last snapshot stop (snapcache.c) */
	uint64_t *snap;          /* max_frames, allocated at the first snapshot */
	int snap_n, snap_syscall, snap_restart;
	/* the system call a stop of ours cut short, or -1, and where it was
	 * made: a timed wait so cut goes on as restart_syscall from the same
	 * place, which says nothing of what it waits in */
	int cut_syscall;
	uint64_t cut_sp, cut_pc;
	int snap_ok;             /* snap is the stack of the stop at snap_run_ns */
	int snap_taken;          /* its snapshot stop was captured and reported */
	uint64_t snap_run_ns, snap_sp, snap_pc;
	/* perf_event backend (perftick.c): the thread's event, opened in its
	 * birth stop or at the first tick that samples; the CPU its samples
	 * carried so far, as its CPU time (pf_mark, while no event is open)
	 * or as the event's count less what it used before the event opened
	 * (pf_last: a sample's weight is its count less pf_last); when an open
	 * that failed may be tried again; whether a sample of it was reported
	 * (its stack size then learned); the ticks left before its random
	 * first period gives way to the tick period (2 opened at a tick, 1 in
	 * its birth stop, 0 done). */
	/* ptrace backend (cpudraw.c): a thread born while sampled is stopped
	 * by the CPU it used, not looked at by the ticks: its event's fd + 1
	 * (0: none), and the period its armed draw stands for (0: not armed) */
	int dw_fd1;
	uint64_t dw_armed;
	struct pt_perfev *pev;
	uint64_t pf_mark;
	int64_t pf_last;
	uint64_t pf_retry_ns;
	uint64_t pf_resized_ns;  /* its event last reopened at another stack size */
	int pf_learned;
	int pf_phase;
	/* its wake event, if it creates threads (perfborn.c), or why none */
	struct pt__fwake *pf_wake;
	int pf_wake_failed;
};

/* What the rule asks of the mechanism that a unit test stands in for: the
 * stop cycle and the process's CPU clock (pt_stop_collect and
 * pt_tracee_cpu_ns in production). */
struct pt__rule_io {
	int (*collect)(struct pt_tracee *t, struct pt_thread **sel, int nsel, uint64_t wait_ns,
		       int snap, const struct pt_stop_ops *ops);
	uint64_t (*cpu_ns)(const struct pt_tracee *t);
};

struct pt_rule {
	struct pt_tracee *t;
	struct pt__rule_io io;
	size_t rr;               /* round-robin start of the next tick's selection */
	uint64_t pcpu_last;      /* the process's CPU clock at the last tick, 0: unknown */
	uint64_t full_at;        /* when a tick last looked at every thread */
	struct pt_tick_cbs cbs;  /* the last tick's (late samples go to `out`) */
	/* The last sample callback a tick gave: a tick's late stops may come
	 * after a tick that takes no CPU sample (a thread-states session's),
	 * and still go to the sessions of theirs (the sample's tick says
	 * which). */
	pt_sample_cb out;
	void *out_arg;
	/* a snapshot's or a state report's stops: where they go */
	pt_sample_cb snap_cb;
	pt_timing_cb snap_timing;
	void *snap_arg;
	struct pt_rule_stats st;
	/* How CPU samples are taken (perftick.c): the backend, decided at the
	 * first session that samples, and why; the perf events' settings, the
	 * period they run at, whether they are enabled; the weights of the
	 * batch being reported, in slot order (pf_wi the next). */
	enum pt_backend backend;
	int decided;
	char why[512];
	struct pt_perfev_cfg pcfg;
	uint64_t pf_period;
	int pf_on;
	uint64_t *pf_w;
	int pf_wi;
	int pf_err;              /* the last open's error, 0 if none failed */
	struct pt__perfborn pb;  /* new threads followed without a stop (perfborn.c) */
	uint64_t rng;            /* xorshift state: each event's first period */
	/* Draws (cpudraw.c): the signal, the period (the sampling ticks'),
	 * whether a session samples (new draws armed), the kernel's time
	 * left out (no kernel ticks allowed), and refused for good */
	int dw_sig;
	uint64_t dw_period;
	int dw_on, dw_ek, dw_off;
};

/* th's rule part, set up at its first use. */
static inline struct pt_rule_thread *pt__rt(struct pt_thread *th)
{
	struct pt_rule_thread *rt = th->rule;

	if (!rt->seen) {
		rt->seen = 1;
		rt->last_run_ns = th->open_run_ns;
		rt->wait_ns = th->open_wait_ns;
		rt->moved_at = th->opened_ns;
		rt->credit_ns = PT_NEW_CREDIT;
		rt->syscall = -1;
		rt->cut_syscall = -1;
		rt->pf_mark = th->open_run_ns;
	}
	return rt;
}

#endif
