/* What the ptrace mechanism reports up: a thread's stack (struct
 * pt_sample), each pause, and the threads' life events. Types only: no
 * file implements this header. */
#ifndef PT_SAMPLE_H
#define PT_SAMPLE_H

#include <stdint.h>
#include <sys/types.h>

/* One thread's stack, handed to a callback after the thread was resumed. */
struct pt_sample {
	pid_t pid;              /* the process */
	pid_t tid;
	const char *comm;       /* the thread's name */
	char state;             /* from /proc/<tid>/stat: R S D T t Z ... */
	int syscall;            /* the system call it was in when stopped, or -1 */
	const uint64_t *frames; /* leaf first (see pt_unwind) */
	int n;
	uint64_t cpu_ns;        /* tick: CPU the thread used since its previous sample */
	int cached;             /* snapshot: not stopped, its last stack still holds */
	unsigned int flags;     /* PT_SAMPLE_F_* (sampler.h), set by sessions for their results */
	uint64_t sp, pc;        /* where it stopped (0: not stopped now) */
};
typedef void (*pt_sample_cb)(void *arg, const struct pt_sample *s);
/* Receives each pause (interrupt sent .. thread resumed) and unwind time. */
typedef void (*pt_timing_cb)(void *arg, uint64_t pause_ns, uint64_t unwind_ns);

/* Thread life events seen while attached (pt_tracer_poll). */
enum pt_event_kind { PT_EV_CLONE = 1, PT_EV_EXIT };
struct pt_event {
	enum pt_event_kind kind;
	pid_t pid;              /* the process */
	pid_t tid;              /* CLONE: the parent thread; EXIT: the thread that ended */
	pid_t child;            /* CLONE: the new thread */
	/* CLONE, with pt_tracee_clone_stacks on: the parent's stack at the
	 * clone (leaf first, as pt_unwind gives it), else NULL. */
	const uint64_t *stack;
	int n;
};
typedef void (*pt_event_cb)(void *arg, const struct pt_event *ev);

#endif
