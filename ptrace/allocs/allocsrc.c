/* Finding and reading a target's allocation records (see allocsrc.h). */
#include "ptrace/allocs/allocsrc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/area.h"
#include "ptrace/allocs/agentrec.h"
#include "ptrace/runtimes/go/go.h"
#include "ptrace/runtimes/go/gomem.h"
#include "ptrace/runtimes/go/gort.h"
#include "ptrace/runtimes/runtimes.h"
#include "ptrace/space/gopclntab.h"
#include "ptrace/proc/proc.h"
#include "ptrace/core/stacks.h"
#include "ptrace/space/space.h"
#include "ptrace/mechanism/tracee.h"

static int read_target(void *arg, uint64_t addr, void *buf, size_t len)
{
	return pt_space_read(pt_tracee_space(arg), addr, buf, len);
}

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);

	return n >= k && !strcmp(s + n - k, tail) && (n == k || s[n - k - 1] == '/');
}

/* The first mapping whose path is the agent's library, or NULL. */
static const struct pt_map *agent_map(const struct pt_maps *m)
{
	for (size_t i = 0; m && i < m->n; i++)
		if (ends_with(m->v[i].path, PT_AGENTREC_LIBRARY))
			return &m->v[i];
	return NULL;
}

/* The first mapping of the executable (as /proc/<pid>/exe names it), or NULL. */
static const struct pt_map *exe_map(pid_t pid, const struct pt_maps *m)
{
	char link[64], path[4096];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	if ((n = readlink(link, path, sizeof(path) - 1)) <= 0)
		return NULL;
	path[n] = 0;
	if (n > 10 && !strcmp(path + n - 10, " (deleted)"))
		path[n - 10] = 0;
	for (size_t i = 0; m && i < m->n; i++)
		if (!strcmp(m->v[i].path, path))
			return &m->v[i];
	return NULL;
}

static int from_agent(struct pt_tracee *t, const struct pt_map *lib, struct pt_allocs *out,
		      const char **why)
{
	const char *name = PPA_HEADER_SYMBOL;
	uint64_t addr = 0, size = 0;
	int n = pt_space_lookup(pt_tracee_space(t), lib->start, &name, &addr, &size, 1);

	if (n < 0)
		return n;
	if (!n || !addr) {
		*why = "a library named libpodprof-alloc.so is loaded but holds no podprof record "
		       "header (another build?)";
		return -ENOENT;
	}
	return pt_agentrec_read(read_target, t, addr, out, why);
}

/* The functions Go's traceback gives at pc, innermost first; returns how
 * many (0: not Go code). */
static int go_frames(struct pt_tracee *t, uint64_t pc, struct pt_goline *gl)
{
	return pt_space_go_lines(pt_tracee_space(t), pc, gl, PT_GOTAB_MAX_INLINE + 1);
}

/* 1 if the function Go's runtime.FuncForPC names at pc (the innermost
 * one inlined there) is the runtime's: Go's heap profile tests the same. */
static int runtime_only(struct pt_tracee *t, uint64_t pc)
{
	struct pt_goline gl[PT_GOTAB_MAX_INLINE + 1];

	return go_frames(t, pc, gl) > 0 && !strncmp(gl[0].name, "runtime.", 8);
}

/* How many frames at s's leaf end are the runtime's alone (mallocgc,
 * newobject...): 0 when every frame is (Go then keeps them all). */
static uint32_t leaf_runtime_frames(struct pt_tracee *t, const struct pt_allocs *a,
				    const struct pt_alloc_stack *s)
{
	uint32_t k = 0;

	while (k < s->n && runtime_only(t, a->frames[s->first + k]))
		k++;
	return k < s->n ? k : 0;
}

/* Go's records hold a PC per function of an inlined call: the call site,
 * then a mark in each function it was inlined into. podprof names every
 * function inlined at a PC from that PC alone, so the marks after it that
 * stand for those functions are dropped (runtime/pprof folds them into one
 * location the same way), and so is runtime.goexit at the root, which Go's
 * profiles leave out. As Go's heap profile (writeHeapProto), the runtime's
 * frames at the leaf end are left out too, up to the function that
 * allocated (all of them kept if nothing else is left). Frames move down
 * in place. */
static void go_fold(struct pt_tracee *t, struct pt_allocs *a)
{
	struct pt_goline gl[PT_GOTAB_MAX_INLINE + 1], next[PT_GOTAB_MAX_INLINE + 1];
	size_t w = 0;

	for (size_t i = 0; i < a->nstacks; i++) {
		struct pt_alloc_stack *s = &a->stacks[i];
		size_t first = w;
		uint32_t from = leaf_runtime_frames(t, a, s);

		for (uint32_t k = from; k < s->n; k++) {
			uint64_t pc = a->frames[s->first + k];
			int nf = go_frames(t, pc, gl);

			if (nf > 0 && k + 1 == s->n && !strcmp(gl[nf - 1].name, "runtime.goexit"))
				break;
			a->frames[w++] = pc;
			/* Skip the marks of the outer functions, each checked. */
			for (int j = 1; j < nf && k + 1 < s->n; j++) {
				int m = go_frames(t, a->frames[s->first + k + 1], next);

				if (m <= 0 || strcmp(next[0].name, gl[j].name))
					break;
				k++;
			}
		}
		s->first = (uint32_t)first;
		s->n = (uint32_t)(w - first);
	}
	a->nframes = w;
}

static int from_go(struct pt_tracee *t, struct pt_allocs *out, const char **why)
{
	struct pt_runtimes *rts = pt_tracee_runtimes(t);
	struct pt_rt *rt;
	struct pt_gomem_syms syms;
	int err;

	/* A target read without being attached (the memory views) has not
	 * had its runtimes looked for: they are now (once found, kept). */
	pt_runtimes_detect(rts);
	if (!(rt = pt_runtimes_found(rts, "go"))) {
		*why = "a Go program whose runtime could not be looked for (no memory)";
		return -ENOENT;
	}
	if ((err = pt_go_heap_syms(pt_go_of(rt), &syms, why)))
		return err;
	if (!(err = pt_gomem_read(read_target, t, &syms, out, why)))
		go_fold(t, out);
	return err;
}

int pt_allocsrc_read(struct pt_tracee *t, struct pt_allocs out[PT_ALLOCSRC_MAX], int *n,
		     const char **why)
{
	const char *why_agent = NULL, *why_go = NULL;
	const struct pt_maps *m;
	const struct pt_map *lib, *exe;
	int err, err_agent = -ENOENT, err_go = -ENOENT;

	memset(out, 0, PT_ALLOCSRC_MAX * sizeof(*out));
	*n = 0;
	*why = NULL;
	if ((err = pt_space_refresh_maps(pt_tracee_space(t))))
		return err;
	m = pt_space_maps(pt_tracee_space(t));
	exe = exe_map(pt_tracee_pid(t), m);
	lib = agent_map(m);
	/* A Go program keeps its own records (with the agent: a cgo program,
	 * whose C allocations are the agent's). Other executables' symbols are
	 * not searched for the runtime's (a file read at every request). */
	if (exe && pt_space_is_go(pt_tracee_space(t), exe->start)) {
		if (!(err_go = from_go(t, &out[*n], &why_go)))
			++*n;
		else if (err_go == -ENOMEM || err_go == -ESRCH)
			return err_go;
	}
	if (lib) {
		if (!(err_agent = from_agent(t, lib, &out[*n], &why_agent)))
			++*n;
		else if (err_agent == -ENOMEM || err_agent == -ESRCH)
			return err_agent;
	}
	if (*n) {
		*why = lib && err_agent ? why_agent : NULL;
		return 0;
	}
	if (lib) {
		*why = why_agent;
		return err_agent;
	}
	if (why_go) {
		*why = why_go;
		return err_go;
	}
	*why = "no allocation agent in the process, and not a Go program";
	return -ENOENT;
}

static int64_t bounded(uint64_t v)
{
	return v < (uint64_t)PT_ALLOCS_MAX_VALUE ? (int64_t)v : PT_ALLOCS_MAX_VALUE;
}

/* Go's four values of a record, estimated: the agent's are already;
 * Go's buckets are scaled each on its own (scaleHeapSample), in use from
 * allocations less frees, as runtime/pprof does. */
static void estimate(const struct pt_allocs *a, const struct pt_alloc_stack *s, int64_t *v)
{
	int64_t ao = bounded(s->alloc_objects), ab = bounded(s->alloc_bytes);
	int64_t io = ao - bounded(s->free_objects), ib = ab - bounded(s->free_bytes);

	if (io < 0)
		io = 0;
	if (ib < 0)
		ib = 0;
	if (!a->scaled) {
		pt_allocs_scale(ao, ab, a->rate, &ao, &ab);
		pt_allocs_scale(io, ib, a->rate, &io, &ib);
	}
	v[0] = ao;
	v[1] = ab;
	v[2] = io;
	v[3] = ib;
}

int pt_allocsrc_stacks(const struct pt_allocs *a, struct pt_stacks **st, size_t max)
{
	int err;

	if (!*st && (err = pt_stacks_new(st, max)))
		return err;
	for (size_t i = 0; i < a->nstacks; i++) {
		const struct pt_alloc_stack *s = &a->stacks[i];
		/* Go's buckets are per stack and size, and unsampled each on its own
		 * (the sizes kept apart by the sample's tid, which no label shows). */
		struct pt_sample smp = { .comm = "", .state = '?', .syscall = -1,
					 .tid = s->size > INT32_MAX ? INT32_MAX : (pid_t)s->size,
					 .frames = a->frames + s->first, .n = (int)s->n };
		int64_t v[PT_MAX_VALUES] = { 0 };

		estimate(a, s, v);
		if ((err = pt_stacks_add(*st, &smp, v)) == -ENOMEM)
			return err;
	}
	return 0;
}
