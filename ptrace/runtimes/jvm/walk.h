/* Java frames walked over a thread's captured stack (see jvm.h): from a
 * frame in the code cache to the first native frame above the Java ones
 * (the caller of the call stub, through which C++ called Java), each Java
 * frame a token. Sampler thread only. */
#ifndef PT_JVM_WALK_H
#define PT_JVM_WALK_H

#include <stdint.h>
#include <sys/user.h>

#include "ptrace/space/stackmem.h"

struct pt_jvm;

/* Where the walk stands: a frame's pc, SP and BP. exact: the pc is where
 * the thread stopped or a signal interrupted it (else a return address);
 * regs: the thread's registers there, when it is the leaf (the
 * interpreter keeps its bcp in r13). */
struct pt__jvm_at {
	uint64_t pc, sp, fp;
	int exact;
	const struct user_regs_struct *regs;
};

enum pt__jvm_end {
	PT__JVM_END,       /* nothing more to walk */
	PT__JVM_NATIVE,    /* *at is a native frame's: the unwinder goes on from there */
};

/* Walks from *at (a pc in the code cache) through the Java frames,
 * appending their tokens to frames[*n..max) and stepping *at; stack words
 * are read through w (the capture, as the unwinder reads it). Returns
 * PT__JVM_NATIVE with *at the first native frame's, or PT__JVM_END. */
enum pt__jvm_end pt__jvm_walk(struct pt_jvm *j, struct pt__walk *w, struct pt__jvm_at *at, uint64_t *frames,
			      int *n, int max);

#endif
