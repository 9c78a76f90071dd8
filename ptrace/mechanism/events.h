/* Waiting for traced threads, and acting on one status of a traced thread:
 * a stop of ours is handed back, every other stop and event passed on as
 * the kernel meant it. Tracer thread only. */
#ifndef PT_EVENTS_H
#define PT_EVENTS_H

#include <stdint.h>
#include <sys/types.h>

#include "ptrace/core/types.h"

struct pt_thread;
struct pt_tracee;

enum pt__ev { PT__EV_NONE, PT__EV_OURS, PT__EV_HANDLED, PT__EV_GONE };

/* waitpid(pid, status, WNOHANG | __WALL | flags), pid -1 for any, except
 * that the status is only looked at, not reaped (*held = 1; an exec's stop
 * is reaped): a stop ends for wait too when the thread is resumed
 * (PTRACE_CONT, _LISTEN, _DETACH), and a signal-delivery stop keeps its
 * signal until then, even if podprof dies first; an exit is reaped by
 * pt__events_on_status once the thread's clocks are read (see events.c).
 * A held status must be acted on (pt__events_on_status) or reaped
 * (pt__events_reap) before the next wait for any: until then every wait
 * returns it again. */
int pt__events_wait(int pid, int *status, int flags, int *held);
/* Reaps the status pt__events_wait held (a thread nobody knows yet, whose
 * status is kept for later): returns as waitpid, *status the status reaped
 * (an exit that came since, maybe). */
int pt__events_reap(int pid, int *status);

/* Acts on one status of th, held (see pt__events_wait) or reaped. Returns
 * PT__EV_OURS when th is stopped for a capture we asked for (the caller
 * captures and resumes it). */
enum pt__ev pt__events_on_status(struct pt_tracee *t, struct pt_thread *th, int status, int held);
/* Takes one pending status of th without blocking (pt__events_wait), and
 * acts on it. */
enum pt__ev pt__events_poll(struct pt_tracee *t, struct pt_thread *th);
/* Tells the tracer's event callback of a thread's life event (struct
 * pt_event; stack: the parent's at a clone, n frames, or NULL). */
void pt__events_emit(struct pt_tracee *t, enum pt_event_kind kind, pid_t tid, pid_t child,
		     const uint64_t *stack, int n);
/* PT_EV_CLONE of child by parent (0: not known): born at born_ns (a FORK
 * record's time), or, born_ns 0, told now with its clocks read now. */
void pt__events_emit_clone(struct pt_tracee *t, pid_t parent, pid_t child, const uint64_t *stack, int n,
			   uint64_t born_ns);
/* Lets th go (PTRACE_DETACH), with sig. */
void pt__events_detach_thread(struct pt_thread *th, int sig);

#endif
