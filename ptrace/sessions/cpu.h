/* The CPU profile session (see cpu.c). Sampler thread. */
#ifndef PT_SESSION_CPU_H
#define PT_SESSION_CPU_H

#include "ptrace/sampler/session.h"

/* CPU profile: on-CPU stacks over duration_ns at hz (Go's rule: a sample per
 * period of CPU each thread uses). Result: profile, values (samples, cpu ns). */
extern const struct pt_session_kind pt_kind_cpu;

#endif
