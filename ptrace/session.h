/* Sessions: how a kind of request plugs into the sampler (STYLE H1: shared
 * only inside ptrace/). The sampler thread owns the thread, the request
 * queue, the targets and the tick schedule; what a request gathers and how
 * it turns that into a result is its kind's, one file each
 * (session_cpu.c, session_threads.c, session_symbols.c, ...), through the
 * ops below. A new kind is a new file and an `extern` in sampler.h.
 *
 * Every hook runs on the sampler thread, between ticks or inside one; none
 * may call back into the sampler or stop threads itself, except `start`,
 * which may use the tracee and its rule (pt_snapshot_take,
 * pt_symbolize_addr). */
#ifndef PT_SESSION_H
#define PT_SESSION_H

#include <stdint.h>
#include <sys/types.h>

#include "ptrace/rule.h"
#include "ptrace/sampler.h"
#include "ptrace/tracee.h"

/* One request being served. A kind's own session structure embeds this one
 * as its first member and recovers itself with PT_SESSION_OF. */
struct pt__target;

struct pt_session {
	const struct pt_session_kind *kind;
	struct pt_sampler *s;
	const struct pt_sampler_opts *o;
	struct pt_request *req;
	struct pt_tracee *t;
	struct pt_rule *rule;        /* t's sampling rule (pt_snapshot_take) */
	uint64_t start_ns, end_ns;   /* CLOCK_MONOTONIC; end_ns == start_ns without a window */
	uint64_t start_wall;         /* CLOCK_REALTIME at start, for profiles' time stamps */
	/* the sampler's, for the tick schedule */
	uint64_t period_ns, next_due;
	int take;                    /* the current tick is this session's */
	double scale;                /* this session's period over the tick's */
	struct pt__target *target;   /* the sampler's record of the target */
	struct pt_session *next;
};

#define PT_SESSION_OF(ss, type) ((type *)(void *)(ss))

#define PT_KIND_F_ATTACH 0x1u   /* needs the target traced (seized) */
#define PT_KIND_F_WINDOW 0x2u   /* lasts req->duration_ns if > 0 */
#define PT_KIND_F_STATES 0x4u   /* wants every thread's state at each of its ticks */
#define PT_KIND_F_TICKS  0x8u   /* its window is sampled by ticks (else only its ends count) */

struct pt_session_kind {
	const char *name;            /* for logs */
	size_t size;                 /* of the kind's session structure */
	unsigned int flags;          /* PT_KIND_F_* */
	/* The session begins: returns 0 or a negative errno (the request then
	 * fails with it). A kind without a window does all its work here. */
	int (*start)(struct pt_session *ss);
	/* A thread-sample taken by one of the session's ticks (the CPU it used
	 * since its previous sample is in smp->cpu_ns, for a tick period:
	 * scale it by ss->scale for the session's). May be NULL. */
	void (*on_sample)(struct pt_session *ss, const struct pt_sample *smp);
	/* Each thread of the target at each of the session's ticks
	 * (PT_KIND_F_STATES only). */
	void (*on_thread_state)(struct pt_session *ss, const struct pt_thread_state *st);
	/* A thread of the target was created or ended while the session ran. */
	void (*on_clone)(struct pt_session *ss, pid_t parent, pid_t child);
	void (*on_exit)(struct pt_session *ss, pid_t tid);
	/* The session ends (its window is over, its target exited or exec'd, or
	 * the client left): fill the request's results. Returns 0 or a negative
	 * errno. Not called when start failed. */
	int (*finish)(struct pt_session *ss);
	/* Frees what the kind allocated (not the session itself). May be NULL. */
	void (*free)(struct pt_session *ss);
};

/* State that outlives sessions, kept per target (a cumulative profile's
 * totals since podprof started watching): the slot of `key` (any address
 * the kind owns), NULL at first; free_fn frees what it holds when the target
 * is forgotten; event_fn (may be NULL) gets every thread event of the
 * target from then on, sessions or not, with clone stacks. Returns NULL if
 * the target has no slot left. Sampler thread. */
void **pt__target_slot(struct pt_session *ss, const void *key, void (*free_fn)(void *),
		       void (*event_fn)(void *p, const struct pt_event *ev));

/* ---- what kinds share -------------------------------------------------- */

/* The continuous watch's waits (block and mutex) of ss's target, kept by
 * session_waiting.c in a target slot of its own, where block and mutex
 * requests without a window find them: started anew (counts start again)
 * for the watch (session_watch.c), which feeds it each thread state.
 * Returns 0 or -ENOMEM. */
struct pt__watched;
int pt__watched_start(struct pt_session *ss, struct pt__watched **out);
void pt__watched_on_state(struct pt__watched *w, const struct pt_thread_state *st);
/* A look at the target's memory for allocs (session_memory.c). Returns 0
 * or a negative errno. */
int pt__memory_look(struct pt_session *ss);
/* Starts counting thread creations on ss's target from now on
 * (session_threadcreate.c). Returns 0 or -ENOMEM. */
int pt__creations_watch(struct pt_session *ss);

/* Writes a log line through the sampler's log hook: level 0 debug, 1 info,
 * 2 warning. Sampler thread. */
void pt__sampler_log(struct pt_sampler *s, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
