/* Acting on one waitpid status of a traced thread: a stop of ours is
 * handed back, every other stop and event passed on as the kernel meant
 * it. Tracer thread only. */
#ifndef PT_EVENTS_H
#define PT_EVENTS_H

struct pt_thread;
struct pt_tracee;

enum pt__ev { PT__EV_NONE, PT__EV_OURS, PT__EV_HANDLED, PT__EV_GONE };

/* Acts on one waitpid status of th. Returns PT__EV_OURS when th is stopped
 * for a capture we asked for (the caller captures and resumes it). */
enum pt__ev pt__events_on_status(struct pt_tracee *t, struct pt_thread *th, int status);
/* Reaps one pending status of th without blocking, and acts on it. */
enum pt__ev pt__events_poll(struct pt_tracee *t, struct pt_thread *th);
/* Lets th go (PTRACE_DETACH), with sig. */
void pt__events_detach_thread(struct pt_thread *th, int sig);

#endif
