/* CPython as a runtime (ptrace/core/runtime.h): the reader's handle
 * (interp.c) detected in a process, its threads' thread states found
 * before a batch of stops, each stopped thread's frame chain read in its
 * stop and its eval frames replaced by tokens after it (frames.c), the
 * tokens named (names.c). A thread's words: w[0] its thread state, w[1]
 * when to look for it again, w[2..3] its frame-stack window (bulk).
 * Sampler thread only. */
#include "ptrace/runtimes/python/python.h"

#include <errno.h>
#include <stddef.h>

#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/runtimes/python/frames.h"
#include "ptrace/runtimes/python/interp.h"
#include "ptrace/runtimes/python/names.h"
#include "ptrace/runtimes/python/state.h"
#include "ptrace/space/space.h"

/* How long a thread whose thread state was not found waits before the
 * next look (a thread Python has not bound yet, or one that is not
 * Python's). */
#define PY_RETRY_NS 100000000ull

struct py_rt {
	struct pt_rt base;
	struct pt_py *py;
	struct pt_space *as;
};

static struct pt_py *py_of(struct pt_rt *rt)
{
	return ((struct py_rt *)rt)->py;   /* base is its first member */
}

static int py_rt_new(struct pt_rt **out, struct pt_space *as, unsigned int row)
{
	struct py_rt *r = base_calloc(1, sizeof(*r));
	int err;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	if ((err = pt_py_new(&r->py, pt_space_pid(as), pt_space_mem(as)))) {
		base_free(r);
		return err;
	}
	r->py->token_base = pt_rt_token(row, 0);
	r->base.ops = &pt_runtime_python;
	r->as = as;
	*out = &r->base;
	return 0;
}

static void py_rt_free(struct pt_rt *rt)
{
	if (!rt)
		return;
	pt_py_free(py_of(rt));
	base_free(rt);
}

static void py_rt_reset(struct pt_rt *rt)
{
	pt_py_reset(py_of(rt));
}

static int py_rt_detect(struct pt_rt *rt, char *note, size_t len)
{
	struct py_rt *r = (struct py_rt *)rt;

	if (pt_py_state(r->py) == PT_PY_ACTIVE) {
		note[0] = 0;
		return 1;
	}
	return pt_py_detect(r->py, pt_space_maps(r->as), pt_space_modules(r->as), note, len) ==
	       PT_PY_ACTIVE;
}

/* The target runs meanwhile: its list of thread states is walked once for
 * all the threads of the batch whose thread state is not known. */
static void py_rt_prepare(struct pt_rt *rt, struct pt_rt_thread *const *threads, int n)
{
	struct pt_rt_thread *found[64];
	pid_t ns[64];
	uint64_t ts[64], now = pt__now_ns();
	int k = 0;

	for (int i = 0; i < n && k < 64; i++) {
		struct pt_rt_thread *th = threads[i];

		if (th->w[0] || now < th->w[1] || !th->nstid)
			continue;
		ns[k] = th->nstid;
		ts[k] = 0;
		found[k++] = th;
	}
	if (!k)
		return;
	pt_py_find_threads(py_of(rt), ns, ts, (size_t)k);
	for (int j = 0; j < k; j++) {
		found[j]->w[0] = ts[j];
		found[j]->w[1] = ts[j] ? 0 : now + PY_RETRY_NS;
	}
}

/* A Python thread's frame chain changes as soon as it runs: read in the
 * same stop. */
static void py_rt_capture(struct pt_rt *rt, struct pt_rt_thread *th, const struct pt_capture *cap,
			  void *slot)
{
	struct pt_py_cap *pc = slot;

	pc->n = 0;
	if (th->w[0] && pt_py_capture(py_of(rt), th->w[0], th->nstid, &th->w[2], cap, pc) == -ESTALE)
		th->w[0] = th->w[1] = 0;   /* not its thread state any more */
}

static int py_rt_merge(struct pt_rt *rt, const void *slot, struct pt_capture *cap,
		       uint64_t *frames, int n, int max)
{
	const struct pt_py_cap *pc = slot;

	(void)cap;
	(void)max;   /* tokens replace frames one for one */
	return pc->n ? pt_py_merge(py_of(rt), pc, frames, n) : n;
}

static void py_rt_counts(struct pt_rt *rt, uint64_t *merged, uint64_t *torn)
{
	struct pt_py_stats st;

	pt_py_stats(py_of(rt), &st);
	*merged = st.merged;
	*torn = st.torn;
}

static int py_rt_lines(struct pt_rt *rt, uint64_t token, struct pt_rt_line *out, int max)
{
	struct pt_py_line ln[PT_PY_MAX_FRAMES];
	int n = pt_py_lines(py_of(rt), token, ln, max < PT_PY_MAX_FRAMES ? max : PT_PY_MAX_FRAMES);

	for (int i = 0; i < n; i++)
		out[i] = (struct pt_rt_line){ ln[i].func, ln[i].file, ln[i].line, ln[i].start_line, NULL };
	return n;
}

const struct pt_runtime_ops pt_runtime_python = {
	.name = "python",
	.slot_size = sizeof(struct pt_py_cap),
	.reads_in_stop = 1,
	.frames_in_samples = 1,
	.new = py_rt_new,
	.free = py_rt_free,
	.reset = py_rt_reset,
	.detect = py_rt_detect,
	.prepare = py_rt_prepare,
	.capture = py_rt_capture,
	.merge = py_rt_merge,
	.lines = py_rt_lines,
	.counts = py_rt_counts,
};
