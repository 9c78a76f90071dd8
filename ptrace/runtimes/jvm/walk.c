/* The Java frames of a stack (see walk.h), on x86-64, as HotSpot's own
 * frame::sender steps them (frame_x86.cpp, of 17, 21 and 25):
 *   - a compiled frame (an nmethod, a runtime stub) is frame_size words
 *     from its SP to its caller's, which has the return address and the
 *     saved BP right below it; C2's code uses BP as any register, so
 *     nothing else can step it;
 *   - an interpreted frame is BP-linked: its caller's BP at BP, the return
 *     address above it, the caller's SP (as it was before an adapter
 *     extended it) at BP - 1 word, its Method* at BP - 3 words and its
 *     bcp at BP - 8 words (r13 in the leaf), slots not exported but the
 *     same in every release since 9;
 *   - stubs and adapters keep no frame size: a leaf's return address is
 *     at its SP, or it made a BP frame; a caller's made a BP frame;
 *   - the call stub (C++ calling Java) is a BP frame whose caller is
 *     native.
 * The leaf of a compiled frame may be in its prologue (before its frame
 * is complete: the return address at SP, or above the pushed BP) or its
 * epilogue (the frame gone, at the return, or in the safepoint poll just
 * before it). Every step must go up the stack. Sampler thread only. */
#include "ptrace/runtimes/jvm/walk.h"

#include <errno.h>
#include <string.h>

#include "ptrace/core/runtime.h"
#include "ptrace/runtimes/jvm/codecache.h"
#include "ptrace/runtimes/jvm/methods.h"
#include "ptrace/runtimes/jvm/scopes.h"
#include "ptrace/runtimes/jvm/state.h"

#define MAX_STEPS 1024              /* frames of one walk, Java and stubs */
#define MAX_STACK (1ull << 30)      /* a walk's SP never moves further than this */
#define MAX_INLINED 32
#define INTERP_METHOD (-3)          /* interpreter frame slots, words from BP */
#define INTERP_BCP (-8)
#define NEAR_FRAME (1u << 16)       /* a leaf stub's own BP frame lies this close */

static int word(struct pt__walk *w, uint64_t addr, uint64_t *v)
{
	return pt__stackmem_word(w, addr, v);
}

/* Whether a is code a return address may point to. */
static int is_code(struct pt_jvm *j, struct pt__walk *w, uint64_t a)
{
	return a && (pt__jvm_in_cache(j, a) || pt__stackmem_is_code(w, a));
}

static void emit(struct pt_jvm *j, uint64_t *frames, int *n, int max, long id)
{
	if (id >= 0 && *n < max)
		frames[(*n)++] = pt_rt_token(j->row, (uint64_t)id);
}

/* Goes to the caller of a BP frame at at->fp. */
static int bp_frame(struct pt__walk *w, struct pt__jvm_at *at)
{
	uint64_t fp = at->fp, ret, up;

	if (fp < at->sp || fp - at->sp > MAX_STACK || word(w, fp + 8, &ret) || word(w, fp, &up))
		return -EFAULT;
	*at = (struct pt__jvm_at){ ret, fp + 16, up, 0, NULL };
	return 0;
}

/* The leaf is in a compiled frame's epilogue (its frame popped, or BP
 * about to be): 1 with *at stepped, else 0. The patterns: `ret`; C2's and
 * C1's return poll `cmp rsp, [r15 + d32]; ja L; ret` (at the cmp or the
 * ja); `pop rbp` followed by either. */
static int epilogue(struct pt_jvm *j, struct pt__walk *w, struct pt__jvm_at *at)
{
	static const uint8_t cmp[] = { 0x49, 0x3b, 0xa7 };
	uint8_t c[16];
	uint64_t ret, up;
	int pop;

	if (pt__jvm_read(j, at->pc, c, sizeof(c)))
		return 0;
	pop = c[0] == 0x5d;
	if (!((c[pop] == 0xc3) || (!memcmp(c + pop, cmp, 3) && c[pop + 7] == 0x0f && c[pop + 8] == 0x87 &&
				   c[pop + 13] == 0xc3) ||
	      (!pop && c[0] == 0x0f && c[1] == 0x87 && c[6] == 0xc3)))
		return 0;
	if (pop && (word(w, at->sp, &up) || word(w, at->sp + 8, &ret)))
		return 0;
	if (!pop && word(w, at->sp, &ret))
		return 0;
	if (!is_code(j, w, ret))
		return 0;
	*at = (struct pt__jvm_at){ ret, at->sp + (pop ? 16 : 8), pop ? up : at->fp, 0, NULL };
	return 1;
}

/* Goes to the caller of a frame of b (a compiled one, or a stub's of a
 * frame size) at *at. */
static int sized_frame(struct pt_jvm *j, struct pt__walk *w, const struct pt__jvm_blob *b, struct pt__jvm_at *at)
{
	uint64_t up_sp, ret, up, r0, r1;

	if (at->exact && b->fco >= 0 && at->pc < b->code_begin + (uint64_t)b->fco) {
		/* Its prologue: before BP is pushed, the return address is at
		 * SP; after it, above it. */
		if (!word(w, at->sp, &r0) && is_code(j, w, r0)) {
			*at = (struct pt__jvm_at){ r0, at->sp + 8, at->fp, 0, NULL };
			return 0;
		}
		if (!word(w, at->sp + 8, &r1) && is_code(j, w, r1)) {
			*at = (struct pt__jvm_at){ r1, at->sp + 16, at->fp, 0, NULL };
			return 0;
		}
		return -EFAULT;
	}
	if (at->exact && epilogue(j, w, at))
		return 0;
	if (b->frame_size <= 0)
		return -EFAULT;
	up_sp = at->sp + (uint64_t)b->frame_size * 8;
	if (word(w, up_sp - 8, &ret) || word(w, up_sp - 16, &up) || !is_code(j, w, ret))
		return -EFAULT;
	*at = (struct pt__jvm_at){ ret, up_sp, up, 0, NULL };
	return 0;
}

static int interpreted(struct pt_jvm *j, struct pt__walk *w, struct pt__jvm_at *at, uint64_t *frames, int *n,
		       int max)
{
	uint64_t fp = at->fp, method, bcp, up_sp, ret, up;
	long m;

	if (fp < at->sp || fp - at->sp > MAX_STACK || word(w, fp + INTERP_METHOD * 8, &method) ||
	    (m = pt__jvm_method(j, method)) < 0) {
		/* A leaf on its way in (the frame not made yet): the method
		 * entry has its Method* in rbx. Named, and no further. */
		if (at->regs && (m = pt__jvm_method(j, at->regs->rbx)) >= 0)
			emit(j, frames, n, max, pt__jvm_frame(j, m, -1));
		return -EFAULT;
	}
	if (at->regs)
		bcp = at->regs->r13;
	else if (word(w, fp + INTERP_BCP * 8, &bcp))
		bcp = 0;
	emit(j, frames, n, max, pt__jvm_frame(j, m, pt__jvm_bci(j, m, bcp)));
	j->st.java_frames++;
	if (word(w, fp + (uint64_t)(j->c[JC_SENDER_SP] * 8), &up_sp) || word(w, fp + 8, &ret) ||
	    word(w, fp, &up) || up_sp < fp + 16)
		return -EFAULT;
	*at = (struct pt__jvm_at){ ret, up_sp, up, 0, NULL };
	return 0;
}

static int compiled(struct pt_jvm *j, struct pt__walk *w, const struct pt__jvm_blob *b, struct pt__jvm_at *at,
		    uint64_t *frames, int *n, int max)
{
	uint64_t ids[MAX_INLINED];
	int k = pt__jvm_scopes(j, b, at->pc, ids, MAX_INLINED);

	for (int i = 0; i < k; i++)
		emit(j, frames, n, max, (long)ids[i]);
	j->st.java_frames += (uint64_t)k;
	return sized_frame(j, w, b, at);
}

static int stub(struct pt_jvm *j, struct pt__walk *w, const struct pt__jvm_blob *b, struct pt__jvm_at *at,
		uint64_t *frames, int *n, int max)
{
	uint64_t ret;

	emit(j, frames, n, max, pt__jvm_stub(j, b->name));
	j->st.stub_frames++;
	if (b->frame_size > 0)
		return sized_frame(j, w, b, at);
	/* A leaf that made no frame has its return address at SP (adapters,
	 * vtable stubs); else, as a caller, it made a BP frame. */
	if (at->exact && !word(w, at->sp, &ret) && is_code(j, w, ret)) {
		*at = (struct pt__jvm_at){ ret, at->sp + 8, at->fp, 0, NULL };
		return 0;
	}
	if (at->exact && (at->fp < at->sp || at->fp - at->sp > NEAR_FRAME))
		return -EFAULT;
	return bp_frame(w, at);
}

enum pt__jvm_end pt__jvm_walk(struct pt_jvm *j, struct pt__walk *w, struct pt__jvm_at *at, uint64_t *frames,
			      int *n, int max)
{
	uint64_t first_sp = at->sp;

	for (int step = 0; step < MAX_STEPS && *n < max; step++) {
		struct pt__jvm_blob b;
		uint64_t sp = at->sp;
		int err;

		if (!pt__jvm_in_cache(j, at->pc))
			return is_code(j, w, at->pc) ? PT__JVM_NATIVE : PT__JVM_END;
		if (!at->exact && at->pc == j->call_stub_ret) {
			/* C++ called Java here: the caller is native. */
			err = bp_frame(w, at);
		} else if ((err = pt__jvm_blob_find(j, at->exact ? at->pc : at->pc - 1, &b)) == 0) {
			switch (b.kind) {
			case PT__JVM_INTERP:
				err = interpreted(j, w, at, frames, n, max);
				break;
			case PT__JVM_NMETHOD:
				err = compiled(j, w, &b, at, frames, n, max);
				break;
			default:
				err = stub(j, w, &b, at, frames, n, max);
				break;
			}
		}
		if (err || at->sp <= sp || at->sp - first_sp > MAX_STACK) {
			j->st.lost++;
			return PT__JVM_END;
		}
	}
	return PT__JVM_END;
}
