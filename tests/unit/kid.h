/* A real process to trace, for the tests of the ptrace mechanism's stop
 * cycle and events (test_stop.c, test_events.c): a child forked from the
 * test binary that does one known thing (spins in a loop of known
 * registers with marks on its stack, makes a thread, execs, exits), says
 * when it is in place (a pipe) and how far it got (a page it shares with
 * the test), and dies with the test (PR_SET_PDEATHSIG; kid_end kills it
 * too). The test's own thread is its tracer. Also a recorder of what a
 * batch of stops reports (struct pt_stop_ops), which keeps each capture's
 * registers and the words at the kid's marks. */
#ifndef TESTS_UNIT_KID_H
#define TESTS_UNIT_KID_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "ptrace/core/types.h"
#include "ptrace/mechanism/tracer.h"

struct pt_thread;
struct pt_tracee;
struct pt_tracer;

/* KID_SPIN's registers in its loop, and the words it keeps on its stack. */
#define KID_R12 0x1212abcd1212abcdull
#define KID_R13 0x1313beef1313beefull
#define KID_MARK 0x5eed5eed0badcafeull
#define KID_NMARK 4

/* The loop of KID_SPIN: [kid_spin_loop, kid_spin_loop_end) (the kid is a
 * fork of this binary: the same addresses). */
extern const char kid_spin_loop[], kid_spin_loop_end[];
/* 1 if pc lies in that loop. */
int kid_in_loop(uint64_t pc);

/* What the kid tells the test, as it goes. */
struct kid_page {
	volatile uint64_t spins;          /* KID_SPIN: turns of its loop */
	volatile uint64_t mark_at;        /* where its KID_NMARK marks lie on its stack */
	volatile uint64_t ret_at;         /* the return address of its spinning frame */
	volatile uint64_t usr1;           /* runs of its SIGUSR1 handler */
	volatile int32_t worker_tid;      /* KID_THREADS: the worker's tid, once it runs */
	volatile int32_t worker_stop;     /* set by the test: the worker ends */
	volatile uint64_t worker_spins;   /* the worker's turns */
	volatile uint64_t cpu_ns;         /* KID_THREADS: the worker's CPU time, KID_EXIT:
	                                   * the kid's, read by itself just before it ended */
};

enum kid_mode {
	KID_SPIN,       /* spins in kid_spin_loop (r12, r13 as above), SIGUSR1 counted */
	KID_THREADS,    /* 'c' on its commands: starts a worker thread that spins until
	                 * worker_stop, then ends */
	KID_EXEC,       /* 'e': execs /bin/cat, reading k->in, writing k->out */
	KID_EXIT,       /* 'x': burns 5 ms of CPU and exits with status 7 */
};

#define KID_MAX_EVENTS 16

struct kid {
	pid_t pid;
	int cmd;                   /* commands to the kid */
	int in, out;               /* KID_EXEC: cat's stdin (ours to write), stdout (to read) */
	struct kid_page *pg;
	struct pt_tracer *tr;
	struct pt_tracee *t;
	struct pt_event ev[KID_MAX_EVENTS];   /* the thread life events the tracer reported */
	uint64_t ev_stack[KID_MAX_EVENTS][64];   /* their stacks (the tracee's are its own) */
	int nev;
};

/* Pins the calling process to one core (the first it may use): a kid
 * forked afterwards shares it, so that it cannot run while the test does
 * (until the test sleeps). */
void kid_pin(void);
/* Forks a kid and waits until it is in place (untraced). */
void kid_fork(struct kid *k, enum kid_mode mode);
/* kid_fork, then attaches to it: a tracer and a tracee of the test's own
 * (kid_opts), clone stacks on. */
void kid_start(struct kid *k, enum kid_mode mode);
extern const struct pt_tracee_opts kid_opts;
/* Detaches, kills and reaps the kid; frees the tracer (if any). */
void kid_end(struct kid *k);
void kid_send(struct kid *k, char c);
/* The kid's main thread as the tracee knows it. */
struct pt_thread *kid_thread(struct kid *k);
/* The state letter of /proc/<pid>/task/<tid>/stat (R S t T Z ...), 0 if gone. */
char kid_state(pid_t pid, pid_t tid);
/* A short nap: lets a kid pinned beside us run. */
void kid_nap(void);
/* A tick (no snapshot) of th alone whose stop comes after it: the kid
 * must be pinned beside us (kid_pin), so that it reaches our interrupt
 * only once we sleep; a tick whose stop came in it all the same (we were
 * preempted inside it) is taken again, 2 s at most. Returns the tick's
 * count of samples (0). */
int kid_tick_late(struct kid *k, struct pt_thread *th, const struct pt_stop_ops *ops);
/* The first event of kind (and tid, if > 0) reported, or NULL. */
const struct pt_event *kid_event(const struct kid *k, int kind, pid_t tid);

/* Waits until cond holds, 2 s at most (the test fails then), polling the
 * tracer tr (if not NULL) between looks. */
#define KID_UNTIL(tr, cond)                                                     \
	do {                                                                    \
		uint64_t until_ = kid_now_ns() + 2000000000ull;                 \
		while (!(cond)) {                                               \
			if (kid_now_ns() > until_)                              \
				FAIL_AT("still not %s after 2 s", #cond);       \
			if (tr)                                                 \
				pt_tracer_poll(tr);                             \
			kid_nap();                                              \
		}                                                               \
	} while (0)
uint64_t kid_now_ns(void);

/* What a batch of stops reported through rec_ops (the sample's frames, the
 * capture's registers, the words where the kid keeps its marks). */
#define REC_MAX 8
struct rec {
	struct pt_tracee *t;
	const struct kid_page *pg;
	int n, ntiming, nkeep;
	/* If set, at each sample: waits (2 s at most) for this counter of the
	 * kid's to move: was the thread resumed before its report? */
	const volatile uint64_t *watch;
	int ran[REC_MAX];
	struct pt_sample smp[REC_MAX];
	uint64_t frames[REC_MAX][64];
	struct user_regs_struct regs[REC_MAX];
	int marks[REC_MAX];               /* how many of the marks the stack copy held */
	uint64_t pause_ns[REC_MAX];
};
/* Ops that record into r (keep: every stop kept, counted). */
struct pt_stop_ops rec_ops(struct rec *r, struct pt_tracee *t, const struct kid_page *pg);

#endif
