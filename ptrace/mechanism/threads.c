/* A tracee's thread table: every thread seized, each allocated with the
 * owner's part of it (the sampling rule's, struct pt_thread_ops) right
 * after, found by tid through a map, and forgotten (compacted) only
 * between batches of stops, since captures waiting to be reported name
 * their threads. Sampler thread only. */
#include "ptrace/mechanism/threads.h"

#include <errno.h>
#include <string.h>

#include "base/array.h"
#include "base/mem.h"
#include "ptrace/mechanism/mechanism.h"

int pt_threads_set_ops(struct pt_tracee *t, const struct pt_thread_ops *ops)
{
	if (t->n)
		return -EBUSY;
	t->tops = *ops;
	return 0;
}

size_t pt_threads_count(const struct pt_tracee *t)
{
	return t->n;
}

struct pt_thread *pt_threads_at(const struct pt_tracee *t, size_t i)
{
	return t->th[i];
}

struct pt_thread *pt_threads_find_any(const struct pt_tracee *t, pid_t tid)
{
	uint64_t *v = tid > 0 ? base_map_get(&t->by_tid, (uint64_t)tid) : NULL;

	return v ? (struct pt_thread *)(uintptr_t)*v : NULL;
}

struct pt_thread *pt_threads_find(const struct pt_tracee *t, pid_t tid)
{
	struct pt_thread *th = pt_threads_find_any(t, tid);

	return th && !(th->flags & PT_TH_GONE) ? th : NULL;
}

/* The owner's part of th, dropped and zeroed. */
static void reset_owner_part(struct pt_tracee *t, struct pt_thread *th)
{
	if (!th->rule)
		return;
	if (t->tops.drop)
		t->tops.drop(t->tops.arg, th);
	memset(th->rule, 0, t->tops.size);
}

int pt__threads_add(struct pt_tracee *t, pid_t tid, int born)
{
	struct pt_thread *th;
	size_t size;
	int err;

	if (pt_threads_find(t, tid))
		return 0;
	if (t->n >= (size_t)t->o.max_threads)
		return -E2BIG;
	if ((err = BASE_ARRAY_RESERVE(t->th, t->cap, t->n + 1)))
		return err;
	if ((err = base_size_add(sizeof(*th), t->tops.size, &size)))
		return err;
	if (!(th = base_calloc(1, size)))
		return -ENOMEM;
	if ((err = base_map_put(&t->by_tid, (uint64_t)tid, (uint64_t)(uintptr_t)th))) {
		base_free(th);
		return err;
	}
	th->pid = t->pid;
	th->tid = tid;
	th->opts = -1;
	th->sys_fd = th->sched_fd = th->stat_fd = -1;
	if (t->tops.size)
		th->rule = (struct pt_rule_thread *)(void *)(th + 1);
	if (born)
		pt_thread_open_later(th);
	else
		pt_thread_open(th);
	t->th[t->n++] = th;
	return 0;
}

void pt__threads_reset(struct pt_tracee *t, struct pt_thread *th)
{
	reset_owner_part(t, th);
	pt_thread_open(th);
}

/* Forgets th: its owner's part, its files, its place in the map. */
static void forget(struct pt_tracee *t, struct pt_thread *th)
{
	uint64_t *v = base_map_get(&t->by_tid, (uint64_t)th->tid);

	if (v && *v == (uint64_t)(uintptr_t)th)
		base_map_del(&t->by_tid, (uint64_t)th->tid);
	reset_owner_part(t, th);
	pt_thread_close(th);
	base_free(th);
}

void pt_threads_compact(struct pt_tracee *t)
{
	size_t w = 0;

	if (t->nlate)
		return;   /* late captures name their threads: later */
	for (size_t r = 0; r < t->n; r++) {
		if (t->th[r]->flags & PT_TH_GONE) {
			forget(t, t->th[r]);
			continue;
		}
		t->th[w++] = t->th[r];
	}
	t->n = w;
	if (t->n == 0 && t->attached) {
		t->attached = 0;
		t->detaching = 0;
	}
}

/* Every thread forgotten, the table freed (the tracee's end). */
void pt__threads_free(struct pt_tracee *t)
{
	for (size_t i = 0; i < t->n; i++)
		forget(t, t->th[i]);
	base_free(t->th);
	base_map_free(&t->by_tid);
	t->th = NULL;
	t->n = t->cap = 0;
}
