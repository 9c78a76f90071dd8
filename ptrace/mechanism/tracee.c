/* A tracee's life: created with its capture slots and its unwinding and
 * naming state, attached (every thread seized, nothing stopped), detached
 * (every thread interrupted and let go, with whatever signal it stopped
 * for), moved on to a new program after an exec, freed. The pieces of the
 * mechanism it uses are listed in tracee_internal.h. Sampler thread only,
 * but for pt_tracee_new and the accessors. */

#include "ptrace/mechanism/tracee.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <unistd.h>

#include "base/mem.h"
#include "ptrace/mechanism/capture.h"
#include "ptrace/mechanism/events.h"
#include "ptrace/mechanism/execfp.h"
#include "ptrace/mechanism/follow.h"
#include "ptrace/space/mem.h"
#include "ptrace/proc/proc.h"
#include "ptrace/core/internal.h"
#include "ptrace/mechanism/mechanism.h"
#include "ptrace/runtimes/runtimes.h"
#include "ptrace/space/space.h"
#include "ptrace/space/stackmem.h"
#include "ptrace/mechanism/stop.h"
#include "ptrace/mechanism/threads.h"
#include "ptrace/mechanism/tracer.h"

/* The shared page pool sized for the tracer's tracees (a pool that cannot
 * grow leaves reads uncached: slower, not wrong). */
static void size_pool(struct pt_tracer *tr)
{
	unsigned int n = 0;

	for (struct pt_tracee *x = tr->tracees; x; x = x->next)
		n++;
	(void)pt_mem_pool_size(tr->pages, n);
}

int pt_tracee_new(struct pt_tracee **out, struct pt_tracer *tr, pid_t pid,
		  const struct pt_tracee_opts *opts)
{
	size_t slots = (size_t)opts->max_per_tick;
	struct pt_tracee *t;
	int err = -ENOMEM;

	*out = NULL;
	t = base_calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->pid = pid;
	t->o = *opts;
	t->auxv_fd = -1;
	t->caps = base_calloc(slots, sizeof(*t->caps));
	t->frames = base_calloc(slots, sizeof(*t->frames));
	t->nframes = base_calloc(slots, sizeof(*t->nframes));
	t->unwind_ns = base_calloc(slots, sizeof(*t->unwind_ns));
	t->slot_th = base_calloc(slots, sizeof(*t->slot_th));
	t->slot_pause = base_calloc(slots, sizeof(*t->slot_pause));
	t->ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	t->spin_slots = t->ncpu > 2 ? t->ncpu - 1 : 1;
	if (!t->caps || !t->frames || !t->nframes || !t->unwind_ns || !t->slot_th || !t->slot_pause)
		goto out;
	/* The slots' stack copies and frames are made at their first use,
	 * the copies as large as used: a process of few threads never uses
	 * most of them (pt__slot_ready). */
	if ((err = pt_space_new(&t->as, pid, tr->pages, tr->objects, opts->debug_dir)))
		goto out;
	/* a runtime slot per capture slot, and one for clone events */
	if ((err = pt_runtimes_new(&t->rts, t->as,
				   (opts->python ? PT_RUNTIME_PYTHON : 0) | PT_RUNTIME_GO | PT_RUNTIME_JVM,
				   opts->max_per_tick + 1)))
		goto out;
	t->tr = tr;
	t->next = tr->tracees;
	tr->tracees = t;
	size_pool(tr);
	*out = t;
	t = NULL;
	err = 0;
out:
	pt_tracee_free(t);
	return err;
}

void pt_tracee_free(struct pt_tracee *t)
{
	if (!t)
		return;
	if (t->attached)
		pt_tracee_detach(t, 2000000000ull);
	for (struct pt_tracee **pp = t->tr ? &t->tr->tracees : NULL; pp && *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			size_pool(t->tr);
			break;
		}
	pt__threads_free(t);
	if (t->auxv_fd >= 0)
		close(t->auxv_fd);
	if (t->caps)
		for (int i = 0; i < t->o.max_per_tick; i++)
			base_free(t->caps[i].stack), base_free(t->caps[i].sig_stack);
	if (t->frames)
		for (int i = 0; i < t->o.max_per_tick; i++)
			base_free(t->frames[i]);
	base_free(t->caps);
	base_free(t->frames);
	base_free(t->nframes);
	base_free(t->unwind_ns);
	base_free(t->slot_th);
	base_free(t->slot_pause);
	if (t->clone_cap)
		base_free(t->clone_cap->stack), base_free(t->clone_cap->sig_stack);
	base_free(t->clone_cap);
	base_free(t->clone_frames);
	pt_runtimes_free(t->rts);
	pt_space_free(t->as);
	base_free(t);
}

pid_t pt_tracee_pid(const struct pt_tracee *t) { return t->pid; }
const struct pt_tracee_opts *pt_tracee_opts(const struct pt_tracee *t) { return &t->o; }
int pt_tracee_attached(const struct pt_tracee *t) { return t->attached; }
int pt_tracee_detaching(const struct pt_tracee *t) { return t->attached && t->detaching; }
int pt_tracee_gone(const struct pt_tracee *t) { return t->gone; }
int pt_tracee_exec_pending(const struct pt_tracee *t) { return t->execed; }
int pt_tracee_reads_in_stop(const struct pt_tracee *t)
{
	return pt_runtimes_read_in_stop(t->rts);
}

void pt_tracee_clone_stacks(struct pt_tracee *t, int on)
{
	if (t->clone_stacks == on)
		return;
	t->clone_stacks = on;
	if (t->attached && t->no_clone_stops && on) {
		t->reopt = 1;   /* its clone events back */
		pt__follow_interrupt_stale(t);
	}
}

uint64_t pt_tracee_cpu_ns(const struct pt_tracee *t)
{
	if (t->gone)
		return t->gone_cpu_ns;
	return t->cpu_clock ? t->cpu_clock(t->pid) : pt__process_cpu_ns(t->pid);
}

struct pt_space *pt_tracee_space(struct pt_tracee *t) { return t->as; }
struct pt_runtimes *pt_tracee_runtimes(struct pt_tracee *t) { return t->rts; }
void pt_tracee_breathe(struct pt_tracee *t) { pt_tracer_breathe(t->tr); }
uint64_t pt_tracee_signals(const struct pt_tracee *t) { return t->st.signals_reinjected; }
void pt_tracee_set_own_signal(struct pt_tracee *t, int sig) { t->own_sig = sig; }

void pt_tracee_stats(const struct pt_tracee *t, struct pt_tracee_stats *out)
{
	struct pt_space_stats ss;

	*out = t->st;
	pt_space_stats(t->as, &ss);
	out->maps_rereads = ss.maps_rereads;
	out->perfmap_entries = ss.perfmap_entries;
	out->symtab_load_ns = ss.symtab_load_ns;
	out->symtab_loads = ss.symtab_loads;
}

int pt_tracee_rt_lines(struct pt_tracee *t, uint64_t token, struct pt_rt_line *out, int max)
{
	return pt_runtimes_lines(t->rts, token, out, max);
}

int pt_tracee_thread_name(struct pt_tracee *t, pid_t tid, char *buf, size_t len)
{
	struct pt_thread *th;

	if (!pt_runtimes_active(t->rts) || !(th = pt_threads_find(t, tid)))
		return 0;
	return pt_runtimes_thread_name(t->rts, pt__capture_nstid(t, th), buf, len);
}

const char *pt_tracee_rt_note(struct pt_tracee *t)
{
	return pt_runtimes_note(t->rts);
}

void pt_tracee_ack_exec(struct pt_tracee *t)
{
	if (!t->execed)
		return;
	t->execed = 0;
	pt_space_reset(t->as);
	t->mm_fp = pt__execfp_read(t, 0);   /* the new program's */
	/* The new program's runtimes, if any (no token of the old program's
	 * is left: the sessions that saw it have ended), and what they keep
	 * of each thread, looked up anew. */
	pt_runtimes_reset(t->rts);
	for (size_t i = 0; i < t->n; i++)
		memset(&t->th[i]->rt, 0, sizeof(t->th[i]->rt));
	pt_runtimes_detect(t->rts);
}

/* 1 if t's leader is traced by this tracer already: a child its traced
 * parent forked (the tracee's PTRACE_O_TRACEFORK), adopted as it is, in its
 * first stop, its options its parent's. */
static int traced_by_us(const struct pt_tracee *t)
{
	char path[64], buf[2048];
	long long tracer;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)t->pid);
	return pt_proc_slurp(path, buf, sizeof(buf)) > 0 && !pt_proc_status_value(buf, "TracerPid", &tracer) &&
	       (pid_t)tracer == t->tr->tid;
}

/* Seizes the threads of t's listing not known yet (no stop), each counted
 * from now; *added says how many. Returns 0, or a negative errno that ends
 * an attach (a thread gone or exiting meanwhile is passed over). */
static int seize_listed(struct pt_tracee *t, size_t *added)
{
	size_t n;
	pid_t *tids;
	int err = pt_proc_list_tasks(t->pid, (size_t)t->o.max_threads, &tids, &n);

	*added = 0;
	if (err && err != -E2BIG)
		return err;
	err = 0;
	for (size_t i = 0; i < n && !err; i++) {
		if (pt_threads_find(t, tids[i]))
			continue;
		err = pt__follow_seize(t, tids[i], 0);
		if (err == -ESRCH || err == -EPERM)
			err = 0;   /* exited or exiting meanwhile */
		else if (!err)
			(*added)++;
	}
	base_free(tids);
	return err;
}

int pt_tracee_attach(struct pt_tracee *t)
{
	long opts = pt__follow_opts(t);
	struct pt_thread *leader;
	int err, round;

	if (t->attached)
		return 0;
	if ((err = pt_space_refresh_maps(t->as)))
		return err;
	pt_space_flush(t->as);
	/* The thread that first attaches is the tracer (ptrace is per thread). */
	if (!t->tr->tid)
		t->tr->tid = gettid();
	t->attached = 1;
	/* Threads created while we list and seize are caught either by the
	 * clone event of an already seized parent or by the next listing. */
	/* The leader first: permission is per process, so once it is seized
	 * an EPERM for a sibling only means that thread is exiting (the kernel
	 * refuses to attach to an exiting task with EPERM, not ESRCH). */
	if (ptrace(PTRACE_SEIZE, t->pid, 0, opts) < 0) {
		err = -errno;
		/* A child its traced parent forked is ours already (its
		 * options its parent's: not known here). */
		if (err != -EPERM || !traced_by_us(t))
			goto fail;
		opts = -1;
	}
	if ((err = pt__threads_add(t, t->pid, 0)))
		goto fail;
	if ((leader = pt_threads_find(t, t->pid)))
		leader->opts = opts;
	for (round = 0; round < 64; round++) {
		size_t added;

		if ((err = seize_listed(t, &added)))
			goto fail;
		if (!added)
			break;
	}
	if (t->n == 0) {
		err = -ESRCH;
		goto fail;
	}
	pt__execfp_open(t);
	t->mm_fp = pt__execfp_read(t, 0);
	pt_runtimes_detect(t->rts);
	return 0;
fail:
	/* Inside a poll (a fork's child being adopted) the detach cannot wait
	 * for the stops it asks for: the poll under way takes them. */
	if (pt_tracee_detach(t, t->tr->polling ? 0 : 1000000000ull) == -EINPROGRESS)
		return err;   /* detaching: the stops to come end it */
	t->attached = 0;
	return err;
}

void pt_tracee_set_clone_stops(struct pt_tracee *t, int on)
{
	if (t->no_clone_stops == !on)
		return;
	t->no_clone_stops = !on;
	t->unfollowed |= !on;
	if (t->attached && on) {
		t->reopt = 1;
		pt__follow_interrupt_stale(t);
	}
}

int pt_tracee_clone_stops(const struct pt_tracee *t)
{
	return (pt__follow_opts(t) & PTRACE_O_TRACECLONE) != 0;
}

int pt_tracee_adopt(struct pt_tracee *t, pid_t tid, pid_t parent, uint64_t born_ns)
{
	char path[64];
	int err;

	if (!t->attached || t->detaching || pt_threads_find(t, tid))
		return 0;
	/* A thread of t's (a tid told by someone else may be gone, and in
	 * time another's) */
	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)t->pid, (int)tid);
	if (access(path, F_OK))
		return -ESRCH;
	if ((err = pt__follow_seize(t, tid, 1)))
		return err;
	t->st.adopted++;
	/* its parent's stack is not taken: no stop */
	pt__events_emit_clone(t, parent, tid, NULL, 0, born_ns);
	return 0;
}

int pt_tracee_rescan(struct pt_tracee *t)
{
	size_t n0 = t->n, added;
	int err;

	/* (clone stops all along: every thread is known) */
	if (!t->attached || t->detaching || !t->unfollowed)
		return 0;
	/* (over max_threads: those seized so far, the rest untraced) */
	if ((err = seize_listed(t, &added)) && err != -E2BIG)
		return err;
	t->st.rescanned += added;
	/* told as born, their parents unknown (0) */
	for (size_t i = n0; i < t->n; i++)
		pt__events_emit_clone(t, 0, t->th[i]->tid, NULL, 0, 0);
	return (int)added;
}

int pt_tracee_watch(struct pt_tracee *t, int fd, struct pt_watch *w)
{
	return pt_tracer_watch(t->tr, fd, w);
}

void pt_tracee_unwatch(struct pt_tracee *t, struct pt_watch *w)
{
	pt_tracer_unwatch(t->tr, w);
}

int pt_tracee_detach(struct pt_tracee *t, uint64_t timeout_ns)
{
	uint64_t deadline = pt__now_ns() + timeout_ns;

	if (!t->attached)
		return 0;
	if (t->tr->tid != gettid()) {
		/* Called after the tracer thread ended (the sampler's shutdown):
		 * the kernel detached every thread when it exited. */
		for (size_t i = 0; i < t->n; i++)
			t->th[i]->flags |= PT_TH_GONE;
		pt_threads_compact(t);
		t->attached = 0;
		return 0;
	}
	t->detaching = 1;
	t->nlate = 0;   /* late captures nobody is left to take */
	for (size_t i = 0; i < t->n; i++) {
		struct pt_thread *th = t->th[i];

		if (th->flags & (PT_TH_GONE | PT_TH_INTERRUPTING))
			continue;
		if (ptrace(PTRACE_INTERRUPT, th->tid, 0, 0) < 0 && errno == ESRCH) {
			/* Already dead: reap it if it is, else forget it. */
			if (pt__events_poll(t, th) == PT__EV_NONE)
				th->flags |= PT_TH_GONE;
			continue;
		}
		th->flags |= PT_TH_INTERRUPTING;
	}
	for (;;) {
		size_t live = 0;
		uint64_t now;

		pt_tracer_poll(t->tr);
		for (size_t i = 0; i < t->n; i++)
			live += !(t->th[i]->flags & PT_TH_GONE);
		if (!live || !t->attached)
			break;
		now = pt__now_ns();
		if (now >= deadline)
			return -EINPROGRESS;
		pt__stop_wait_wake(t->tr->wake_fd, deadline - now < 5000000 ? deadline - now : 5000000);
	}
	t->attached = 0;
	t->detaching = 0;
	pt_threads_compact(t);
	return 0;
}
