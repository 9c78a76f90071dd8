/* What a stop of a Python thread reads of its frames (pt_py_capture, inside
 * the pause), and the tokens that replace its native eval frames once it
 * runs again (pt_py_merge). Sampler thread only. */
#ifndef PT_PYTHON_FRAMES_H
#define PT_PYTHON_FRAMES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/runtimes/python/python.h"

struct pt_capture;

/* Walks the interpreter's thread states (while the target runs) and finds
 * those of the threads whose tids, as the target sees them, are
 * nstids[0..n): tstates[i] gets the address, or stays 0. Returns how many
 * were found, or a negative errno. */
int pt_py_find_threads(struct pt_py *py, const pid_t *nstids, uint64_t *tstates, size_t n);

/* During a stop: reads the frame chain of the thread whose thread state is
 * at tstate (nstid: its tid as the target sees it), using the stack copy
 * in cap for what lies on its stack. bulk (2 words, zero at first; NULL:
 * none) is the thread's own memory of the frame-stack region it read last:
 * it is read with the thread state in one process_vm_readv and updated
 * when the frames moved out of it. Returns 0 (out->n frames, possibly
 * 0), -ESTALE (tstate is not that thread's any more: look it up again) or
 * -EFAULT. */
int pt_py_capture(struct pt_py *py, uint64_t tstate, pid_t nstid, uint64_t *bulk,
		  const struct pt_capture *cap, struct pt_py_cap *out);

/* After the stop: replaces the native eval frames among frames[0..n) (leaf
 * first) with tokens for the Python frames of pc, matched innermost first
 * (each eval call runs the frames up to and including its entry frame).
 * Returns the number of frames (n: tokens replace frames one for one). */
int pt_py_merge(struct pt_py *py, const struct pt_py_cap *pc, uint64_t *frames, int n);

#endif
