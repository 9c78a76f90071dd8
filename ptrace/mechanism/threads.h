/* A tracee's thread table: every thread seized, each allocated with its
 * owner's part (the sampling rule's) right after it, found by tid through a
 * map, and forgotten (compacted) only between batches of stops, since
 * captures waiting to be reported name their threads. Tracer thread only. */
#ifndef PT_THREADS_H
#define PT_THREADS_H

#include <stddef.h>
#include <sys/types.h>

#include "ptrace/mechanism/thread.h"
#include "ptrace/core/types.h"

struct pt_tracee;

/* Sets what the owner keeps per thread; only before the first attach.
 * Returns 0 or -EBUSY (threads are held). */
int pt_threads_set_ops(struct pt_tracee *t, const struct pt_thread_ops *ops);
/* Threads held, and thread i (0 <= i < n), gone ones included until the next
 * pt_threads_compact; a thread's address is stable until it is compacted. */
size_t pt_threads_count(const struct pt_tracee *t);
struct pt_thread *pt_threads_at(const struct pt_tracee *t, size_t i);
/* The live thread with this tid, or NULL. */
struct pt_thread *pt_threads_find(const struct pt_tracee *t, pid_t tid);
/* The same, ended or not (until it is forgotten at the next compaction). */
struct pt_thread *pt_threads_find_any(const struct pt_tracee *t, pid_t tid);
/* Forgets the threads marked gone (never while late captures wait, nor
 * during an iteration over the threads). */
void pt_threads_compact(struct pt_tracee *t);

/* Adds the thread tid (its files opened; born: a thread created while
 * traced, its files opened at first use, its CPU counted from 0); 0 if it
 * is there already. Returns 0, -E2BIG (max_threads) or -ENOMEM. */
int pt__threads_add(struct pt_tracee *t, pid_t tid, int born);
/* th, which exec'd: its files opened again, the owner's part dropped and
 * zeroed. */
void pt__threads_reset(struct pt_tracee *t, struct pt_thread *th);
/* Forgets every thread and frees the table (the tracee's end). */
void pt__threads_free(struct pt_tracee *t);

#endif
