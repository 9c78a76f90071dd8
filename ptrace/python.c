/* CPython frames read from outside the interpreter (see python.h): layouts
 * per release, the location-table decoder, the reads made during a stop,
 * and the caches (code objects by address, interned strings, tokens) used
 * after it. Sampler thread only. */
#include "ptrace/python.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "base/array.h"
#include "base/map.h"
#include "base/mem.h"
#include "ptrace/mem.h"
#include "ptrace/module.h"
#include "ptrace/proc.h"
#include "ptrace/ptrace_internal.h"
#include "ptrace/unwind.h"

/* The releases we know. Their offsets are checked against each release's
 * own headers by a unit test (tests/unit/test_python.c, through a program
 * built with them: tests/unit/py/py_offsets.c; Debian's python3.11-dev,
 * and pyenv's 3.12.1 where installed), and against live interpreters by the
 * integration tests (Debian's python3.11, pyenv's 3.11.7 and 3.12.1). */
static const struct pt_py_layout layouts[] = {
	{
		.version = 0x030b, .name = "3.11", .tested = 1,
		.rt_interp_head = 40,
		.is_next = 0, .is_threads_head = 16,
		/* ts_size: the whole PyThreadState (root_cframe, where cframe
		 * points outside any eval call, is its last field). */
		.ts_next = 8, .ts_native_tid = 160, .ts_cframe = 56, .ts_chunk = 296, .ts_top = 304,
		.ts_limit = 312, .ts_size = 360,
		.cf_current_frame = 8, .cf_previous = 16,
		.fr_code = 32, .fr_previous = 48, .fr_prev_instr = 56, .fr_is_entry = 68, .fr_owner = 69,
		.fr_size = 72, .owner_cstack = 0xff,
		.co_firstlineno = 72, .co_filename = 112, .co_name = 120, .co_qualname = 128,
		.co_linetable = 136, .co_code = 184,
		.str_length = 16, .str_state = 32, .str_ascii_data = 48, .str_compact_data = 72,
		.bytes_size = 16, .bytes_data = 32,
		.chunk_data = 24,
	},
	{
		.version = 0x030c, .name = "3.12", .tested = 1,
		.rt_interp_head = 40,
		.is_next = 0, .is_threads_head = 72,
		.ts_next = 8, .ts_native_tid = 144, .ts_cframe = 56, .ts_chunk = 232, .ts_top = 240,
		.ts_limit = 248, .ts_size = 288,
		.cf_current_frame = 0, .cf_previous = 8,
		.fr_code = 0, .fr_previous = 8, .fr_prev_instr = 56, .fr_is_entry = 0, .fr_owner = 70,
		.fr_size = 72, .owner_cstack = 3,
		.co_firstlineno = 68, .co_filename = 112, .co_name = 120, .co_qualname = 128,
		.co_linetable = 136, .co_code = 192,
		.str_length = 16, .str_state = 32, .str_ascii_data = 40, .str_compact_data = 56,
		.bytes_size = 16, .bytes_data = 32,
		.chunk_data = 24,
	},
};

const struct pt_py_layout *pt_py_layout_find(uint32_t version)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].version == (version >> 16))
			return &layouts[i];
	return NULL;
}

/* ---- the location table (Objects/locations.md of CPython 3.11) ---------- */

/* An unsigned varint: 6-bit groups, least significant first, bit 6 set on
 * every group but the last. */
static int varint(const uint8_t *t, size_t len, size_t *i, uint32_t *out)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		if (*i >= len || shift > 30)
			return -EBADMSG;
		b = t[(*i)++];
		v |= (uint64_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	if (v > INT32_MAX)
		return -EBADMSG;
	*out = (uint32_t)v;
	return 0;
}

/* A signed varint: the sign in the lowest bit. */
static int svarint(const uint8_t *t, size_t len, size_t *i, int64_t *out)
{
	uint32_t u;

	if (varint(t, len, i, &u))
		return -EBADMSG;
	*out = (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
	return 0;
}

int pt_py_addr2line(const uint8_t *tab, size_t len, int firstlineno, int64_t lasti)
{
	int64_t addr = 0, line = firstlineno;
	size_t i = 0;

	if (lasti < 0)
		return firstlineno;
	/* Each entry: a byte 1cccclll (code c, covering l + 1 code units),
	 * then what code c says follows. */
	while (i < len) {
		uint8_t b = tab[i++];
		int code = (b >> 3) & 15, noloc = 0;
		int64_t delta = 0;
		uint32_t skip;

		if (!(b & 0x80))
			return -EBADMSG;
		switch (code) {
		case 15:   /* no location */
			noloc = 1;
			break;
		case 14:   /* long form: line delta, end line delta, column, end column */
			if (svarint(tab, len, &i, &delta) || varint(tab, len, &i, &skip) ||
			    varint(tab, len, &i, &skip) || varint(tab, len, &i, &skip))
				return -EBADMSG;
			break;
		case 13:   /* no column: line delta */
			if (svarint(tab, len, &i, &delta))
				return -EBADMSG;
			break;
		case 10: case 11: case 12:   /* one line: delta code - 10, two column bytes */
			delta = code - 10;
			i += 2;
			break;
		default:   /* short forms: the same line, one column byte */
			i += 1;
			break;
		}
		if (i > len)
			return -EBADMSG;
		line += delta;
		if (line < 0 || line > INT32_MAX)
			return -EBADMSG;
		if (lasti < addr + (b & 7) + 1)
			return noloc ? -1 : (int)line;
		addr += (b & 7) + 1;
	}
	return -EBADMSG;
}

/* ---- state ------------------------------------------------------------- */

/* Code objects cached at once; past them the cache starts afresh. */
#define MAX_CODES 3072
/* A code object cached this long is checked again (its address may have
 * been freed and reused by another code object: functions made at run time). */
#define CODE_RECHECK_NS 1000000000ull
#define MAX_NAME_CHARS 1024
#define MAX_LINETABLE (64u << 10)
/* Bounds on what tokens keep (they live as long as the target's program):
 * past them, eval frames stay native (counted as `full`). */
#define STR_POOL_MAX (8u << 20)
#define MAX_GROUPS 65536u
#define MAX_GROUP_FRAMES (1u << 20)

struct code_ent {
	uint64_t addr;
	uint64_t checked_ns;
	uint64_t key[3];        /* qualname, filename, linetable pointers when read */
	uint32_t func, file;    /* offsets into the string pool */
	int firstlineno;
	uint8_t *lt;
	uint32_t lt_len;
};

/* One resolved Python frame of a token. */
struct gframe {
	uint32_t func, file;
	int32_t line, start;
};

struct group {
	uint32_t first, n;      /* gf[first .. first+n) */
};

struct pt_py {
	pid_t pid;
	struct pt_mem *mem;
	enum pt_py_state state;
	const struct pt_py_layout *L;
	uint32_t version;
	uint64_t runtime, code_type, eval_lo, eval_hi;
	struct code_ent *codes;         /* in order of first read, MAX_CODES at most */
	size_t ncodes, codes_cap;
	struct base_map code_index;     /* a code object's address -> its index in codes */
	char *pool;                     /* NUL-terminated strings */
	size_t pool_len, pool_cap;
	struct base_map strs;           /* hash of a string -> its offset in pool */
	struct gframe *gf;
	size_t ngf, gf_cap;
	struct group *groups;           /* by id: a token is PT_PY_TOKEN_BASE + id */
	size_t ngroups, groups_cap;
	struct base_map gidx;           /* hash of a group's frames -> its id */
	uint8_t bulk[PT_PY_BULK_BYTES]; /* the top of a thread's frame stack, per stop */
	pt_py_read_fn read;             /* tests and fuzzing: memory other than the target's */
	void *read_arg;
	struct pt_py_stats st;
};

int pt_py_new(struct pt_py **out, pid_t pid, struct pt_mem *mem)
{
	struct pt_py *py = base_calloc(1, sizeof(*py));

	*out = NULL;
	if (!py)
		return -ENOMEM;
	py->pid = pid;
	py->mem = mem;
	*out = py;
	return 0;
}

static void codes_clear(struct pt_py *py)
{
	for (size_t i = 0; i < py->ncodes; i++)
		base_free(py->codes[i].lt);
	py->ncodes = 0;
	base_map_free(&py->code_index);
}

void pt_py_reset(struct pt_py *py)
{
	codes_clear(py);
	base_free(py->codes);
	base_free(py->pool);
	base_map_free(&py->strs);
	base_free(py->gf);
	base_free(py->groups);
	base_map_free(&py->gidx);
	py->codes = NULL;
	py->pool = NULL;
	py->gf = NULL;
	py->groups = NULL;
	py->codes_cap = py->pool_len = py->pool_cap = 0;
	py->ngf = py->gf_cap = py->ngroups = py->groups_cap = 0;
	py->state = PT_PY_NONE;
	py->L = NULL;
	py->runtime = py->code_type = py->eval_lo = py->eval_hi = 0;
}

void pt_py_free(struct pt_py *py)
{
	if (!py)
		return;
	pt_py_reset(py);
	base_free(py);
}

enum pt_py_state pt_py_state(const struct pt_py *py)
{
	return py->state;
}

void pt_py_stats(const struct pt_py *py, struct pt_py_stats *out)
{
	*out = py->st;
}

/* One read of the running (or stopped) target, whole or nothing: one
 * process_vm_readv, or the reader a test or fuzzer set. */
static int vm_read(struct pt_py *py, uint64_t addr, void *dst, size_t len)
{
	struct iovec local = { dst, len }, remote = { (void *)(uintptr_t)addr, len };

	if (py->read)
		return py->read(py->read_arg, addr, dst, len) ? -EFAULT : 0;
	return process_vm_readv(py->pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

void pt_py_set_reader(struct pt_py *py, pt_py_read_fn fn, void *arg)
{
	py->read = fn;
	py->read_arg = arg;
}

int pt_py_activate(struct pt_py *py, uint32_t version, uint64_t runtime, uint64_t eval_lo,
		   uint64_t eval_hi, uint64_t code_type)
{
	if (!(py->L = pt_py_layout_find(version)))
		return -ENOENT;
	py->version = version;
	py->runtime = runtime;
	py->eval_lo = eval_lo;
	py->eval_hi = eval_hi;
	py->code_type = code_type;
	py->state = PT_PY_ACTIVE;
	return 0;
}

/* ---- detection --------------------------------------------------------- */

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

enum pt_py_state pt_py_detect(struct pt_py *py, const struct pt_maps *maps,
			      struct pt_modules *mods, char *note, size_t len)
{
	static const char *const names[] = { "_PyRuntime", "Py_Version", "_PyEval_EvalFrameDefault",
					     "PyCode_Type" };
	uint64_t a[4], sz[4];
	uint32_t ver = 0;

	note[0] = '\0';
	if (py->state == PT_PY_ACTIVE || !maps)
		return py->state;
	for (size_t i = 0; i < maps->n; i++) {
		const struct pt_map *m = &maps->v[i];
		const char *b = base_name(m->path);
		struct pt_module *mod;

		if (!(m->flags & PT_MAP_X) || (strncmp(b, "python3", 7) && strncmp(b, "libpython3", 10)))
			continue;
		if (!(mod = pt_modules_find(mods, maps, m->start)) ||
		    pt_module_lookup(mods, mod, names, a, sz, 4) <= 0 || !a[0])
			continue;
		/* CPython: _PyRuntime is its one global state. Py_Version
		 * (3.11 and later) says which release, so which layout. */
		if (!a[1] || pt_mem_read(py->mem, a[1], &ver, sizeof(ver))) {
			snprintf(note, len, "python: %s is a CPython without Py_Version (before 3.11): "
				 "profiled natively, its _PyEval_EvalFrameDefault frames stay", m->path);
			return py->state = PT_PY_UNSUPPORTED;
		}
		py->L = pt_py_layout_find(ver);
		if (!py->L || !a[2] || !sz[2]) {
			snprintf(note, len, "python: %s is CPython %u.%u.%u, a release whose layout podprof "
				 "does not know: profiled natively, its _PyEval_EvalFrameDefault frames stay",
				 m->path, ver >> 24, (ver >> 16) & 0xff, (ver >> 8) & 0xff);
			py->L = NULL;
			return py->state = PT_PY_UNSUPPORTED;
		}
		py->version = ver;
		py->runtime = a[0];
		py->eval_lo = a[2];
		py->eval_hi = a[2] + sz[2];
		py->code_type = a[3];
		snprintf(note, len, "python: %s is CPython %u.%u.%u: its _PyEval_EvalFrameDefault frames "
			 "show the Python functions they run%s", m->path, ver >> 24, (ver >> 16) & 0xff,
			 (ver >> 8) & 0xff, py->L->tested ? "" : " (a layout not tested against this release)");
		return py->state = PT_PY_ACTIVE;
	}
	return py->state = PT_PY_NONE;
}

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
	if (vm_read(py, py->runtime + L->rt_interp_head, &interp, 8))
		return -EFAULT;
	for (int ni = 0; interp && ni < MAX_INTERPRETERS; ni++) {
		if (vm_read(py, interp + L->is_threads_head, &ts, 8))
			return found;
		for (int nt = 0; ts && nt < MAX_THREAD_STATES; nt++) {
			uint8_t buf[512];

			if (L->ts_size > sizeof(buf) || vm_read(py, ts, buf, L->ts_size))
				break;
			for (size_t i = 0; i < n; i++)
				if (!tstates[i] && nstids[i] && pt__rd64(buf + L->ts_native_tid) == (uint64_t)nstids[i]) {
					tstates[i] = ts;
					found++;
				}
			ts = pt__rd64(buf + L->ts_next);
		}
		if (vm_read(py, interp + L->is_next, &interp, 8))
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
						     vm_read(v->py, addr, dst, len)))
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

/* Appends the chain from `frame` (innermost first) to out; out->truncated
 * when it did not reach its end. */
static void walk(struct view *v, uint64_t frame, struct pt_py_cap *out)
{
	const struct pt_py_layout *L = v->py->L;
	uint8_t fr[128];

	while (frame && out->n < PT_PY_MAX_FRAMES) {
		struct pt_py_raw *r;

		if (fetch(v, frame, fr, L->fr_size)) {
			out->truncated = 1;
			return;
		}
		r = &out->f[out->n++];
		r->code = pt__rd64(fr + L->fr_code);
		r->instr = pt__rd64(fr + L->fr_prev_instr);
		r->flags = 0;
		if (L->owner_cstack != 0xff && fr[L->fr_owner] == L->owner_cstack)
			r->flags = PT_PY_RAW_MARK;
		else if (L->fr_is_entry && fr[L->fr_is_entry])
			r->flags = PT_PY_RAW_ENTRY;
		frame = pt__rd64(fr + L->fr_previous);
	}
	out->truncated = frame != 0;
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
	uint64_t cframe, frame, chunk, top, limit, outer, root;
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
	/* The innermost eval call's _PyCFrame: a local of that call, so on
	 * the stack we copied, or the thread state's own root_cframe. */
	cframe = pt__rd64(ts + L->ts_cframe);
	if (!cframe || fetch(&v, cframe + L->cf_current_frame, &frame, 8))
		return 0;
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
		if (frame >= lo && !vm_read(py, lo, py->bulk, hi - lo)) {
			v.bulk_lo = lo;
			v.bulk_hi = hi;
		}
		if (bulk) {
			bulk[0] = v.bulk_lo;
			bulk[1] = v.bulk_hi;
		}
	}
	walk(&v, frame, out);
	/* An eval call being entered or left: tstate->cframe names its
	 * _PyCFrame before its current_frame is set, or after the call's last
	 * frame is gone, so what that points to is stale (seen: a lone marker
	 * frame, whose previous is NULL or leads nowhere). The caller's
	 * _PyCFrame is whole: its chain is read instead, and pt_py_merge
	 * leaves the innermost eval frame native. Not when the caller's is the
	 * root_cframe (no eval call outside this one). */
	if (!has_python_frame(out) &&
	    !fetch(&v, cframe + L->cf_previous, &outer, 8) && outer &&
	    !fetch(&v, outer + L->cf_previous, &root, 8) && root &&
	    !fetch(&v, outer + L->cf_current_frame, &frame, 8)) {
		out->n = 0;
		walk(&v, frame, out);
		py->st.unlinked++;
	}
	py->st.frames += (uint64_t)out->n;
	return 0;
}

/* ---- after the stop: strings, code objects, tokens ---------------------- */

/* What a string is looked up by. */
struct str_key {
	const char *pool, *s;
};

static int str_eq(const void *arg, uint64_t off)
{
	const struct str_key *k = arg;

	return !strcmp(k->pool + off, k->s);
}

/* The pool offset of string s (added if new), or UINT32_MAX when full. */
static uint32_t intern(struct pt_py *py, const char *s)
{
	size_t n = strlen(s) + 1;
	uint64_t h = base_hash_bytes(BASE_HASH_SEED, s, n), *at;
	struct str_key k = { py->pool, s };
	uint32_t off = (uint32_t)py->pool_len;

	if ((at = base_map_find(&py->strs, h, str_eq, &k)))
		return (uint32_t)*at;
	if (py->pool_len + n > STR_POOL_MAX ||
	    BASE_ARRAY_RESERVE(py->pool, py->pool_cap, py->pool_len + n) ||
	    base_map_add(&py->strs, h, off))
		return UINT32_MAX;
	memcpy(py->pool + off, s, n);
	py->pool_len += n;
	return off;
}

/* Appends code point c as UTF-8 to out[*n..cap), if it fits. */
static void put_utf8(char *out, size_t cap, size_t *n, uint32_t c)
{
	char b[4];
	size_t k;

	if (c < 0x80) {
		b[0] = (char)c;
		k = 1;
	} else if (c < 0x800) {
		b[0] = (char)(0xc0 | (c >> 6));
		b[1] = (char)(0x80 | (c & 0x3f));
		k = 2;
	} else if (c < 0x10000) {
		if (c >= 0xd800 && c < 0xe000)
			c = 0xfffd;   /* a lone surrogate: not UTF-8 */
		b[0] = (char)(0xe0 | (c >> 12));
		b[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		b[2] = (char)(0x80 | (c & 0x3f));
		k = 3;
	} else {
		if (c > 0x10ffff)
			c = 0xfffd;
		b[0] = (char)(0xf0 | (c >> 18));
		b[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		b[3] = (char)(0x80 | (c & 0x3f));
		k = 4;
	}
	if (*n + k < cap) {
		memcpy(out + *n, b, k);
		*n += k;
	}
}

/* A str object (compact: every str a code object holds) as UTF-8 into
 * out[0..cap), NUL-terminated. Returns 0, -EFAULT or -ENOMEM. */
static int read_str(struct pt_py *py, uint64_t addr, char *out, size_t cap)
{
	const struct pt_py_layout *L = py->L;
	uint8_t head[128], *data;
	uint64_t n;
	unsigned int kind, state;
	size_t off, bytes, k = 0;

	if (!addr || L->str_compact_data > sizeof(head) ||
	    vm_read(py, addr, head, L->str_compact_data))
		return -EFAULT;
	n = pt__rd64(head + L->str_length);
	state = head[L->str_state];
	kind = (state >> 2) & 7;
	/* state: interned:2, kind:3, compact:1, ascii:1 (3.11 and 3.12). */
	if (!((state >> 5) & 1) || (kind != 1 && kind != 2 && kind != 4) || n > MAX_NAME_CHARS)
		return -EFAULT;
	off = ((state >> 6) & 1) ? L->str_ascii_data : L->str_compact_data;
	bytes = (size_t)n * kind;
	if (!(data = base_malloc(bytes + 1)))
		return -ENOMEM;
	if (bytes && vm_read(py, addr + off, data, bytes)) {
		base_free(data);
		return -EFAULT;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t c = kind == 1 ? data[i] : kind == 2 ? (uint32_t)data[2 * i] | (uint32_t)data[2 * i + 1] << 8 :
			     pt__rd32(data + 4 * i);

		put_utf8(out, cap, &k, c);
	}
	out[k] = '\0';
	base_free(data);
	return 0;
}

/* Reads the code object at addr into e (zeroed). Returns 0, -EFAULT (not
 * a code object, or unreadable), -ENOSPC (the string pool is full) or
 * -ENOMEM; e->lt is NULL on failure. */
static int read_code(struct pt_py *py, uint64_t addr, struct code_ent *e)
{
	const struct pt_py_layout *L = py->L;
	uint8_t co[512], bh[64];
	char name[MAX_NAME_CHARS * 4 + 1], file[MAX_NAME_CHARS * 4 + 1];
	uint64_t lt, ltn;
	int err;

	py->st.code_reads++;
	if (L->co_code > sizeof(co) || vm_read(py, addr, co, L->co_code))
		return -EFAULT;
	/* Its type is PyCode_Type's address: anything else is not a code
	 * object (a frame read while it changed, or a lie). */
	if (py->code_type && pt__rd64(co + 8) != py->code_type)
		return -EFAULT;
	e->key[0] = pt__rd64(co + L->co_qualname);
	e->key[1] = pt__rd64(co + L->co_filename);
	e->key[2] = lt = pt__rd64(co + L->co_linetable);
	/* A string that cannot be read is named "?"; out of memory, the
	 * object is not read at all (a later sample reads it again). */
	if ((err = read_str(py, e->key[0], name, sizeof(name))) == -EFAULT)
		err = read_str(py, pt__rd64(co + L->co_name), name, sizeof(name));
	if (err == -EFAULT)
		snprintf(name, sizeof(name), "?");
	else if (err)
		return err;
	if ((err = read_str(py, e->key[1], file, sizeof(file))) == -EFAULT)
		snprintf(file, sizeof(file), "?");
	else if (err)
		return err;
	e->firstlineno = (int32_t)pt__rd32(co + L->co_firstlineno);
	if ((e->func = intern(py, name)) == UINT32_MAX || (e->file = intern(py, file)) == UINT32_MAX)
		return -ENOSPC;
	if (lt && L->bytes_data <= sizeof(bh) && !vm_read(py, lt, bh, L->bytes_data) &&
	    (ltn = pt__rd64(bh + L->bytes_size)) > 0 && ltn <= MAX_LINETABLE) {
		if (!(e->lt = base_malloc(ltn)))
			return -ENOMEM;
		if (!vm_read(py, lt + L->bytes_data, e->lt, ltn)) {
			e->lt_len = (uint32_t)ltn;
		} else {
			base_free(e->lt);
			e->lt = NULL;
		}
	}
	return 0;
}

/* The cached code object at addr, read (or checked again) as needed; NULL
 * if it cannot be read. */
static const struct code_ent *code_get(struct pt_py *py, uint64_t addr, uint64_t now)
{
	struct code_ent *e;
	uint64_t *at;

	if (!addr)
		return NULL;
	if ((at = base_map_get(&py->code_index, addr))) {
		e = &py->codes[*at];
		if (now - e->checked_ns >= CODE_RECHECK_NS) {
			uint8_t co[512];
			const struct pt_py_layout *L = py->L;

			/* Still the same object? Its name, file and line
			 * table pointers tell (a new object allocated there
			 * would have its own). A new one is read aside and
			 * replaces the entry only whole: one that fails to
			 * read leaves the old entry, checked again next time. */
			if (vm_read(py, addr, co, L->co_code) ||
			    (py->code_type && pt__rd64(co + 8) != py->code_type))
				return NULL;
			if (pt__rd64(co + L->co_qualname) != e->key[0] || pt__rd64(co + L->co_filename) != e->key[1] ||
			    pt__rd64(co + L->co_linetable) != e->key[2]) {
				struct code_ent fresh = { .addr = addr };

				if (read_code(py, addr, &fresh)) {
					base_free(fresh.lt);
					return NULL;
				}
				base_free(e->lt);
				*e = fresh;
			}
			e->checked_ns = now;
		}
		return e;
	}
	if (py->ncodes >= MAX_CODES)
		codes_clear(py);
	if (BASE_ARRAY_RESERVE(py->codes, py->codes_cap, py->ncodes + 1))
		return NULL;
	e = &py->codes[py->ncodes];
	memset(e, 0, sizeof(*e));
	if (read_code(py, addr, e) || base_map_put(&py->code_index, addr, py->ncodes)) {
		base_free(e->lt);
		memset(e, 0, sizeof(*e));
		return NULL;
	}
	e->addr = addr;
	e->checked_ns = now;
	py->ncodes++;
	return e;
}

/* What a group is looked up by. */
struct group_key {
	const struct pt_py *py;
	const struct gframe *gf;
	uint32_t n;
};

static int group_eq(const void *arg, uint64_t id)
{
	const struct group_key *k = arg;
	const struct group *g = &k->py->groups[id];

	return g->n == k->n && !memcmp(k->py->gf + g->first, k->gf, k->n * sizeof(*k->gf));
}

/* The token of the group gf[0..n) (added if new), or 0 when full. */
static uint64_t group_token(struct pt_py *py, const struct gframe *gf, uint32_t n)
{
	uint64_t h = base_hash_bytes(BASE_HASH_SEED, gf, n * sizeof(*gf)), *at;
	struct group_key k = { py, gf, n };

	if ((at = base_map_find(&py->gidx, h, group_eq, &k)))
		return PT_PY_TOKEN_BASE + *at;
	/* Full (MAX_GROUPS, MAX_GROUP_FRAMES): the groups there are still
	 * found, new ones are refused. */
	if (py->ngroups >= MAX_GROUPS || py->ngf + n > MAX_GROUP_FRAMES ||
	    BASE_ARRAY_RESERVE(py->gf, py->gf_cap, py->ngf + n) ||
	    BASE_ARRAY_RESERVE(py->groups, py->groups_cap, py->ngroups + 1) ||
	    base_map_add(&py->gidx, h, py->ngroups))
		return 0;
	memcpy(py->gf + py->ngf, gf, n * sizeof(*gf));
	py->groups[py->ngroups] = (struct group){ (uint32_t)py->ngf, n };
	py->ngf += n;
	py->st.tokens++;
	return PT_PY_TOKEN_BASE + py->ngroups++;
}

/* Resolves raw frame r into *g. Returns 1, or -1 (unreadable). A frame
 * that has not run its first instruction yet (CPython's tracebacks leave
 * such "incomplete" frames out) is shown, at its first line: its code
 * object is set before the frame is linked, and the eval call that runs it
 * is on the native stack already, which it names better than the eval
 * frame itself. */
static int resolve(struct pt_py *py, const struct pt_py_raw *r, uint64_t now, struct gframe *g)
{
	const struct pt_py_layout *L = py->L;
	const struct code_ent *e = code_get(py, r->code, now);
	uint64_t first;
	int64_t lasti;
	int line;

	if (!e)
		return -1;
	first = r->code + L->co_code;
	/* prev_instr points at a code unit (2 bytes); its index is lasti. */
	lasti = r->instr >= first ? (int64_t)((r->instr - first) / 2) : -1;
	line = e->lt ? pt_py_addr2line(e->lt, e->lt_len, e->firstlineno, lasti) : 0;
	*g = (struct gframe){ e->func, e->file, line > 0 ? line : 0, e->firstlineno };
	return 1;
}

int pt_py_merge(struct pt_py *py, const struct pt_py_cap *pc, uint64_t *frames, int n)
{
	struct gframe gf[PT_PY_MAX_FRAMES];
	struct { uint32_t first, n; } grp[PT_PY_MAX_FRAMES + 1];
	uint32_t ngf = 0, ng = 0, cur = 0;
	uint64_t now = pt__now_ns();
	int g = 0, bad = 0, ne = 0, skip = 0;

	if (py->state != PT_PY_ACTIVE || pc->n <= 0)
		return n;
	/* Group the chain (innermost first) by eval call: each call's frames
	 * end with its entry frame (3.11: is_entry) or before a marker frame
	 * on the C stack (3.12). */
	for (int i = 0; i < pc->n; i++) {
		const struct pt_py_raw *r = &pc->f[i];

		if (!(r->flags & PT_PY_RAW_MARK)) {
			if (resolve(py, r, now, &gf[ngf]) > 0)
				ngf++;
			else
				bad = 1;
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
		ne += frames[k] >= py->eval_lo && frames[k] < py->eval_hi;
	if (!pc->truncated && (int)ng < ne)
		skip = ne - (int)ng;
	for (int k = 0; k < n && g < (int)ng; k++) {
		uint64_t tok;

		if (frames[k] < py->eval_lo || frames[k] >= py->eval_hi)
			continue;
		if (skip > 0) {
			skip--;
			continue;
		}
		if (grp[g].n) {
			tok = group_token(py, gf + grp[g].first, grp[g].n);
			if (tok)
				frames[k] = tok;
			else
				py->st.full++;
		}
		g++;
	}
	return n;
}

int pt_py_lines(const struct pt_py *py, uint64_t token, struct pt_py_line *out, int max)
{
	uint64_t id = token - PT_PY_TOKEN_BASE;
	const struct group *g;
	int n = 0;

	if (!pt_py_is_token(token) || id >= py->ngroups)
		return 0;
	g = &py->groups[id];
	for (uint32_t i = 0; i < g->n && n < max; i++) {
		const struct gframe *f = &py->gf[g->first + i];

		out[n++] = (struct pt_py_line){ py->pool + f->func, py->pool + f->file, f->line, f->start };
	}
	return n;
}
