/* Capturing a thread we stopped: its registers, a copy of its stack, the
 * stack a Go signal handler interrupted, a Python thread's frame chain:
 * what changes as soon as it runs, read inside the pause. Tracer thread
 * only. */
#ifndef PT_CAPTURE_H
#define PT_CAPTURE_H

struct pt_capture;
struct pt_py_cap;
struct pt_thread;
struct pt_tracee;

/* Captures registers and stack of th, stopped by us, into cap (and, with
 * pyc, its Python frame chain, read in the same stop). Returns 0 or
 * -errno of PTRACE_GETREGS. */
int pt__capture(struct pt_tracee *t, struct pt_thread *th, struct pt_capture *cap,
		struct pt_py_cap *pyc);
/* Before a batch of stops: the Python thread states of the threads in sel
 * (NULL entries skipped) that have none yet, in one walk of the
 * interpreter's list. */
void pt__capture_py_prepare(struct pt_tracee *t, struct pt_thread *const *sel, int nsel);
/* Looks for the interpreter, if the target runs one of a release we know,
 * and makes the capture slots for its frame chains. */
void pt__capture_py_detect(struct pt_tracee *t);

#endif
