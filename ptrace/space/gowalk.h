/* Go's frames in a walk of a capture (ptrace/space/unwinder.c's pt_unwind):
 * stepped with each function's pcsp table from .gopclntab, as Go's own
 * traceback does, across Go's stack switches. Sampler thread only. */
#ifndef PT_GOWALK_H
#define PT_GOWALK_H

#include <stdint.h>

#include "ptrace/space/stackmem.h"

struct pt_gofunc;
struct pt_module;

/* The Go function whose code holds addr (into *f) and its module, if that
 * module has a Go table; else NULL. Unless `force`, looks only once some
 * module of the walk has one: C programs pay nothing per frame. */
struct pt_module *pt__gowalk_func(struct pt__walk *c, uint64_t addr, int force, struct pt_gofunc *f);
/* Steps Go frames from *st into frames[*np..max) (return addresses minus
 * one, but a signal's restorer and the PC it interrupted), updating *np,
 * *st and *crossings. Stops at the top of a goroutine or system stack
 * (*complete set), and returns PT__HAND_C where the next frame is not Go
 * code (its state in *st), else PT__HAND_DONE. */
enum pt__hand pt__gowalk(struct pt__walk *c, uint64_t *frames, int *np, int max, int *complete,
			 struct pt__walk_state *st, int *crossings);
/* The interrupted SP and PC that a signal frame whose ucontext is at `uc`
 * holds, read from cap's stack copy. 0 if the copy does not hold it. */
int pt_capture_signal(const struct pt_capture *cap, uint64_t uc, uint64_t *sp, uint64_t *pc);

#endif
