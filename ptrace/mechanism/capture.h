/* Capturing a thread we stopped: its registers, a copy of its stack, the
 * stack a Go signal handler interrupted, and what the process's language
 * runtimes read of it (a Python thread's frame chain): what changes as soon
 * as it runs, read inside the pause. Tracer thread only. */
#ifndef PT_CAPTURE_H
#define PT_CAPTURE_H

#include <stddef.h>
#include <sys/types.h>

struct pt_capture;
struct pt_thread;
struct pt_tracee;

/* Captures registers and stack of th, stopped by us, into cap, and the
 * runtimes' reads of it into their capture slot `slot` (-1: none), in the
 * same stop. Returns 0 or -errno of PTRACE_GETREGS. */
int pt__capture(struct pt_tracee *t, struct pt_thread *th, struct pt_capture *cap, int slot);
/* Grows cap's stack copy to hold len bytes (in pages). Returns 0 or
 * -ENOMEM. */
int pt__capture_room(struct pt_capture *cap, size_t len);
/* Capture slot `slot` of t (< max_per_tick) ready for len bytes of stack
 * and its frames (both made at its first use). Returns 0 or -ENOMEM. */
int pt__slot_ready(struct pt_tracee *t, int slot, size_t len);
/* Before a batch of stops, the threads running: what the active runtimes
 * look up once for the threads in sel (NULL entries skipped), each
 * thread's tid as the target sees it read first. */
void pt__capture_prepare(struct pt_tracee *t, struct pt_thread *const *sel, int nsel);
/* th's tid as the target sees it (its rt.nstid), read once. */
pid_t pt__capture_nstid(struct pt_tracee *t, struct pt_thread *th);

#endif
