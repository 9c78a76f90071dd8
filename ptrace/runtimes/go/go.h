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

/* The token (a stack's last frame, as a labelled CPU sample's) of the set
 * of one label key=value, kept as goroutines' label sets are: the profile
 * gives it as the sample's labels. 0 if the sets are full or memory ran
 * out. */
uint64_t pt_go_label_token(struct pt_rt *rt, const char *key, const char *value);

#endif
