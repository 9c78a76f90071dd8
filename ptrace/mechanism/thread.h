/* One traced thread as the ptrace mechanism keeps it (its ptrace state,
 * its /proc files, what its stops need), and the readers of those files.
 * The sampling rule keeps its own part of each thread (struct
 * pt_rule_thread, ptrace/rule_internal.h), which the mechanism stores
 * beside this one without knowing what it holds (see
 * pt_threads_set_ops). Sampler thread only. */
#ifndef PT_THREAD_H
#define PT_THREAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/core/runtime.h"

struct pt_rule_thread;
struct pt_stat;

#define PT_TH_INTERRUPTING 0x01u   /* PTRACE_INTERRUPT sent, stop not yet seen */
#define PT_TH_GROUPSTOP    0x02u   /* in group-stop, restarted with PTRACE_LISTEN */
#define PT_TH_GONE         0x04u   /* exited or detached; dropped at the next compaction */
#define PT_TH_WANTED       0x08u   /* selected for a capture: capture at its stop */
#define PT_TH_LATE         0x10u   /* a tick's: if it stops after the tick, capture it then */
#define PT_TH_TICK         0x20u   /* interrupted for a CPU sample (not a snapshot) */
#define PT_TH_SIGNALLED    0x40u   /* resumed with a signal, maybe not on a core since */
#define PT_TH_UNOPENED     0x80u   /* born while traced: its files opened at first use */

struct pt_thread {
	pid_t pid, tid;            /* its process, itself (in our PID namespace) */
	unsigned int flags;        /* PT_TH_* */
	long opts;                 /* the ptrace options it has (follow.h), -1: not known */
	int sys_fd, sched_fd;      /* /proc/<pid>/task/<tid>/syscall, schedstat */
	int stat_fd;               /* .../stat, only where syscall cannot be read (see pt_thread_open) */
	/* when its files were last opened (it was added, or it exec'd), and
	 * its CPU time and wait for a core then */
	uint64_t opened_ns, open_run_ns, open_wait_ns;
	char comm[16];             /* its name, read at most once a second */
	uint64_t comm_ns;          /* when comm was read */
	char state;                /* R S D ... as last read or seen (see pt_thread_running) */
	/* the stop cycle (stop.c) */
	uint64_t t_interrupt;      /* when our interrupt was sent */
	int resume_sig;            /* the signal to deliver when resumed from our stop */
	uint64_t sig_slices;       /* PT_TH_SIGNALLED: its count of times on a core then */
	/* capture (capture.c) */
	size_t stack_want;         /* stack to copy at its next stop; 0: stack_bytes */
	size_t kstack_want;        /* the kernel's copy at its next sample (perf_event); 0: not learned */
	size_t kstack_last;        /* what its last sample's unwind needed of it */
	uint64_t last_sp;          /* its stack pointer at its last stop */
	/* Go: its signal stack and the signal frame on it, as its last unwind
	 * through Go's signal handler found them (pt_capture sig_*), or 0 */
	uint64_t sig_uc, sig_lo, sig_hi;
	/* what the language runtimes keep of it (ptrace/core/runtime.h) */
	struct pt_rt_thread rt;
	/* The sampling rule's part of the thread: the caller's, zeroed when the
	 * thread is added and when it exec's, NULL if the caller keeps none
	 * (pt_threads_set_ops). It lies right after this structure. */
	struct pt_rule_thread *rule;
};

/* Opens th's /proc files (closing those open) and reads its CPU time and
 * wait so far into open_run_ns and open_wait_ns; th->pid and th->tid must
 * be set. /proc/<tid>/syscall is mode 0400, its owner's: a podprof of
 * another uid without CAP_DAC_OVERRIDE (it keeps only CAP_SYS_PTRACE)
 * cannot open it; then its stat (0444) is opened instead, which tells
 * whether it runs (blocked threads then go without their system call's
 * name). Files that cannot be opened stay -1 (a thread gone: its reads
 * fail with -ESRCH). */
void pt_thread_open(struct pt_thread *th);
/* The same for a thread born while traced, put off until a reader below
 * first needs a file (PT_TH_UNOPENED): its birth stop is not made longer
 * by three system calls. It starts from no CPU and no wait. */
void pt_thread_open_later(struct pt_thread *th);
/* 1 if th's system call cannot be read (another uid's thread: see
 * pt_thread_open), its stat only. */
int pt_thread_stat_only(struct pt_thread *th);
/* Closes th's files. */
void pt_thread_close(struct pt_thread *th);

/* Reads an open /proc text file from its start, NUL-terminated (one pread:
 * /proc answers a small file whole). Returns its length, or <= 0. */
ssize_t pt__thread_pread(int fd, char *buf, size_t len);
/* pt__thread_pread of a file opened at its first read (*fd is -1 until
 * then; the owner of *fd closes it). */
ssize_t pt__thread_pread_own(int *fd, const char *path, char *buf, size_t len);

/* th's CPU time so far and, each if not NULL, its time runnable but waiting
 * for a core and how many times it got one (/proc/<tid>/schedstat).
 * Returns 0, -ESRCH or -EBADMSG. */
int pt_thread_read_sched(struct pt_thread *th, uint64_t *run_ns, uint64_t *wait_ns,
			 uint64_t *slices);
/* pt_thread_read_sched at th's end (a zombie not yet reaped), or at its
 * birth, without opening its other files: through its open schedstat if it
 * has one. */
int pt_thread_read_sched_end(const struct pt_thread *th, uint64_t *run_ns, uint64_t *wait_ns);
/* Reads and parses th's /proc/<tid>/stat. Returns 0 or -ESRCH. */
int pt_thread_read_stat(const struct pt_thread *th, struct pt_stat *st);
/* Reads th's state and name (/proc/<tid>/stat, through stat_fd where it is
 * open). Returns 0 or -ESRCH. */
int pt_thread_read_state(struct pt_thread *th);
/* th's CPU time in kernel mode so far (its stat's stime, in clock ticks:
 * the kernel's share of its precise CPU time, as found in kernel mode by
 * the scheduler's ticks). Returns 0 or -ESRCH. */
int pt_thread_read_kernel_ns(struct pt_thread *th, uint64_t *ns);
/* 1 if th is runnable (state R) now: /proc/<tid>/syscall says "running"
 * for exactly that, for a third of the cost of /proc/<tid>/stat (another
 * uid's thread: its stat). Its name is read again when a second old. */
int pt_thread_running(struct pt_thread *th);
/* What /proc/<tid>/syscall says: 1 running; 0 blocked, with the system
 * call's number (-1 outside one) and the stack and instruction pointers;
 * -EBADMSG unreadable text; -ESRCH gone or not readable (another uid). */
int pt_thread_read_syscall(struct pt_thread *th, long *nr, uint64_t *sp, uint64_t *pc);

/* Records that th is resumed with a signal (PT_TH_SIGNALLED): the kernel
 * sets up the handler's frame only when the thread next runs, so a stop
 * before then would land at the handler's first instruction. */
void pt_thread_note_signal(struct pt_thread *th);
/* 1 while th, resumed with a signal, has not been on a core since (slices:
 * its count of times on a core now); clears the mark once it has. */
int pt_thread_signal_pending(struct pt_thread *th, uint64_t slices);

#endif
