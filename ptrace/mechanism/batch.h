/* A batch of captures, once every thread of it runs again: unwound
 * offline, then each reported through the ops of whoever chose the
 * threads. Tracer thread only. */
#ifndef PT_BATCH_H
#define PT_BATCH_H

#include <stdint.h>
#include <sys/user.h>

struct pt_capture;
struct pt_stop_ops;
struct pt_tracee;

/* Unwinds captures 0..ncap into their slots' frames, reading the maps
 * again (and unwinding again) when an address lay outside them all. */
void pt__batch_unwind(struct pt_tracee *t, int ncap);
/* An unwind of cap into f (max frames) that gave n frames, one at most, in
 * glibc's clone or clone3 after its system call (at its return, or on the
 * few instructions after it: pt__batch_clone_tail). Their unwind info ends
 * before the system call (so that the new thread's unwind ends there, on
 * the same code), which ends the parent's unwind at its first frame too.
 * The parent is in a leaf with no frame of its own there: its return
 * address is the word at its stack pointer; if that points into
 * executable memory, the unwind goes on from the caller. Returns the
 * frames now in f; cap as it was (but what the unwind sets in it). */
int pt__batch_unwind_clone_leaf(struct pt_tracee *t, struct pt_capture *cap, uint64_t *f, int max, int n);
/* 1 if a thread stopped by ptrace (its registers regs) is in clone or
 * clone3, or back from it: the call's number in orig_rax. The parent has
 * rax not 0 (pt__batch_clone_parent_regs), the child 0. */
int pt__batch_in_clone(const struct user_regs_struct *regs);
/* 1 if a thread stopped by ptrace (its registers regs) is a parent in
 * clone or clone3 or back from it: the call's number in orig_rax and rax
 * not 0, the child's. rax is its child's tid once the call returned;
 * -ENOSYS at its clone event's stop; -ERESTARTNOINTR where a stop came
 * while the call ran (a tick's interrupt aborts the clone, which the
 * kernel makes again as the thread resumes); -errno where it failed. */
int pt__batch_clone_parent_regs(const struct user_regs_struct *regs);
/* 1 if the code around a thread's pc is glibc's clone or clone3 after its
 * system call (syscall; test %rax,%rax; jl; je; ret, with no unwind info)
 * and the pc is at one of its instructions: code holds PT_CLONE_TAIL_SPAN
 * bytes from pc - PT_CLONE_TAIL_BACK. */
#define PT_CLONE_TAIL_BACK 9
#define PT_CLONE_TAIL_SPAN 18
int pt__batch_clone_tail(const uint8_t *code);
/* Reports captures 0..ncap (unwound) through ops, each after learning its
 * thread's next stack size. */
void pt__batch_report(struct pt_tracee *t, int ncap, const struct pt_stop_ops *ops);

#endif
