/* The sampler's state (struct pt_sampler, struct pt__target), read and
 * written by the sampler's files (sampler.c: the thread, the sessions and
 * the ticks; targets.c: the processes it traces; backends.c: how each
 * target's CPU samples are taken) and by nothing else (CONVENTIONS
 * H1). Types only: no file implements this header. Sampler thread, but for
 * what pt_sampler's lock guards. */
#ifndef PT_SAMPLER_STATE_H
#define PT_SAMPLER_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ptrace/sampler/rate.h"
#include "ptrace/sampler/request.h"
#include "ptrace/sampler/stats.h"
#include "ptrace/core/types.h"

struct pt_rule;
struct pt_session;
struct pt_tracee;
struct pt_tracer;

#define MAX_TRACEES 320   /* a group of PT_GROUP_MAX and a few more */

#define MAX_SLOTS 8

struct pt__target {
	struct pt_tracee *t;
	struct pt_rule *rule;  /* t's sampling rule */
	int nsessions;         /* sessions with a window on it */
	uint64_t idle_since;
	uint64_t signals_idle; /* its signals passed on when it became idle (pt__target_idle) */
	int detach_started;    /* detach_idle interrupted it: let go in its second pass */
	struct {               /* kinds' state that outlives sessions */
		const void *key;
		void *p;
		void (*free)(void *);
		void (*event)(void *p, const struct pt_event *ev);
	} slot[MAX_SLOTS];
	int nslots;
};

struct pt_sampler {
	struct pt_sampler_opts o;
	pt_done_cb done;
	pt_log_cb log;
	void *arg;
	pthread_t thread;
	int evfd, sigfd;
	/* SIGCHLD's wake (sleep_until_due): when ppoll returned, and that less
	 * the sampler's wait for a core then, the time given to the ends
	 * polled right after (0: as seen, struct pt_exit). */
	uint64_t woke_at_ns, woke_est_ns;
	struct pt_tracer *tr;      /* the sampler thread as tracer */
	pthread_mutex_t lock;      /* guards queue, stopping, stats ring */
	struct pt_request *queue;
	int stopping;
	int paused;                /* pt_sampler_pause: cancel everything, detach */
	atomic_int running;        /* the thread has not returned */
	_Atomic uint64_t beat_ns;  /* when the loop last went round */
	struct pt_session *sessions;   /* those with a window, running */
	struct pt__target tg[MAX_TRACEES];
	int ntg;
	uint64_t next_tick;
	uint64_t rng;              /* xorshift state for tick jitter */
	uint64_t ticks, ticks_late;
	int ngroups;               /* requests of several processes being served */
	struct pt_request *follow; /* group members to serve after the poll (follow_later) */
	uint64_t forks_followed;
	struct pt_sampler_stats retired;   /* counters of targets forgotten */
	struct pt_rate rate;
	/* stats */
	struct pt__timing_ring ring;   /* recent pauses and unwinds, under lock */
	struct pt_sampler_stats st;
};

#endif
