/* A batch of captures, once every thread of it runs again: unwound
 * offline, then each reported through the ops of whoever chose the
 * threads. Tracer thread only. */
#ifndef PT_BATCH_H
#define PT_BATCH_H

struct pt_stop_ops;
struct pt_tracee;

/* Unwinds captures 0..ncap into their slots' frames, reading the maps
 * again (and unwinding again) when an address lay outside them all. */
void pt__batch_unwind(struct pt_tracee *t, int ncap);
/* Reports captures 0..ncap (unwound) through ops, each after learning its
 * thread's next stack size. */
void pt__batch_report(struct pt_tracee *t, int ncap, const struct pt_stop_ops *ops);

#endif
