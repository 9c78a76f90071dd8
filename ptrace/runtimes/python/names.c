/* What a Python token names (see python.h): the code objects of its frames,
 * read once and cached by address (checked again each second: an address
 * may be reused by another code object), their names and files interned in
 * one string pool, their location tables decoded for lines, and the groups
 * of resolved frames that tokens stand for. Owns those caches (in the
 * handle: state.h); they live until pt_py_reset, bounded as the
 * numbers below say. Sampler thread only, but for pt_py_addr2line (any
 * thread: a pure function). */
#include "ptrace/runtimes/python/names.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/array.h"
#include "base/map.h"
#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/runtimes/python/state.h"

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

struct pt__py_code {
	uint64_t addr;
	uint64_t checked_ns;
	uint64_t key[3];        /* qualname, filename, linetable pointers when read */
	uint32_t func, file;    /* offsets into the string pool */
	int firstlineno;
	uint8_t *lt;
	uint32_t lt_len;
};

struct pt__py_group {
	uint32_t first, n;      /* gf[first .. first+n) */
};

static void codes_clear(struct pt_py *py)
{
	for (size_t i = 0; i < py->ncodes; i++)
		base_free(py->codes[i].lt);
	py->ncodes = 0;
	base_map_free(&py->code_index);
}

void pt__py_names_reset(struct pt_py *py)
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

/* ---- strings, code objects, tokens ------------------------------------- */

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
	    BASE_ARRAY_GROW(py->pool, py->pool_cap, py->pool_len + n) ||
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
	    pt__py_read(py, addr, head, L->str_compact_data))
		return -EFAULT;
	n = pt__rd64(head + L->str_length);
	state = head[L->str_state];
	kind = (state >> 2) & 7;
	/* state: interned:2, kind:3, compact:1, ascii:1 (3.11 to 3.15, but
	 * for free-threaded builds, which are not read). */
	if (!((state >> 5) & 1) || (kind != 1 && kind != 2 && kind != 4) || n > MAX_NAME_CHARS)
		return -EFAULT;
	off = ((state >> 6) & 1) ? L->str_ascii_data : L->str_compact_data;
	bytes = (size_t)n * kind;
	if (!(data = base_malloc(bytes + 1)))
		return -ENOMEM;
	if (bytes && pt__py_read(py, addr + off, data, bytes)) {
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
static int read_code(struct pt_py *py, uint64_t addr, struct pt__py_code *e)
{
	const struct pt_py_layout *L = py->L;
	uint8_t co[512], bh[64];
	char name[MAX_NAME_CHARS * 4 + 1], file[MAX_NAME_CHARS * 4 + 1];
	uint64_t lt, ltn;
	int err;

	py->st.code_reads++;
	if (L->co_code > sizeof(co) || pt__py_read(py, addr, co, L->co_code))
		return -EFAULT;
	/* Its type is PyCode_Type's address: anything else is not a code
	 * object (a frame read while it changed, or a lie). */
	if (py->code_type && pt__rd64(co + L->ob_type) != py->code_type)
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
	if (lt && L->bytes_data <= sizeof(bh) && !pt__py_read(py, lt, bh, L->bytes_data) &&
	    (ltn = pt__rd64(bh + L->bytes_size)) > 0 && ltn <= MAX_LINETABLE) {
		if (!(e->lt = base_malloc(ltn)))
			return -ENOMEM;
		if (!pt__py_read(py, lt + L->bytes_data, e->lt, ltn)) {
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
static const struct pt__py_code *code_get(struct pt_py *py, uint64_t addr, uint64_t now)
{
	struct pt__py_code *e;
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
			if (pt__py_read(py, addr, co, L->co_code) ||
			    (py->code_type && pt__rd64(co + L->ob_type) != py->code_type))
				return NULL;
			if (pt__rd64(co + L->co_qualname) != e->key[0] || pt__rd64(co + L->co_filename) != e->key[1] ||
			    pt__rd64(co + L->co_linetable) != e->key[2]) {
				struct pt__py_code fresh = { .addr = addr };

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
	const struct pt__py_frame *gf;
	uint32_t n;
};

static int group_eq(const void *arg, uint64_t id)
{
	const struct group_key *k = arg;
	const struct pt__py_group *g = &k->py->groups[id];

	return g->n == k->n && !memcmp(k->py->gf + g->first, k->gf, k->n * sizeof(*k->gf));
}

/* The token of the group gf[0..n) (added if new), or 0 when full. */
uint64_t pt__py_token(struct pt_py *py, const struct pt__py_frame *gf, uint32_t n)
{
	uint64_t h = base_hash_bytes(BASE_HASH_SEED, gf, n * sizeof(*gf)), *at;
	struct group_key k = { py, gf, n };

	if ((at = base_map_find(&py->gidx, h, group_eq, &k)))
		return py->token_base + *at;
	/* Full (MAX_GROUPS, MAX_GROUP_FRAMES): the groups there are still
	 * found, new ones are refused. */
	if (py->ngroups >= MAX_GROUPS || py->ngf + n > MAX_GROUP_FRAMES ||
	    BASE_ARRAY_RESERVE(py->gf, py->gf_cap, py->ngf + n) ||
	    BASE_ARRAY_RESERVE(py->groups, py->groups_cap, py->ngroups + 1) ||
	    base_map_add(&py->gidx, h, py->ngroups))
		return 0;
	memcpy(py->gf + py->ngf, gf, n * sizeof(*gf));
	py->groups[py->ngroups] = (struct pt__py_group){ (uint32_t)py->ngf, n };
	py->ngf += n;
	py->st.tokens++;
	return py->token_base + py->ngroups++;
}

/* Resolves raw frame r into *g. Returns 1, 0 (a frame not shown: the
 * interpreter's own __init__ shim), or -1 (unreadable). A frame
 * that has not run its first instruction yet (CPython's tracebacks leave
 * such "incomplete" frames out) is shown, at its first line: its code
 * object is set before the frame is linked, and the eval call that runs it
 * is on the native stack already, which it names better than the eval
 * frame itself. */
int pt__py_resolve(struct pt_py *py, const struct pt_py_raw *r, uint64_t now,
		   struct pt__py_frame *g)
{
	const struct pt_py_layout *L = py->L;
	const struct pt__py_code *e = code_get(py, r->code, now);
	uint64_t first;
	int64_t lasti;
	int line;

	if (!e)
		return -1;
	/* The shim that runs a class's __init__ after the object is made
	 * (3.13 on, _Py_InitCleanup: a code object named and filed
	 * "__init__", no location of its own): no function of the program. */
	if (!strcmp(py->pool + e->func, "__init__") && !strcmp(py->pool + e->file, "__init__"))
		return 0;
	first = r->code + L->co_code;
	/* prev_instr points at a code unit (2 bytes); its index is lasti. */
	lasti = r->instr >= first ? (int64_t)((r->instr - first) / 2) : -1;
	line = e->lt ? pt_py_addr2line(e->lt, e->lt_len, e->firstlineno, lasti) : 0;
	*g = (struct pt__py_frame){ e->func, e->file, line > 0 ? line : 0, e->firstlineno };
	return 1;
}

int pt_py_lines(const struct pt_py *py, uint64_t token, struct pt_py_line *out, int max)
{
	uint64_t id = token - py->token_base;
	const struct pt__py_group *g;
	int n = 0;

	if ((token & ~PT_RT_TOKEN_ID_MASK) != py->token_base || id >= py->ngroups)
		return 0;
	g = &py->groups[id];
	for (uint32_t i = 0; i < g->n && n < max; i++) {
		const struct pt__py_frame *f = &py->gf[g->first + i];

		out[n++] = (struct pt_py_line){ py->pool + f->func, py->pool + f->file, f->line, f->start };
	}
	return n;
}

