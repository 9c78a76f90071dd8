/* CPython frames as a stop finds them (see python.h): the thread states
 * found by tid while the target runs; during a stop, a thread's frame
 * chain read from what the stop copied (its stack, its thread state, the
 * top of its frame stack), a few reads more at most; after it, the native
 * eval frames of the unwound stack replaced by tokens (names.c
 * names them). Owns nothing but what a stop copies into the handle.
 * Sampler thread only. */
#include "ptrace/runtimes/python/frames.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "ptrace/core/internal.h"
#include "ptrace/runtimes/python/state.h"
#include "ptrace/runtimes/python/names.h"
#include "ptrace/space/unwinder.h"

/* ---- thread states ----------------------------------------------------- */

#define MAX_INTERPRETERS 64
#define MAX_THREAD_STATES 65536

int pt_py_find_threads(struct pt_py *py, const pid_t *nstids, uint64_t *tstates, size_t n)
{
	const struct pt_py_layout *L = py->L;
	uint64_t interp, ts;
	int found = 0;

	if (py->state != PT_PY_ACTIVE)
		return -ENOENT;
	if (pt__py_read(py, py->runtime + L->rt_interp_head, &interp, 8))
		return -EFAULT;
	for (int ni = 0; interp && ni < MAX_INTERPRETERS; ni++) {
		if (pt__py_read(py, interp + L->is_threads_head, &ts, 8))
			return found;
		for (int nt = 0; ts && nt < MAX_THREAD_STATES; nt++) {
			uint8_t buf[512];

			if (L->ts_size > sizeof(buf) || pt__py_read(py, ts, buf, L->ts_size))
				break;
			for (size_t i = 0; i < n; i++)
				if (!tstates[i] && nstids[i] && pt__rd64(buf + L->ts_native_tid) == (uint64_t)nstids[i]) {
					tstates[i] = ts;
					found++;
				}
			ts = pt__rd64(buf + L->ts_next);
		}
		if (pt__py_read(py, interp + L->is_next, &interp, 8))
			break;
	}
	return found;
}

/* ---- during the stop --------------------------------------------------- */

/* Room read above the top of the frame stack, for the frames the next
 * samples may have pushed since. */
#define BULK_ROOM 2048u

/* What a stop has copied: the stack, the thread state, the top of the frame
 * stack. Other memory costs a read each, a few at most. */
struct view {
	struct pt_py *py;
	const struct pt_capture *cap;
	uint64_t ts;
	const uint8_t *tsbuf;
	uint64_t bulk_lo, bulk_hi;
	int far;
};

static int in_copy(uint64_t addr, size_t len, uint64_t lo, uint64_t hi)
{
	return addr >= lo && addr < hi && len <= hi - addr;
}

static int fetch(struct view *v, uint64_t addr, void *dst, size_t len)
{
	uint64_t sp = v->cap->regs.rsp;

	if (in_copy(addr, len, sp, sp + v->cap->stack_len))
		memcpy(dst, v->cap->stack + (addr - sp), len);
	else if (in_copy(addr, len, v->ts, v->ts + v->py->L->ts_size))
		memcpy(dst, v->tsbuf + (addr - v->ts), len);
	else if (in_copy(addr, len, v->bulk_lo, v->bulk_hi))
		memcpy(dst, v->py->bulk + (addr - v->bulk_lo), len);
	else if (v->far >= PT_PY_MAX_FAR_READS || (v->far++, v->py->st.far_reads++,
						     pt__py_read(v->py, addr, dst, len)))
		return -EFAULT;
	return 0;
}

/* Reads the thread state into ts and, in the same process_vm_readv, the
 * region of the frame stack the thread's last sample needed, bulk[0..2),
 * into py->bulk. Returns 1 (both), 0 (the thread state only) or -EFAULT. */
static int read_state(struct pt_py *py, uint64_t tstate, uint8_t *ts, const uint64_t *bulk)
{
	size_t tn = py->L->ts_size, bn = bulk && bulk[1] > bulk[0] ? bulk[1] - bulk[0] : 0;
	struct iovec local[2], remote[2];
	ssize_t got;

	if (bn > sizeof(py->bulk))
		bn = 0;
	local[0] = (struct iovec){ ts, tn };
	local[1] = (struct iovec){ py->bulk, bn };
	remote[0] = (struct iovec){ (void *)(uintptr_t)tstate, tn };
	remote[1] = (struct iovec){ (void *)(uintptr_t)(bn ? bulk[0] : 0), bn };
	if (py->read) {
		if (py->read(py->read_arg, tstate, ts, tn))
			return -EFAULT;
		return bn && !py->read(py->read_arg, bulk[0], py->bulk, bn);
	}
	got = process_vm_readv(py->pid, local, bn ? 2 : 1, remote, bn ? 2 : 1, 0);
	if (got < (ssize_t)tn)
		return -EFAULT;
	return bn && got == (ssize_t)(tn + bn);
}

/* Appends the chain from `frame` (innermost first) to out, up to `base`
 * (3.15: the thread's sentinel frame, where every whole chain ends; 0:
 * none, the chain ends with NULL); out->truncated when it did not reach
 * its end. */
static void walk(struct view *v, uint64_t frame, uint64_t base, struct pt_py_cap *out)
{
	const struct pt_py_layout *L = v->py->L;
	uint64_t mask = (L->flags & PT_PY_L_TAGGED) ? ~(uint64_t)3 : ~(uint64_t)0;
	uint8_t fr[128];

	while (frame && frame != base && out->n < PT_PY_MAX_FRAMES) {
		struct pt_py_raw *r;

		if (fetch(v, frame, fr, L->fr_size)) {
			out->truncated = 1;
			return;
		}
		r = &out->f[out->n++];
		/* 3.14 on: f_executable is a _PyStackRef, its low bits a tag
		 * (objects are 8-byte aligned). */
		r->code = pt__rd64(fr + L->fr_code) & mask;
		r->instr = pt__rd64(fr + L->fr_prev_instr);
		r->flags = 0;
		if (L->owner_cstack != 0xff && fr[L->fr_owner] >= L->owner_cstack)
			r->flags = PT_PY_RAW_MARK;
		else if (L->fr_is_entry && fr[L->fr_is_entry])
			r->flags = PT_PY_RAW_ENTRY;
		frame = pt__rd64(fr + L->fr_previous);
	}
	out->truncated = base ? frame != base : frame != 0;
}

static int has_python_frame(const struct pt_py_cap *pc)
{
	for (int i = 0; i < pc->n; i++)
		if (!(pc->f[i].flags & PT_PY_RAW_MARK))
			return 1;
	return 0;
}

int pt_py_capture(struct pt_py *py, uint64_t tstate, pid_t nstid, uint64_t *bulk,
		  const struct pt_capture *cap, struct pt_py_cap *out)
{
	const struct pt_py_layout *L = py->L;
	uint8_t ts[512];
	struct view v = { py, cap, tstate, ts, 0, 0, 0 };
	uint64_t cframe, frame, chunk, top, limit, outer, root, base = 0;
	int have;

	out->n = 0;
	out->truncated = 0;
	if (py->state != PT_PY_ACTIVE || L->ts_size > sizeof(ts) || L->fr_size > 128)
		return -EFAULT;
	if ((have = read_state(py, tstate, ts, bulk)) < 0)
		return -EFAULT;
	if (pt__rd64(ts + L->ts_native_tid) != (uint64_t)nstid) {
		py->st.stale++;
		return -ESTALE;
	}
	py->st.captures++;
	if (!(L->flags & PT_PY_L_CFRAME)) {
		/* 3.13 on: the thread state names the innermost frame itself. */
		frame = pt__rd64(ts + L->ts_current_frame);
		base = L->ts_base_frame ? pt__rd64(ts + L->ts_base_frame) : 0;
		cframe = 0;
		if (!frame)
			return 0;
	} else {
		/* The innermost eval call's _PyCFrame: a local of that call,
		 * so on the stack we copied, or the thread state's own
		 * root_cframe. */
		cframe = pt__rd64(ts + L->ts_cframe);
		if (!cframe || fetch(&v, cframe + L->cf_current_frame, &frame, 8))
			return 0;
	}
	/* Frames live in the thread's frame stack (chunks of contiguous
	 * frames, the innermost at the top), except those of generators and
	 * coroutines. The top of the current chunk holds the usual chain: the
	 * part the last sample needed came with the thread state (read now,
	 * so current); if the innermost frame lies elsewhere, one more read
	 * takes the top of the chunk, with room above it (the chunk's memory
	 * up to its limit) for the next samples. */
	chunk = pt__rd64(ts + L->ts_chunk);
	top = pt__rd64(ts + L->ts_top);
	limit = pt__rd64(ts + L->ts_limit);
	if (have && frame >= bulk[0] && frame < bulk[1] && L->fr_size <= bulk[1] - frame) {
		v.bulk_lo = bulk[0];
		v.bulk_hi = bulk[1];
	} else if (chunk && top > chunk + L->chunk_data && limit >= top &&
		   frame >= chunk + L->chunk_data && frame < top) {
		uint64_t lo = chunk + L->chunk_data, hi = limit - top > BULK_ROOM ? top + BULK_ROOM : limit;

		if (hi - lo > sizeof(py->bulk))
			lo = hi - sizeof(py->bulk);
		if (frame >= lo && !pt__py_read(py, lo, py->bulk, hi - lo)) {
			v.bulk_lo = lo;
			v.bulk_hi = hi;
		}
		if (bulk) {
			bulk[0] = v.bulk_lo;
			bulk[1] = v.bulk_hi;
		}
	}
	walk(&v, frame, base, out);
	/* An eval call being entered or left: tstate->cframe names its
	 * _PyCFrame before its current_frame is set, or after the call's last
	 * frame is gone, so what that points to is stale (seen: a lone marker
	 * frame, whose previous is NULL or leads nowhere). The caller's
	 * _PyCFrame is whole: its chain is read instead, and pt_py_merge
	 * leaves the innermost eval frame native. Not when the caller's is the
	 * root_cframe (no eval call outside this one). */
	if (cframe && !has_python_frame(out) &&
	    !fetch(&v, cframe + L->cf_previous, &outer, 8) && outer &&
	    !fetch(&v, outer + L->cf_previous, &root, 8) && root &&
	    !fetch(&v, outer + L->cf_current_frame, &frame, 8)) {
		out->n = 0;
		walk(&v, frame, 0, out);
		py->st.unlinked++;
	}
	py->st.frames += (uint64_t)out->n;
	return 0;
}

/* ---- after the stop: tokens for eval frames ---------------------------- */

/* A frame that has not run its first instruction (3.11, 3.12: prev_instr
 * is the code unit before its first; never from 3.13, whose instr_ptr
 * starts at the first). */
static int incomplete(const struct pt_py *py, const struct pt_py_raw *r)
{
	return r->instr < r->code + py->L->co_code;
}

int pt_py_merge(struct pt_py *py, const struct pt_py_cap *pc, uint64_t *frames, int n)
{
	struct pt__py_frame gf[PT_PY_MAX_FRAMES];
	struct { uint32_t first, n; } grp[PT_PY_MAX_FRAMES + 1];
	uint32_t ngf = 0, ng = 0, cur = 0;
	uint64_t now = pt__now_ns();
	int g = 0, bad = 0, ne = 0, skip = 0, torn = pc->truncated;

	if (py->state != PT_PY_ACTIVE || pc->n <= 0)
		return n;
	/* Group the chain (innermost first) by eval call: each call's frames
	 * end with its entry frame (3.11: is_entry) or before a marker frame
	 * on the C stack (3.12 on). */
	for (int i = 0; i < pc->n; i++) {
		const struct pt_py_raw *r = &pc->f[i];

		if (!(r->flags & PT_PY_RAW_MARK)) {
			int got = pt__py_resolve(py, r, now, &gf[ngf]);

			if (got > 0)
				ngf++;
			else if (got < 0)
				bad = torn = 1;
		}
		if (r->flags & (PT_PY_RAW_ENTRY | PT_PY_RAW_MARK)) {
			grp[ng++] = (typeof(grp[0])){ cur, bad ? 0 : ngf - cur };
			cur = ngf;
			bad = 0;
		}
	}
	/* A chain cut short: its last frames belong to the next eval call. */
	if (ngf > cur && !bad)
		grp[ng++] = (typeof(grp[0])){ cur, ngf - cur };
	/* Eval frames innermost first, one group each. A group left empty
	 * (no frame started yet, or unreadable) keeps its native frame. A
	 * whole chain with fewer groups than the stack has eval frames: the
	 * innermost calls are not linked yet (or any more), so the groups go
	 * to the outermost ones. */
	for (int k = 0; k < n; k++)
		ne += pt__py_is_eval(py, frames[k]);
	/* An eval call being entered (3.11): tstate->cframe names the new
	 * call's _PyCFrame before its frame is flagged is_entry, and the stale
	 * current_frame there is the new frame, initialised but not run (its
	 * previous still the caller's): its one frame is the innermost eval
	 * call's, the rest the callers'. Seen under load: a sample with
	 * square() above map's and sum's C frames instead of below them. */
	if (!pc->truncated && (int)ng < ne && ng > 0 && grp[0].first == 0 && grp[0].n > 1 &&
	    !(pc->f[0].flags & PT_PY_RAW_MARK) && incomplete(py, &pc->f[0])) {
		memmove(grp + 1, grp, ng * sizeof(grp[0]));
		grp[0].n = 1;
		grp[1].first = 1;
		grp[1].n--;
		ng++;
	}
	if (!pc->truncated && (int)ng < ne)
		skip = ne - (int)ng;
	for (int k = 0; k < n && g < (int)ng; k++) {
		uint64_t tok;

		if (!pt__py_is_eval(py, frames[k]))
			continue;
		if (skip > 0) {
			skip--;
			continue;
		}
		if (grp[g].n) {
			tok = pt__py_token(py, gf + grp[g].first, grp[g].n);
			if (tok)
				frames[k] = tok;
			else
				py->st.full++;
		}
		g++;
	}
	/* What the answers say of the frames they lack (python.c). */
	py->st.merged++;
	py->st.torn += (uint64_t)torn;
	return n;
}
