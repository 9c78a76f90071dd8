/* The stop cycle of the ptrace mechanism: the threads a caller chose are
 * interrupted together, each captured as it stops and resumed at once (its
 * pause: interrupt to resume), the stops that come after a tick captured
 * when they come; then the batch is unwound and reported, unless an exec
 * came in between. Tracer thread only. */
#ifndef PT_STOP_H
#define PT_STOP_H

#include <stddef.h>
#include <stdint.h>

#include "ptrace/core/types.h"

struct pt_thread;
struct pt_tracee;
struct pt_tracer;
struct user_regs_struct;

/* Interrupts the threads sel[0..nsel) (an entry that could not be
 * interrupted is set to NULL), captures each as it stops and resumes it at
 * once: registers, a stack copy (as much as its last unwind needed, with
 * room to spare), a Python thread's frame chain. Polls for their stops
 * while spin_ns lasts, only with a core to spare (else the polling takes
 * that core from the threads it waits for); a snapshot (snap) then waits up
 * to wait_ns for the rest, a tick leaves them to pt_tracer_poll, which
 * captures them as they come for the next pt_stop_report_late, through
 * this tick's ops. Then unwinds offline and reports each capture through
 * ops (with snap, threads are marked PT_TH_WANTED only, not PT_TH_TICK).
 * Returns the number of captures reported now. */
int pt_stop_collect(struct pt_tracee *t, struct pt_thread **sel, int nsel, uint64_t wait_ns,
		    int snap, const struct pt_stop_ops *ops);
/* Unwinds and reports the stops captured after their tick, through that
 * tick's ops. The next collect does it first thing; call it before the
 * sessions those ops serve change. */
void pt_stop_report_late(struct pt_tracee *t);

/* A sample the kernel took without stopping the thread (perf_event,
 * ptrace/perf/perfev.h), put into capture slot `slot` (< max_per_tick) for th:
 * its registers and its stack copy (whole: the copy reached the stack's
 * top; else what lies beyond is read from memory as the unwind needs it).
 * Returns 0, -EBUSY while stops of ours hold the slots (a thread dump's:
 * put it later), or -ENOMEM. */
int pt_stop_put_copy(struct pt_tracee *t, int slot, struct pt_thread *th,
		     const struct user_regs_struct *regs, const uint8_t *stack, size_t len, int whole);
/* Unwinds and reports slots 0..n (put with pt_stop_put_copy) as one batch
 * through ops, as stops are; none if an exec came in between, or while
 * stops of ours hold the slots. Returns the number reported. */
int pt_stop_report_copies(struct pt_tracee *t, int n, const struct pt_stop_ops *ops);

/* Acts on a status wherever it was taken (held or reaped, see
 * pt__events_wait): a stop of ours that came after its tick is captured
 * now, any other stop of ours resumed. */
void pt__stop_on_status(struct pt_tracee *t, struct pt_thread *th, int status, int held);
/* Waits on the tracer's wake fd (SIGCHLD) at most timeout_ns; empties it. */
void pt__stop_wait_wake(int fd, uint64_t timeout_ns);
void pt__stop_drain_wake(int fd);
/* The tracer thread's own time runnable but waiting for a core, so far. */
uint64_t pt__stop_own_wait_ns(struct pt_tracer *tr);

#endif
