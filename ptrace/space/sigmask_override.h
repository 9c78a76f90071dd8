/* podprof's own sigprocmask(), which answers without a system call while the
 * calling thread unwinds (see sigmask_override.c for why). */
#ifndef PT_SIGMASK_OVERRIDE_H
#define PT_SIGMASK_OVERRIDE_H

/* Between begin and end, sigprocmask() called on this thread changes nothing
 * and reports the thread's mask as it was at begin. Nest neither; call
 * nothing in between that relies on changing the mask. Any thread. */
void pt__sigmask_fast_begin(void);
void pt__sigmask_fast_end(void);

#endif
