/* Go as a runtime of ptrace/runtimes/'s table: a process whose runtime
 * podprof can read (gort.h) is a Go program; its goroutines are what the
 * goroutine dump lists (ptrace/sessions/goroutines.c). Its stacks need no
 * runtime of their own: .gopclntab names and unwinds Go code for every
 * process (ptrace/space/). Sampler thread only. */
#ifndef PT_GO_H
#define PT_GO_H

#include "ptrace/core/runtime.h"

struct pt_go;

extern const struct pt_runtime_ops pt_runtime_go;

/* The Go runtime reader of a runtime state of pt_runtime_go's. */
struct pt_go *pt_go_of(struct pt_rt *rt);

#endif
