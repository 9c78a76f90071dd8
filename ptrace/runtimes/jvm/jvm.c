/* HotSpot as a runtime (ptrace/core/runtime.h; see jvm.h): detected by
 * libjvm.so's VMStructs, which it reads once (vmstructs.c); the code
 * cache's range handed to the unwinder, which stops there; each sample
 * that reached it walked through its Java frames (walk.c) and on through
 * the native frames above them (the unwinder again, from the call stub's
 * caller), after the thread resumed; tokens named (methods.c).
 * Sampler thread only. */
#include "ptrace/runtimes/jvm/jvm.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/proc/proc.h"
#include "ptrace/runtimes/jvm/codecache.h"
#include "ptrace/runtimes/jvm/methods.h"
#include "ptrace/runtimes/jvm/scopes.h"
#include "ptrace/runtimes/jvm/state.h"
#include "ptrace/runtimes/jvm/threads.h"
#include "ptrace/runtimes/jvm/vmstructs.h"
#include "ptrace/runtimes/jvm/walk.h"
#include "ptrace/space/module.h"
#include "ptrace/space/space.h"
#include "ptrace/space/unwinder.h"

/* A code cache not set up yet (a JVM starting) is looked for again at
 * most this often. */
#define CACHE_RETRY_NS 200000000ull
/* Native and Java parts of one stack at most (C++ calling Java calling
 * C++...): a lying stack cannot make the walk bounce for ever. */
#define MAX_CROSSINGS 16

struct jvm_rt {
	struct pt_rt base;
	struct pt_jvm j;
};

static struct pt_jvm *jvm_of(struct pt_rt *rt)
{
	return &((struct jvm_rt *)rt)->j;   /* base is its first member */
}

static int jvm_rt_new(struct pt_rt **out, struct pt_space *as, unsigned int row)
{
	struct jvm_rt *r = base_calloc(1, sizeof(*r));

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->base.ops = &pt_runtime_jvm;
	r->j.as = as;
	r->j.mem = pt_space_mem(as);
	r->j.row = row;
	*out = &r->base;
	return 0;
}

static void jvm_rt_reset(struct pt_rt *rt)
{
	struct pt_jvm *j = jvm_of(rt);

	pt__jvm_names_reset(j);
	pt__jvm_scopes_reset(j);
	pt__jvm_threads_reset(j);
	pt_unwinder_set_jit(pt_space_unwinder(j->as), 0, 0);
	j->state = PT__JVM_NONE;
	j->nheaps = 0;
	j->heaps_ns = 0;
	j->cc_lo = j->cc_hi = j->interp_lo = j->interp_hi = j->call_stub_ret = 0;
	memset(&j->st, 0, sizeof(j->st));
}

static void jvm_rt_free(struct pt_rt *rt)
{
	if (!rt)
		return;
	pt__jvm_names_reset(jvm_of(rt));
	pt__jvm_scopes_reset(jvm_of(rt));
	pt__jvm_threads_reset(jvm_of(rt));
	base_free(rt);
}

/* The code cache, read (again) if not known yet; its range given to the
 * unwinder once it is. Returns 1 if known. */
static int cache_ready(struct pt_jvm *j)
{
	if (j->nheaps)
		return 1;
	if (j->heaps_ns && pt__now_ns() - j->heaps_ns < CACHE_RETRY_NS)
		return 0;
	if (pt__jvm_cache_read(j)) {
		j->nheaps = 0;
		return 0;
	}
	pt_unwinder_set_jit(pt_space_unwinder(j->as), j->cc_lo, j->cc_hi);
	return 1;
}

int pt_jvm_load(struct pt_rt *rt, const uint64_t *sym, char *why, size_t len)
{
	struct pt_jvm *j = jvm_of(rt);
	uint64_t t0 = pt__now_ns();
	int err = pt__jvm_tables_read(j, sym, why, len);

	j->st.tables_ns = pt__now_ns() - t0;
	if (err) {
		/* a JVM starting is looked at again at the next attach */
		j->state = err == -EAGAIN ? PT__JVM_NONE : PT__JVM_UNSUPPORTED;
		return err;
	}
	cache_ready(j);
	j->state = PT__JVM_ACTIVE;
	return 0;
}

void pt_jvm_stats(struct pt_rt *rt, struct pt_jvm_stats *out)
{
	*out = jvm_of(rt)->st;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

static int jvm_rt_detect(struct pt_rt *rt, char *note, size_t len)
{
	struct pt_jvm *j = jvm_of(rt);
	const struct pt_maps *maps = pt_space_maps(j->as);
	uint64_t sym[PT__JVM_NSYMS], sz[PT__JVM_NSYMS], rel = 0;
	char why[256], release[64] = "";
	int err;

	note[0] = 0;
	if (j->state == PT__JVM_ACTIVE)
		return 1;
	for (size_t i = 0; maps && i < maps->n; i++) {
		const struct pt_map *m = &maps->v[i];
		struct pt_module *mod;

		if (!(m->flags & PT_MAP_X) || strcmp(base_name(m->path), "libjvm.so"))
			continue;
		if (!(mod = pt_modules_find(pt_space_modules(j->as), maps, m->start)) ||
		    pt_module_lookup(pt_space_modules(j->as), mod, pt__jvm_sym_names, sym, sz, PT__JVM_NSYMS) <= 0 ||
		    !sym[0]) {
			snprintf(note, len, "jvm: %s exports no VMStructs (not HotSpot's): its Java frames stay "
				 "native", m->path);
			j->state = PT__JVM_UNSUPPORTED;
			return 0;
		}
		if ((err = pt_jvm_load(rt, sym, why, sizeof(why)))) {
			snprintf(note, len, "jvm: %s: %s: its Java frames stay native", m->path, why);
			return 0;
		}
		if (j->f[JF_S_RELEASE].found && !pt__jvm_word(j, j->f[JF_S_RELEASE].v, &rel) && rel &&
		    pt__jvm_cstr(j, rel, release, sizeof(release)) < 0)
			release[0] = 0;
		snprintf(note, len, "jvm: %s is HotSpot %s (VMStructs read in %.1f ms): its compiled, "
			 "interpreted and stub frames show the Java methods they run", m->path,
			 release[0] ? release : "(release unknown)", (double)j->st.tables_ns / 1e6);
		return 1;
	}
	j->state = PT__JVM_NONE;
	return 0;
}

/* From at, a native frame above Java ones: the native unwinder over cap
 * from there, into frames[*n..max) (its first, a return address, less
 * one). Returns 1 if it reached Java code again (*at its frame, *n where
 * its tokens go), else 0. *used: how far up cap's stack it read. */
static int native_part(struct pt_jvm *j, struct pt_capture *cap, struct pt__jvm_at *at, uint64_t *frames,
		       int *n, int max, size_t *used, int *short_copy)
{
	struct pt_capture part = *cap;
	uint64_t off = at->sp - cap->regs.rsp;
	int complete, k;

	if (at->sp < cap->regs.rsp || *n >= max)
		return 0;
	part.regs.rip = at->pc;
	part.regs.rsp = at->sp;
	part.regs.rbp = at->fp;
	if (off <= cap->stack_len) {
		part.stack = cap->stack + off;
		part.stack_len = cap->stack_len - off;
	} else {
		part.stack_len = 0;
	}
	part.stack_limit = cap->stack_limit > off ? cap->stack_limit - off : 0;
	k = pt_unwind(pt_space_unwinder(j->as), &part, frames + *n, max - *n, &complete);
	frames[*n] = at->pc - 1;   /* a return address: the call is the instruction before */
	if (off + part.stack_used > *used)
		*used = (size_t)(off + part.stack_used);
	*short_copy |= part.stack_short;
	if (part.jit_at < 0 || part.jit_at >= k) {
		*n += k;
		return 0;
	}
	*n += part.jit_at;
	*at = (struct pt__jvm_at){ part.jit_pc, part.jit_sp, part.jit_bp, part.jit_exact, NULL };
	return 1;
}

/* The native frames from the JIT frame the unwinder stopped at on are
 * replaced by the Java frames and the native ones above them. */
static int jvm_rt_merge(struct pt_rt *rt, const void *slot, struct pt_capture *cap, uint64_t *frames, int n,
			int max)
{
	struct pt_jvm *j = jvm_of(rt);
	uint64_t miss = 0;
	unsigned int m_curg = 0;
	struct pt__walk w;
	struct pt__jvm_at at;
	size_t used = 0;
	int k, short_copy = 0;

	(void)slot;
	if (!cap || !cache_ready(j) || cap->jit_at < 0 || cap->jit_at >= n)
		return n;
	j->st.walks++;
	w = (struct pt__walk){ .mem = j->mem, .mods = pt_space_modules(j->as), .maps = pt_space_maps(j->as),
			       .miss = &miss, .m_curg = &m_curg, .cap = cap, .regs = cap->regs };
	at = (struct pt__jvm_at){ cap->jit_pc, cap->jit_sp, cap->jit_bp, cap->jit_exact,
				  cap->jit_at == 0 ? &cap->regs : NULL };
	k = cap->jit_at;
	for (int crossing = 0; crossing < MAX_CROSSINGS; crossing++)
		if (pt__jvm_walk(j, &w, &at, frames, &k, max) != PT__JVM_NATIVE ||
		    !native_part(j, cap, &at, frames, &k, max, &used, &short_copy))
			break;
	/* Not even the first frame in the code cache could be read: the
	 * native unwind's frames stand, its last the JIT code's address. */
	if (k == cap->jit_at)
		k = n;
	/* What the walk read of the stack sizes the thread's next copy. */
	if (w.used > used)
		used = w.used;
	if (used > cap->stack_used)
		cap->stack_used = used;
	cap->stack_short |= w.short_copy | short_copy;
	return k;
}

static int jvm_rt_lines(struct pt_rt *rt, uint64_t token, struct pt_rt_line *out, int max)
{
	if (max < 1)
		return 0;
	return pt__jvm_line(jvm_of(rt), token & PT_RT_TOKEN_ID_MASK, out);
}

static int jvm_rt_thread_name(struct pt_rt *rt, pid_t nstid, char *buf, size_t len)
{
	return pt__jvm_thread_name(jvm_of(rt), nstid, buf, len);
}

/* Nothing is read in a stop: the Java frames are walked over the stack
 * copy, and what they point to (code blobs, methods) outlives the sample
 * but for code the JVM frees meanwhile (checked, then left out). So the
 * kernel's copies (perf_event) serve as well. */
const struct pt_runtime_ops pt_runtime_jvm = {
	.name = "jvm",
	.reads_in_stop = 0,
	.new = jvm_rt_new,
	.free = jvm_rt_free,
	.reset = jvm_rt_reset,
	.detect = jvm_rt_detect,
	.merge = jvm_rt_merge,
	.lines = jvm_rt_lines,
	.thread_name = jvm_rt_thread_name,
};
