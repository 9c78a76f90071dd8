/* A batch of captures, once every thread of it runs again: unwound
 * offline, then each reported through the ops of whoever chose the
 * threads. Tracer thread only. */
#ifndef PT_BATCH_H
#define PT_BATCH_H

#include <stdint.h>

struct pt_capture;
struct pt_stop_ops;
struct pt_tracee;

/* Unwinds captures 0..ncap into their slots' frames, reading the maps
 * again (and unwinding again) when an address lay outside them all. */
void pt__batch_unwind(struct pt_tracee *t, int ncap);
/* An unwind of cap into f (max frames) that gave n frames, one at most, in
 * glibc's clone or clone3 right after its system call: they mark their
 * return address undefined there (so that the new thread's unwind ends
 * there, on the same code), which ends the parent's unwind at its first
 * frame too. The parent is in a leaf with no frame of its own there: its
 * return address is the word at its stack pointer; if that points into
 * executable memory, the unwind goes on from the caller. Returns the
 * frames now in f; cap as it was (but what the unwind sets in it). */
int pt__batch_unwind_clone_leaf(struct pt_tracee *t, struct pt_capture *cap, uint64_t *f, int max, int n);
/* Reports captures 0..ncap (unwound) through ops, each after learning its
 * thread's next stack size. */
void pt__batch_report(struct pt_tracee *t, int ncap, const struct pt_stop_ops *ops);

#endif
