/* The goroutine dump session (see goroutines.c). Sampler thread. */
#ifndef PT_SESSION_GOROUTINES_H
#define PT_SESSION_GOROUTINES_H

#include "ptrace/sampler/session.h"

/* Goroutine dump of a Go program podprof can read: one sample per
 * goroutine (value 1) with its record (struct pt_profile's goroutines);
 * with a window, the goroutines at its end less those at its start, by
 * stack, without records. Any other process: the thread dump
 * (pt_kind_threads's), the profile's note saying why when it is a Go
 * program podprof cannot read. Result: profile. */
extern const struct pt_session_kind pt_kind_goroutines;

#endif
