/* Methods and tokens (see methods.h). A Method points to its ConstMethod
 * (name and signature indices into its class's constant pool, its
 * bytecodes right after the ConstMethod, its compressed line number table
 * right after them when a flag says so); the pool points to its class
 * (whose name is a Symbol), and holds the Symbols at 8 bytes an entry past
 * the ConstantPool, the source file's among them. Facts from HotSpot's
 * method.hpp, constMethod.hpp, constantPool.hpp, symbol.hpp and
 * compressedStream/unsigned5 of 17, 21 and 25. Owns the caches (in the
 * handle, state.h), bounded as the numbers below say. Sampler thread only,
 * but for the pure functions. */
#include "ptrace/runtimes/jvm/methods.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/array.h"
#include "base/map.h"
#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/core/runtime.h"
#include "ptrace/runtimes/jvm/state.h"
#include "ptrace/runtimes/jvm/vmstructs.h"

/* Methods cached at once; past them the cache starts afresh (tokens keep
 * their names). */
#define MAX_METHODS 65536u
/* A method cached this long is checked again (a class unloaded frees its
 * methods, and the memory may hold another's). */
#define RECHECK_NS 1000000000ull
#define MAX_SYMBOL 1024u
#define MAX_LINETABLE (64u << 10)
#define MAX_CODE 65535u
/* What tokens keep (they live as long as the target's program): past
 * these, frames are left out (counted as lost). */
#define POOL_MAX (16u << 20)
#define MAX_FRAMES (1u << 18)
#define NONE UINT32_MAX

struct pt__jvm_method {
	uint64_t addr, cm;       /* the Method, its ConstMethod when read */
	uint64_t serial;         /* which resolution: tokens are keyed by it */
	uint64_t checked_ns;
	uint64_t bc;             /* its bytecodes */
	uint32_t code_size;
	uint32_t func, sys, file;   /* offsets in the pool (file NONE: unknown) */
	int32_t start;           /* its least line, 0: unknown */
	uint8_t *lt;             /* its line table (NULL: none) */
	uint32_t lt_len;
};

struct pt__jvm_frame {
	uint64_t key;            /* its method's serial, or (a stub) its name's address */
	int stub;
	int32_t line, start;
	uint32_t func, sys, file;   /* NONE: none */
};

/* ---- pure decoders ------------------------------------------------------------ */

int pt_jvm_u5(const uint8_t *p, size_t len, size_t *i, int ux, uint32_t *out)
{
	uint64_t sum = 0;

	for (int k = 0; k < 5; k++) {
		uint8_t b;

		if (*i >= len)
			return -EBADMSG;
		b = p[(*i)++];
		if (b < ux)
			return -EBADMSG;   /* the excluded byte */
		sum += (uint64_t)(b - ux) << (6 * k);
		if (b < 192)
			break;
	}
	if (sum > UINT32_MAX)
		return -EBADMSG;
	*out = (uint32_t)sum;
	return 0;
}

static int u5_signed(const uint8_t *p, size_t len, size_t *i, int ux, int64_t *out)
{
	uint32_t u;

	if (pt_jvm_u5(p, len, i, ux, &u))
		return -EBADMSG;
	*out = (u & 1) ? -(int64_t)(u >> 1) - 1 : (int64_t)(u >> 1);
	return 0;
}

/* Decodes tab[0..len) (see pt_jvm_line_of) into *best and *start.
 * Returns 0, -EAGAIN (it goes on past len) or -EBADMSG. */
static int decode_lines(const uint8_t *tab, size_t len, int ux, int bci, int *best, int *start)
{
	int64_t b = 0, l = 0, best_bci = -1;
	int least = INT_MAX;
	size_t i = 0;

	*best = *start = 0;
	for (;;) {
		uint8_t c;

		if (i >= len)
			return -EAGAIN;
		if (!(c = tab[i++]))
			break;
		if (c == 0xff) {
			int64_t db, dl;
			size_t at = i;

			if (u5_signed(tab, len, &i, ux, &db) || u5_signed(tab, len, &i, ux, &dl))
				return i >= len || at >= len ? -EAGAIN : -EBADMSG;
			b += db;
			l += dl;
		} else {
			b += c >> 3;
			l += c & 7;
		}
		if (l < 0 || l > INT_MAX || b < 0 || b > MAX_CODE)
			return -EBADMSG;
		if (l < least)
			least = (int)l;
		/* the entry of bci, else the greatest below it (entries need not
		 * come in order) */
		if (bci >= 0 && b <= bci && best_bci != bci && b >= best_bci) {
			best_bci = b;
			*best = (int)l;
		}
	}
	*start = least == INT_MAX ? 0 : least;
	return 0;
}

int pt_jvm_line_of(const uint8_t *tab, size_t len, int ux, int bci, int *start)
{
	int best;

	return decode_lines(tab, len, ux, bci, &best, start) ? -1 : best;
}

static int is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

size_t pt_jvm_class_name(const char *in, size_t n, char *out, size_t cap)
{
	size_t o = 0;

	if (!cap)
		return 0;
	/* A hidden class (lambdas, method handles' forms): its name ends in
	 * "+0x" and the address it got ("/0x" as Class.getName spells it). */
	for (size_t i = 0; i + 3 < n; i++)
		if ((in[i] == '+' || in[i] == '/') && in[i + 1] == '0' && in[i + 2] == 'x') {
			size_t k = i + 3;

			while (k < n && is_hex(in[k]))
				k++;
			if (k == n && k > i + 3) {
				n = i;
				break;
			}
		}
	for (size_t i = 0; i < n && o + 1 < cap; i++)
		out[o++] = in[i] == '/' ? '.' : in[i];
	out[o] = 0;
	return o;
}

/* ---- the string pool ----------------------------------------------------------- */

struct str_key {
	const struct pt_jvm *j;
	const char *s;
};

static int str_eq(const void *arg, uint64_t off)
{
	const struct str_key *k = arg;

	return !strcmp(k->j->pool + off, k->s);
}

/* The offset of s in the pool (added if new), or NONE. */
static uint32_t intern(struct pt_jvm *j, const char *s)
{
	struct str_key k = { j, s };
	uint64_t h = base_hash_str(s), *at = base_map_find(&j->strs, h, str_eq, &k);
	size_t n = strlen(s) + 1, off = j->pool_len;

	if (at)
		return (uint32_t)*at;
	if (j->pool_len + n > POOL_MAX || BASE_ARRAY_GROW(j->pool, j->pool_cap, j->pool_len + n))
		return NONE;
	memcpy(j->pool + off, s, n);
	if (base_map_add(&j->strs, h, off))
		return NONE;
	j->pool_len += n;
	return (uint32_t)off;
}

/* ---- methods -------------------------------------------------------------------- */

static void methods_clear(struct pt_jvm *j)
{
	for (size_t i = 0; i < j->nmethods; i++)
		base_free(j->methods[i].lt);
	j->nmethods = 0;
	base_map_free(&j->method_index);
}

void pt__jvm_names_reset(struct pt_jvm *j)
{
	methods_clear(j);
	base_free(j->methods);
	base_free(j->pool);
	base_map_free(&j->strs);
	base_free(j->frames);
	base_map_free(&j->frame_index);
	j->methods = NULL;
	j->pool = NULL;
	j->frames = NULL;
	j->methods_cap = j->pool_len = j->pool_cap = j->nframes = j->frames_cap = 0;
}

/* The Symbol at sym into buf (NUL-terminated, cut to cap - 1). Returns its
 * length or -EFAULT. */
static int symbol(struct pt_jvm *j, uint64_t sym, char *buf, size_t cap)
{
	uint8_t head[16];
	uint64_t body = j->f[JF_SYM_BODY].v;
	size_t n;

	if (body > sizeof(head) || j->f[JF_SYM_LENGTH].v + 2 > body ||
	    pt__jvm_read(j, sym, head, (size_t)body))
		return -EFAULT;
	n = (size_t)pt__jvm_int(head, sizeof(head), j->f[JF_SYM_LENGTH].v, 2, 0);
	if (n > MAX_SYMBOL || n + 1 > cap || pt__jvm_read(j, sym + body, buf, n))
		return -EFAULT;
	buf[n] = 0;
	return (int)n;
}

/* The Symbol of pool entry idx of the pool at cp (n entries). */
static int pool_symbol(struct pt_jvm *j, uint64_t cp, int64_t n, int64_t idx, char *buf, size_t cap)
{
	uint64_t sym;

	if (idx <= 0 || idx >= n || pt__jvm_word(j, cp + j->tsize[JT_CONSTANTPOOL] + 8 * (uint64_t)idx, &sym))
		return -EFAULT;
	/* the low bit tags a pseudo-string's symbol */
	return symbol(j, sym & ~1ull, buf, cap);
}

int pt__jvm_pool_symbol(struct pt_jvm *j, uint64_t cp, int64_t idx, char *buf, size_t cap)
{
	uint8_t cpb[256];
	size_t cpl = j->tsize[JT_CONSTANTPOOL];

	if (cpl > sizeof(cpb) || pt__jvm_read(j, cp, cpb, cpl))
		return -EFAULT;
	return pool_symbol(j, cp, pt__jvm_get(j, JF_CP_LENGTH, cpb, cpl, 1), idx, buf, cap);
}

/* The compressed line number table after the bytecodes at at: copied up
 * to its end, into *out (*len bytes). Returns 0, -EFAULT, -EBADMSG or
 * -ENOMEM. */
static int line_table(struct pt_jvm *j, uint64_t at, uint8_t **out, uint32_t *len)
{
	uint8_t *t = NULL;
	size_t n = 0, cap = 0;
	int best, start, err = -EBADMSG;

	*out = NULL;
	while (n < MAX_LINETABLE) {
		/* up to the next page at most: the table may end just before
		 * an unmapped one */
		size_t step = PT_MEM_PAGE - (size_t)((at + n) % PT_MEM_PAGE);

		if (step > 256)
			step = 256;
		if (BASE_ARRAY_GROW(t, cap, n + step)) {
			err = -ENOMEM;
			break;
		}
		if (pt__jvm_read(j, at + n, t + n, step)) {
			err = -EFAULT;
			break;
		}
		n += step;
		if ((err = decode_lines(t, n, j->ux, -1, &best, &start)) != -EAGAIN)
			break;
		err = -EBADMSG;
	}
	if (err) {
		base_free(t);
		return err;
	}
	*out = t;
	*len = (uint32_t)n;
	return 0;
}

/* Reads the Method at addr into m. Returns 0, -EFAULT/-EBADMSG (not a
 * method) or -ENOMEM. */
static int resolve(struct pt_jvm *j, uint64_t addr, struct pt__jvm_method *m)
{
	uint8_t cmb[256], cpb[256];
	size_t cml = j->tsize[JT_CONSTMETHOD], cpl = j->tsize[JT_CONSTANTPOOL];
	char cls[MAX_SYMBOL + 1], name[MAX_SYMBOL + 1], sig[MAX_SYMBOL + 1], src[MAX_SYMBOL + 1];
	char buf[3 * MAX_SYMBOL + 8], jcls[MAX_SYMBOL + 1];
	uint64_t cm, cp, holder, back, kname;
	int64_t n, ni, si, fi;
	const char *slash;
	int err;

	memset(m, 0, sizeof(*m));
	if ((addr & 7) || cml > sizeof(cmb) || cpl > sizeof(cpb) ||
	    pt__jvm_word(j, addr + j->f[JF_M_CONST].v, &cm) || (cm & 7) || pt__jvm_read(j, cm, cmb, cml))
		return -EFAULT;
	cp = (uint64_t)pt__jvm_get(j, JF_CM_CONSTANTS, cmb, cml, 0);
	if ((cp & 7) || pt__jvm_read(j, cp, cpb, cpl))
		return -EFAULT;
	holder = (uint64_t)pt__jvm_get(j, JF_CP_HOLDER, cpb, cpl, 0);
	/* A method's pool's class holds that pool: a pointer that is no
	 * Method fails here. */
	if ((holder & 7) || pt__jvm_word(j, holder + j->f[JF_IK_CONSTANTS].v, &back) || back != cp ||
	    pt__jvm_word(j, holder + j->f[JF_K_NAME].v, &kname))
		return -EBADMSG;
	n = pt__jvm_get(j, JF_CP_LENGTH, cpb, cpl, 1);
	ni = pt__jvm_get(j, JF_CM_NAME, cmb, cml, 0);
	si = pt__jvm_get(j, JF_CM_SIG, cmb, cml, 0);
	fi = pt__jvm_get(j, JF_CP_SOURCE, cpb, cpl, 0);
	if (n <= 0 || n > 65536 || symbol(j, kname, cls, sizeof(cls)) < 0 ||
	    pool_symbol(j, cp, n, ni, name, sizeof(name)) < 0 || pool_symbol(j, cp, n, si, sig, sizeof(sig)) < 0)
		return -EBADMSG;
	m->addr = addr;
	m->cm = cm;
	m->bc = cm + cml;
	m->code_size = (uint32_t)pt__jvm_get(j, JF_CM_CODE_SIZE, cmb, cml, 0);
	m->file = NONE;
	pt_jvm_class_name(cls, strlen(cls), jcls, sizeof(jcls));
	snprintf(buf, sizeof(buf), "%s.%s", jcls, name);
	m->func = intern(j, buf);
	snprintf(buf, sizeof(buf), "%s.%s%s", jcls, name, sig);
	m->sys = intern(j, buf);
	/* Its source file, in its package's directory ("java/lang/Thread.java"),
	 * as a source tree has it. */
	if (j->f[JF_CP_SOURCE].found && fi > 0 && pool_symbol(j, cp, n, fi, src, sizeof(src)) >= 0) {
		slash = strrchr(cls, '/');
		snprintf(buf, sizeof(buf), "%.*s%s", slash ? (int)(slash - cls + 1) : 0, cls, src);
		m->file = intern(j, buf);
	}
	if (m->func == NONE || m->sys == NONE)
		return -ENOMEM;
	if (j->f[JF_CM_FLAGS].found && (j->have_c & (1u << JC_HAS_LINES)) &&
	    (pt__jvm_get(j, JF_CM_FLAGS, cmb, cml, 0) & j->c[JC_HAS_LINES])) {
		if ((err = line_table(j, m->bc + m->code_size, &m->lt, &m->lt_len)) == -ENOMEM)
			return err;
		if (m->lt)
			pt_jvm_line_of(m->lt, m->lt_len, j->ux, -1, &m->start);
	}
	return 0;
}

long pt__jvm_method(struct pt_jvm *j, uint64_t addr)
{
	uint64_t *at = addr ? base_map_get(&j->method_index, addr) : NULL, now = pt__now_ns(), cm;
	struct pt__jvm_method m = { 0 }, *slot;
	long i;

	if (at) {
		i = (long)*at - 1;
		if (now - j->methods[i].checked_ns < RECHECK_NS)
			return i;
		if (!pt__jvm_word(j, addr + j->f[JF_M_CONST].v, &cm) && cm == j->methods[i].cm) {
			j->methods[i].checked_ns = now;
			return i;
		}
		base_map_del(&j->method_index, addr);   /* another method now, or none */
	}
	if (!addr || resolve(j, addr, &m)) {
		base_free(m.lt);
		return -1;
	}
	if (j->nmethods >= MAX_METHODS)
		methods_clear(j);
	if (!(slot = BASE_ARRAY_PUSH(j->methods, j->nmethods, j->methods_cap))) {
		base_free(m.lt);
		return -1;
	}
	m.checked_ns = now;
	m.serial = ++j->st.methods;
	*slot = m;
	i = (long)j->nmethods - 1;
	if (base_map_put(&j->method_index, addr, (uint64_t)i + 1)) {
		base_free(slot->lt);
		j->nmethods--;
		return -1;
	}
	return i;
}

int pt__jvm_bci(const struct pt_jvm *j, long m, uint64_t bcp)
{
	const struct pt__jvm_method *me = &j->methods[m];

	return bcp >= me->bc && bcp - me->bc < me->code_size ? (int)(bcp - me->bc) : -1;
}

/* ---- tokens ---------------------------------------------------------------------- */

struct frame_key {
	const struct pt_jvm *j;
	uint64_t key;
	int stub;
	int32_t line;
};

static int frame_eq(const void *arg, uint64_t id)
{
	const struct frame_key *k = arg;
	const struct pt__jvm_frame *f = &k->j->frames[id];

	return f->key == k->key && f->stub == k->stub && f->line == k->line;
}

static uint64_t frame_hash(const struct frame_key *k)
{
	uint64_t h = base_hash_word(BASE_HASH_SEED, k->key);

	h = base_hash_word(h, (uint64_t)k->stub);
	return base_hash_word(h, (uint64_t)(uint32_t)k->line);
}

/* The id of the frame of key k, or a new one made of f, or -1. */
static long frame_id(struct pt_jvm *j, const struct frame_key *k, const struct pt__jvm_frame *f)
{
	uint64_t h = frame_hash(k), *at = base_map_find(&j->frame_index, h, frame_eq, k);
	struct pt__jvm_frame *slot;

	if (at)
		return (long)*at;
	if (j->nframes >= MAX_FRAMES || !(slot = BASE_ARRAY_PUSH(j->frames, j->nframes, j->frames_cap)))
		return -1;
	*slot = *f;
	if (base_map_add(&j->frame_index, h, j->nframes - 1)) {
		j->nframes--;
		return -1;
	}
	return (long)j->nframes - 1;
}

long pt__jvm_frame(struct pt_jvm *j, long m, int bci)
{
	const struct pt__jvm_method *me = &j->methods[m];
	int start, line = bci >= 0 && me->lt ? pt_jvm_line_of(me->lt, me->lt_len, j->ux, bci, &start) : 0;
	struct frame_key k = { j, me->serial, 0, line > 0 ? line : 0 };
	struct pt__jvm_frame f = { me->serial, 0, k.line, me->start, me->func, me->sys, me->file };

	return frame_id(j, &k, &f);
}

long pt__jvm_stub(struct pt_jvm *j, uint64_t name)
{
	struct frame_key k = { j, name, 1, 0 };
	uint64_t *at = base_map_find(&j->frame_index, frame_hash(&k), frame_eq, &k);
	struct pt__jvm_frame f = { name, 1, 0, 0, NONE, NONE, NONE };
	char buf[128];

	if (at)
		return (long)*at;
	if (pt__jvm_cstr(j, name, buf, sizeof(buf)) <= 0 || (f.func = intern(j, buf)) == NONE)
		return -1;
	return frame_id(j, &k, &f);
}

int pt__jvm_line(const struct pt_jvm *j, uint64_t id, struct pt_rt_line *out)
{
	const struct pt__jvm_frame *f;

	if (id >= j->nframes)
		return 0;
	f = &j->frames[id];
	*out = (struct pt_rt_line){
		.func = j->pool + f->func,
		.file = f->file != NONE ? j->pool + f->file : NULL,
		.line = f->line,
		.start_line = f->start,
		.system = f->sys != NONE ? j->pool + f->sys : NULL,
	};
	return 1;
}
