/* /debug/pprof/block and /debug/pprof/mutex: where threads wait. From the
 * threads' states at each tick (ptrace/sessions/waiting.c), never a stop of a
 * thread that stays blocked. Go's block and mutex are cumulative since the
 * program started; here they are measured over a window: ?seconds=N, or
 * --wait-seconds when none is given (said in the profile's comment).
 * A Go program podprof reads answers with its goroutines' waits instead
 * (ptrace/sessions/gowaits.c), its threads' with ?view=threads.
 * Requests and the index's counts run on the loop thread, the encoding on
 * a work thread. */
#include "sidecar/profiles/waiting.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

#include "base/mem.h"
#include "encoder/pprof.h"
#include "ptrace/proc/proc.h"
#include "ptrace/profile/profile.h"
#include "ptrace/sessions/waiting.h"
#include "sidecar/server/cfg.h"
#include "sidecar/server/http.h"
#include "sidecar/server/params.h"
#include "sidecar/server/job.h"
#include "sidecar/server/log.h"
#include "sidecar/server/reply.h"
#include "sidecar/server/server.h"
#include "sidecar/server/stacks.h"
#include "sidecar/server/util.h"

struct waiting_job {
	struct sc_job job;
	const char *name;    /* "block" or "mutex" */
	int debug;
	int asked;           /* seconds= was given: a delta, Go's "<name>-delta" */
	int cumulative;      /* since the continuous watch began */
};

static const struct sc_stack_value waiting_values[] = {
	{ "contentions", "count", SC_COL_0 },
	{ "delay", "nanoseconds", SC_COL_1 },
};
static const struct sc_stack_spec waiting_spec = {
	waiting_values, 2, SC_LABEL_THREAD | SC_LABEL_TID | SC_LABEL_SYSCALL | SC_LEAF_SYSCALL,
};
/* A Go program's goroutines: their wait reason (wait=...), no thread. */
static const struct sc_stack_spec go_spec = { waiting_values, 2, SC_LABEL_GO };

/* A Go program's goroutines' waits. */
static int build_go(struct enc_pprof *e, const struct waiting_job *w, const struct sc_stacks_info *in)
{
	const struct pt_profile *pr = w->job.req.profile;
	char comment[1024], whose[32];
	int err;

	snprintf(comment, sizeof(comment),
		 "podprof: %s: goroutines of %s (%s) seen parked over %.1f s%s%s, looked at every "
		 "20 ms or more (at most 2%% of a core), each credited the time since the look "
		 "before; a contention is a wait seen anew (another place or reason, or parked again "
		 "since; waits that begin and end between two looks are not seen); "
		 "label wait: Go's wait reason; no SetBlockProfileRate needed. waits=%" PRIu64
		 " left_out=%" PRIu64 " (moved while read); the threads: ?view=threads",
		 w->name, sc_stacks_whose(pr, w->job.req.pid, whose, sizeof(whose)), pr->go_version,
		 (double)in->duration_ns / 1e9,
		 w->asked ? "" : w->cumulative ? " (since the continuous watch began)" :
		 " (no seconds= given: the default window, --wait-seconds)",
		 !strcmp(w->name, "mutex") ? ", waiting for a sync.Mutex or RWMutex (the waiters' "
		 "stacks, where Go's mutex profile has the holders')" : "",
		 in->thread_samples, pr->goroutines_torn);
	if ((err = enc_pprof_comment(e, comment)) || (err = sc_stacks_note_cut(e, pr)))
		return err;
	return sc_stacks_pprof(e, pr, &go_spec);
}

static int build(struct enc_pprof *e, const struct waiting_job *w)
{
	const struct pt_profile *pr = w->job.req.profile;
	struct sc_stacks_info in;
	char comment[512], whose[32];
	int err;

	sc_stacks_info(pr, &in);
	if ((err = sc_stacks_types(e, &waiting_spec)) ||
	    (err = enc_pprof_period(e, "contentions", "count", 1)))
		return err;
	enc_pprof_time(e, (int64_t)in.time_ns, (int64_t)in.duration_ns);
	if (pr->go_version[0])
		return build_go(e, w, &in);
	snprintf(comment, sizeof(comment),
		 "podprof: %s: threads of %s seen blocked (%s) at %d Hz over %.1f s%s, each "
		 "weighted by the time since the tick before (or its birth) less what it ran or "
		 "waited for a core meanwhile (its clocks); a contention is a new wait (the "
		 "thread ran or changed system call in between); stacks as cached since each "
		 "thread blocked; leaf frame: the system call. waits=%" PRIu64,
		 w->name, sc_stacks_whose(pr, w->job.req.pid, whose, sizeof(whose)),
		 !strcmp(w->name, "mutex") ? "in futex: lock and condition waiters" : "S or D",
		 in.hz, (double)in.duration_ns / 1e9,
		 w->asked ? "" : w->cumulative ? " (since the continuous watch began)" :
		 " (no seconds= given: the default window, --wait-seconds)",
		 in.thread_samples);
	if ((err = enc_pprof_comment(e, comment)))
		return err;
	if (pr->unsampled_ns) {
		/* ptrace/sessions/waiting.c */
		snprintf(comment, sizeof(comment),
			 "podprof: unseen_ns=%" PRIu64 " waited by threads that ended where no tick saw "
			 "(their clocks: life less CPU and run delay), added under \"" PT_MARK_UNSEEN_WAIT_NAME
			 "\" to the stacks the ended threads were seen waiting in", pr->unsampled_ns);
		if ((err = enc_pprof_comment(e, comment)))
			return err;
	}
	if ((err = sc_stacks_note_cut(e, pr)))
		return err;
	return sc_stacks_pprof(e, pr, &waiting_spec);
}

static enum sc_job_next waiting_done(struct sc_job *j)
{
	if (j->req.err == -EAGAIN)   /* the watch ended (its target exited) */
		return sc_job_error(j, 503, "the continuous watch of this process is not running");
	if (j->req.err == -ENOTSUP)
		return sc_job_error(j, 400, "the continuous watch of a Go program keeps its "
				    "goroutines' waits: ask for its threads' with seconds=N");
	return sc_job_check(j, NULL);
}

static void waiting_encode(struct sc_job *j, struct sc_reply *r)
{
	struct waiting_job *w = SC_CONTAINER_OF(j, struct waiting_job, job);
	struct enc_pprof *e = NULL;
	char name[32], *text;
	size_t len;
	int err;

	if (w->debug) {
		err = sc_stacks_contention_text(j->req.profile,
						!strcmp(w->name, "mutex") ? "mutex" : "contention",
						SC_COL_0, SC_COL_1, SC_MAX_PROFILE_BYTES, &text, &len);
		if (err)
			sc_reply_error(r, 500, err == -E2BIG ? "profile too large" : "out of memory");
		else
			sc_reply_body(r, 200, SC_TEXT_PLAIN, text, len);
		return;
	}
	snprintf(name, sizeof(name), "%s%s", w->name, w->asked ? "-delta" : "");
	if (!(err = enc_pprof_new(&e)))
		err = build(e, w);
	sc_reply_pprof(r, e, err, name);
	enc_pprof_free(e);
}

static const struct sc_job_ops waiting_ops = { waiting_done, waiting_encode, NULL };

static void waiting(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
		    struct sc_params *p, const struct pt_session_kind *kind,
		    const struct pt_session_kind *threads, const char *name)
{
	const struct sc_cfg *cfg = sc_server_cfg(srv);
	int seconds = p->seconds;
	struct waiting_job *w;
	struct sc_job *j;

	if (!(j = sc_job_new(sc_server_jobs(srv), c, req, p, &waiting_ops, sizeof(*w))))
		return;
	w = SC_CONTAINER_OF(j, struct waiting_job, job);
	w->name = name;
	w->debug = p->debug != 0;
	w->asked = seconds > 0;
	/* Without seconds=, Go answers with what accumulated since the start:
	 * so does the continuous watch; else a default window. */
	w->cumulative = !seconds && !p->target.procs.n && p->target.pid == sc_server_target(srv) &&
			sc_server_watching(srv);
	if (!seconds && !w->cumulative) {
		seconds = cfg->wait_seconds;
		log_info("%s: no seconds= given: measuring over the default window of %d s "
			 "(--wait-seconds)", name, seconds);
	}
	/* Several processes: each one's threads (a Go program's goroutines
	 * are one process's: pid=N). */
	j->req.kind = p->threads || p->target.procs.n ? threads : kind;
	sc_job_target(j, &p->target);
	j->req.duration_ns = (uint64_t)seconds * 1000000000ull;
	j->req.hz = w->cumulative ? cfg->continuous_hz : p->hz;
	sc_job_submit(j);
}

void sc_profile_block(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	waiting(srv, c, req, p, &pt_kind_block, &pt_kind_block_threads, "block");
}

void sc_profile_mutex(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	waiting(srv, c, req, p, &pt_kind_mutex, &pt_kind_mutex_threads, "mutex");
}

/* The index's counts: the target's threads waiting now (state S or D), for
 * mutex those in futex (0 where /proc/<tid>/syscall cannot be read: another
 * uid's). Go counts the records of its cumulative profiles; these are
 * windows, so the index shows what a window would catch. At most
 * COUNT_MAX_THREADS threads are read, on the loop thread. */
#define COUNT_MAX_THREADS 4096

static int64_t count_waiting(pid_t pid, int futex_only)
{
	pid_t *tids;
	size_t n;
	int64_t count = 0;

	if (pt_proc_list_tasks(pid, COUNT_MAX_THREADS, &tids, &n) && !tids)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char path[64], buf[1024];
		struct pt_stat st;
		long nr;
		uint64_t sp, pc;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tids[i]);
		if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, &st) ||
		    (st.state != 'S' && st.state != 'D'))
			continue;
		if (futex_only) {
			snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tids[i]);
			if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 ||
			    pt_proc_parse_syscall(buf, &nr, &sp, &pc) || nr != SYS_futex)
				continue;
		}
		count++;
	}
	base_free(tids);
	return count;
}

int64_t sc_count_blocked(struct sc_server *srv, pid_t pid)
{
	(void)srv;
	return count_waiting(pid, 0);
}

int64_t sc_count_futex(struct sc_server *srv, pid_t pid)
{
	(void)srv;
	return count_waiting(pid, 1);
}
