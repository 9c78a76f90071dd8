/* One thread sampled by the kernel instead of stopped (perf_event_open(2)):
 * a cpu-clock event on that thread alone, which at every period of its CPU
 * copies its user registers and the top of its user stack into a ring
 * buffer we map, with the event's count (the thread's CPU while the event
 * was enabled). The thread never stops for it. Reading the ring is the
 * caller's, at its own pace; records that did not fit are counted. Knows
 * nothing of tracees or sessions (the rule's perf tick, ptrace/rule/perftick.c,
 * uses it). Sampler thread only. */
#ifndef PT_PERFEV_H
#define PT_PERFEV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pt_perfev;
struct user_regs_struct;

/* How every event of a target is opened. */
struct pt_perfev_cfg {
	uint64_t period_ns;    /* of the thread's CPU between samples */
	size_t stack_bytes;    /* user stack copied per sample (a multiple of 8, < 65535) */
	int exclude_kernel;    /* 1: ticks that land in the kernel are dropped by it (no
	                        * CAP_PERFMON at perf_event_paranoid 2) */
	unsigned ring_samples; /* samples its ring holds at least (0: 3) */
	/* Not NULL: the threads the event's thread creates are told, as the
	 * kernel's FORK records come in a drain (task=1; no stop), with the
	 * time the record was stamped at the thread's birth (CLOCK_MONOTONIC). */
	void (*on_fork)(void *arg, pid_t parent, pid_t child, uint64_t born_ns);
	void *fork_arg;
};

/* Largest stack copy the kernel takes (sample_stack_user is a u16, a
 * multiple of 8). */
#define PT_PERFEV_MAX_STACK 65528u

/* Opens and maps tid's event, enabled. Returns 0 or a negative errno:
 * -ESRCH (gone), -EACCES/-EPERM (not allowed: perf_event_paranoid, no
 * capability, a seccomp filter), -ENOSYS, -EMFILE, -ENOMEM (the locked
 * memory limit for its ring, after halving it down to one record). */
int pt_perfev_open(struct pt_perfev **out, pid_t tid, const struct pt_perfev_cfg *cfg);
/* Opens and maps an event on tid that samples nothing and wakes whoever
 * polls its fd (pt_perfev_fd) at each record the kernel writes: a FORK
 * record as tid creates a thread, passed to cfg->on_fork (required) by
 * pt_perfev_drain; only cfg's exclude_kernel is used besides. Returns 0 or
 * a negative errno as pt_perfev_open. */
int pt_perfev_open_forks(struct pt_perfev **out, pid_t tid, const struct pt_perfev_cfg *cfg);
/* The event's fd, readable (POLLIN) once the kernel woke it. */
int pt_perfev_fd(const struct pt_perfev *e);
/* Closes and unmaps; what the ring held is lost. NULL-safe. */
void pt_perfev_close(struct pt_perfev *e);
/* Stops or resumes sampling (and the count). Returns 0 or -errno. */
int pt_perfev_enable(struct pt_perfev *e, int on);
/* A new period for the next samples. Returns 0 or -errno. */
int pt_perfev_set_period(struct pt_perfev *e, uint64_t period_ns);
/* The event's count now: the thread's CPU while enabled, in ns. */
int pt_perfev_count(struct pt_perfev *e, uint64_t *ns);
/* 1 if the ring holds records not drained yet. */
int pt_perfev_pending(const struct pt_perfev *e);
/* The stack copy it was opened with. */
size_t pt_perfev_stack_bytes(const struct pt_perfev *e);

/* A sample as the ring holds it; pointers valid only inside the callback. */
struct pt_perfev_sample {
	pid_t pid, tid;        /* in the PID namespace of the opener */
	uint64_t time_ns;      /* CLOCK_MONOTONIC */
	uint64_t count;        /* the event's count at the sample */
	int has_regs;          /* 0: the kernel had no user registers (a kernel thread) */
	const uint8_t *stack;  /* copied from the user SP up */
	size_t stack_len;      /* bytes copied */
	int stack_whole;       /* the copy stopped short of the size asked: the stack's top */
	uint64_t regs[20];     /* in the perf order of PT_PERFEV_REGS (see pt_perfev_regs) */
};
/* The registers of a sample in ptrace's layout (orig_rax -1: unknown). */
void pt_perfev_regs(const struct pt_perfev_sample *smp, struct user_regs_struct *out);

/* Reads what the kernel wrote since the last drain: each sample to fn,
 * which returns 0 to go on or 1 to stop before the next (that one and the
 * rest are left for the next drain), or passed over if fn is NULL; lost
 * records are added to *lost.
 * Returns the number of samples passed, or -EBADMSG for a record that
 * cannot be (the ring is then emptied). */
int pt_perfev_drain(struct pt_perfev *e, int (*fn)(void *arg, const struct pt_perfev_sample *smp),
		    void *arg, uint64_t *lost);

/* Whether this process may sample tid with perf events at all, and how:
 * tries an event with kernel ticks, then one without. Returns 0 with *cfg's
 * exclude_kernel set as it must be, or the negative errno of the last try;
 * why (if not NULL) says what was found, for a log and a profile. */
int pt_perfev_probe(pid_t tid, struct pt_perfev_cfg *cfg, char *why, size_t len);

/* ---- ptrace/perf's own -------------------------------------------------- */

struct perf_event_attr;

/* perf_event_open(2) on tid (cpu -1: any), close-on-exec. An fd or -1
 * (errno). */
int pt__perfev_sys_open(struct perf_event_attr *attr, pid_t tid, int cpu);

#endif
