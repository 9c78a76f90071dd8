/* CPython's table of offsets (see offsets.h): a descriptor per minor
 * release, and the layout a target's table gives through it. The
 * descriptors' positions are held to each release's own
 * Include/internal/pycore_debug_offsets.h (pycore_runtime.h for 3.13) by
 * the unit test python_tables_match_headers, and to the tables of the real
 * interpreters by python_tables_of_real_interpreters. Pure functions: any
 * thread. */
#include "ptrace/runtimes/python/offsets.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* What podprof reads of the table, by the names pycore_debug_offsets.h
 * gives the fields. */
#define PY_TABLE_FIELDS(X)                                                   \
	X(rt_size, "runtime_state.size")                                     \
	X(rt_interp_head, "runtime_state.interpreters_head")                 \
	X(is_size, "interpreter_state.size")                                 \
	X(is_next, "interpreter_state.next")                                 \
	X(is_threads_head, "interpreter_state.threads_head")                 \
	X(ts_size, "thread_state.size")                                      \
	X(ts_next, "thread_state.next")                                      \
	X(ts_current_frame, "thread_state.current_frame")                    \
	X(ts_base_frame, "thread_state.base_frame")                          \
	X(ts_native_tid, "thread_state.native_thread_id")                    \
	X(ts_chunk, "thread_state.datastack_chunk")                          \
	X(fr_size, "interpreter_frame.size")                                 \
	X(fr_previous, "interpreter_frame.previous")                         \
	X(fr_executable, "interpreter_frame.executable")                     \
	X(fr_instr_ptr, "interpreter_frame.instr_ptr")                       \
	X(fr_owner, "interpreter_frame.owner")                               \
	X(co_size, "code_object.size")                                       \
	X(co_filename, "code_object.filename")                               \
	X(co_name, "code_object.name")                                       \
	X(co_qualname, "code_object.qualname")                               \
	X(co_linetable, "code_object.linetable")                             \
	X(co_firstlineno, "code_object.firstlineno")                         \
	X(co_code_adaptive, "code_object.co_code_adaptive")                  \
	X(ob_type, "pyobject.ob_type")                                       \
	X(bytes_size, "bytes_object.size")                                   \
	X(bytes_ob_size, "bytes_object.ob_size")                             \
	X(bytes_ob_sval, "bytes_object.ob_sval")                             \
	X(u_size, "unicode_object.size")                                     \
	X(u_state, "unicode_object.state")                                   \
	X(u_length, "unicode_object.length")                                 \
	X(u_ascii_size, "unicode_object.asciiobject_size")                   \
	X(u_compact_size, "unicode_object.compactunicodeobject_size")

/* One minor release's table: from which release on it has this shape, its
 * size, and the byte offset in it of each value podprof reads (0: that
 * release's table has no such field). Every value is a uint64_t, after the
 * 8-byte cookie, so a field's offset is 8 times its rank. */
struct py_table {
	unsigned int minor;
	uint32_t first;            /* PY_VERSION_HEX of the first release with this table */
	uint16_t size;             /* sizeof(_Py_DebugOffsets) */
	unsigned int flags;        /* PT_PY_L_* */
#define PY_FIELD(f, name) uint16_t f;
	PY_TABLE_FIELDS(PY_FIELD)
#undef PY_FIELD
};

/* Before 3.13.0rc2 the table had no free_threaded and fewer fields;
 * 3.14.0b2 added code_object_generation, tlbc_generation and llist_node;
 * 3.15.0b4 added thread_state.last_profiled_frame_seq. The pre-releases
 * before those are refused. 3.14 made f_executable a tagged _PyStackRef. */
static const struct py_table tables[] = {
	{
		.minor = 13, .first = 0x030d00c2, .size = 584, .flags = 0,
		.rt_size = 24, .rt_interp_head = 40,
		.is_size = 48, .is_next = 64, .is_threads_head = 72,
		.ts_size = 152, .ts_next = 168, .ts_current_frame = 184, .ts_base_frame = 0,
		.ts_native_tid = 200, .ts_chunk = 208,
		.fr_size = 224, .fr_previous = 232, .fr_executable = 240, .fr_instr_ptr = 248,
		.fr_owner = 264,
		.co_size = 272, .co_filename = 280, .co_name = 288, .co_qualname = 296,
		.co_linetable = 304, .co_firstlineno = 312, .co_code_adaptive = 344,
		.ob_type = 360,
		.bytes_size = 512, .bytes_ob_size = 520, .bytes_ob_sval = 528,
		.u_size = 536, .u_state = 544, .u_length = 552, .u_ascii_size = 560, .u_compact_size = 0,
	},
	{
		.minor = 14, .first = 0x030e00b2, .size = 760, .flags = PT_PY_L_TAGGED,
		.rt_size = 24, .rt_interp_head = 40,
		.is_size = 48, .is_next = 64, .is_threads_head = 72,
		.ts_size = 176, .ts_next = 192, .ts_current_frame = 208, .ts_base_frame = 0,
		.ts_native_tid = 224, .ts_chunk = 232,
		.fr_size = 248, .fr_previous = 256, .fr_executable = 264, .fr_instr_ptr = 272,
		.fr_owner = 288,
		.co_size = 312, .co_filename = 320, .co_name = 328, .co_qualname = 336,
		.co_linetable = 344, .co_firstlineno = 352, .co_code_adaptive = 384,
		.ob_type = 408,
		.bytes_size = 592, .bytes_ob_size = 600, .bytes_ob_sval = 608,
		.u_size = 616, .u_state = 624, .u_length = 632, .u_ascii_size = 640, .u_compact_size = 0,
	},
	{
		.minor = 15, .first = 0x030f00b4, .size = 888, .flags = PT_PY_L_TAGGED,
		.rt_size = 24, .rt_interp_head = 40,
		.is_size = 48, .is_next = 64, .is_threads_head = 72,
		.ts_size = 176, .ts_next = 192, .ts_current_frame = 208, .ts_base_frame = 216,
		.ts_native_tid = 248, .ts_chunk = 256,
		.fr_size = 312, .fr_previous = 320, .fr_executable = 328, .fr_instr_ptr = 336,
		.fr_owner = 352,
		.co_size = 376, .co_filename = 384, .co_name = 392, .co_qualname = 400,
		.co_linetable = 408, .co_firstlineno = 416, .co_code_adaptive = 448,
		.ob_type = 472,
		.bytes_size = 688, .bytes_ob_size = 696, .bytes_ob_sval = 704,
		.u_size = 712, .u_state = 720, .u_length = 728, .u_ascii_size = 736, .u_compact_size = 744,
	},
};
#define NTABLES (sizeof(tables) / sizeof(tables[0]))
#define FIRST_MINOR 11u   /* the oldest release podprof reads (3.11, by a table of its own) */
#define LAST_MINOR 15u

/* What podprof reads of the structures: its buffers (frames.c, names.c). */
#define READ_TS_MAX 512u
#define READ_FRAME_MAX 128u
#define READ_CODE_MAX 512u
#define READ_STR_MAX 128u
#define READ_BYTES_MAX 64u
/* Larger than any structure of these (PyInterpreterState is about 200 KiB
 * in 3.13, PyThreadState under 1 KiB); offsets podprof keeps are 16-bit. */
#define STRUCT_MAX (16u << 20)
#define OFFSET_MAX 65535u

/* The owner of the frame at the bottom of each eval call's chain, on the C
 * stack (FRAME_OWNED_BY_CSTACK in 3.13, FRAME_OWNED_BY_INTERPRETER in 3.14
 * and 3.15: 3 in each; nothing above 3 is a Python function's frame). */
#define OWNER_MARK 3u
/* _PyStackChunk { previous, size, top, data[] }: not in the table, the
 * same from 3.11 to 3.15 (held to the headers by the unit test), as is
 * datastack_top and datastack_limit following datastack_chunk. */
#define CHUNK_DATA 24u

static const struct py_table *table_of(unsigned int minor)
{
	for (size_t i = 0; i < NTABLES; i++)
		if (tables[i].minor == minor)
			return &tables[i];
	return NULL;
}

int pt_py_table_field(unsigned int minor, const char *field)
{
	const struct py_table *t = table_of(minor);

	if (!t)
		return -1;
#define PY_FIELD(f, name) \
	if (!strcmp(field, name)) \
		return t->f;
	PY_TABLE_FIELDS(PY_FIELD)
#undef PY_FIELD
	return 0;
}

size_t pt_py_table_size(unsigned int minor)
{
	const struct py_table *t = table_of(minor);

	return t ? t->size : 0;
}

void pt_py_version_name(uint32_t v, char *out, size_t len)
{
	unsigned int level = (v >> 4) & 0xf, serial = v & 0xf;
	const char *tag = level == 0xa ? "a" : level == 0xb ? "b" : level == 0xc ? "rc" : NULL;

	if (tag)
		snprintf(out, len, "%u.%u.%u%s%u", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff, tag, serial);
	else
		snprintf(out, len, "%u.%u.%u", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff);
}

int pt_py_table_has_cookie(const uint8_t *tab, size_t len)
{
	return len >= 8 && !memcmp(tab, "xdebugpy", 8);
}

static uint64_t rd64(const uint8_t *tab, uint16_t at)
{
	uint64_t v;

	memcpy(&v, tab + at, 8);
	return v;
}

/* The value at `at` in the table, if it is an offset of `width` bytes
 * inside a structure of `size` bytes (and below `cap`, what podprof reads
 * of it); else UINT16_MAX. */
static uint16_t member(const uint8_t *tab, uint16_t at, uint64_t size, unsigned int width, uint64_t cap)
{
	uint64_t v = rd64(tab, at);

	if (v + width > size || v + width > cap)
		return UINT16_MAX;
	return (uint16_t)v;
}

static uint16_t max16(uint16_t a, uint16_t b)
{
	return a > b ? a : b;
}

int pt_py_layout_from_table(const uint8_t *tab, size_t len, struct pt_py_layout *out,
			    uint32_t *version, char *why, size_t whylen)
{
	static const char *const names[] = { "3.13", "3.14", "3.15" };
	const struct py_table *t;
	uint64_t ver, ft, rt, is, ts, fr, co, by, u;
	struct pt_py_layout L = { 0 };
	char vn[32], first[32];
	int bad = 0;

	*version = 0;
	why[0] = '\0';
	memset(out, 0, sizeof(*out));
	if (len < PT_PY_TABLE_PREFIX || !pt_py_table_has_cookie(tab, len)) {
		snprintf(why, whylen, "its _PyRuntime does not begin with CPython's table of offsets");
		return -EBADMSG;
	}
	ver = rd64(tab, 8);
	ft = rd64(tab, 16);
	if (ver >> 32 || ver >> 24 != 3 || ((ver >> 4) & 0xf) < 0xa) {
		snprintf(why, whylen, "its table of offsets gives no CPython 3 release (0x%llx)",
			 (unsigned long long)ver);
		return -EBADMSG;
	}
	*version = (uint32_t)ver;
	pt_py_version_name((uint32_t)ver, vn, sizeof(vn));
	if (((ver >> 16) & 0xff) > LAST_MINOR) {
		snprintf(why, whylen, "CPython 3.%u is newer than podprof knows (it reads 3.%u to 3.%u; this is %s)",
			 (unsigned int)((ver >> 16) & 0xff), FIRST_MINOR, LAST_MINOR, vn);
		return -ENOENT;
	}
	if (!(t = table_of((ver >> 16) & 0xff))) {
		snprintf(why, whylen, "CPython %s has a table of offsets of a shape podprof does not know", vn);
		return -ENOENT;
	}
	if (ft > 1) {
		snprintf(why, whylen, "its table of offsets says free_threaded=%llu", (unsigned long long)ft);
		return -EBADMSG;
	}
	if (ft) {
		snprintf(why, whylen, "CPython %s is a free-threaded build (%st), which podprof does not read",
			 vn, names[t - tables]);
		return -ENOTSUP;
	}
	if (ver < t->first) {
		pt_py_version_name(t->first, first, sizeof(first));
		snprintf(why, whylen, "CPython %s is a pre-release whose table of offsets podprof does not "
			 "know (it reads %s from %s)", vn, names[t - tables], first);
		return -ENOENT;
	}
	if (len < t->size) {
		snprintf(why, whylen, "its table of offsets could not be read whole");
		return -EBADMSG;
	}
	/* The sizes of the structures, each bounded; then every value podprof
	 * reads inside its structure and inside what podprof reads of it. */
	rt = rd64(tab, t->rt_size);
	is = rd64(tab, t->is_size);
	ts = rd64(tab, t->ts_size);
	fr = rd64(tab, t->fr_size);
	co = rd64(tab, t->co_size);
	by = rd64(tab, t->bytes_size);
	u = rd64(tab, t->u_size);
	if (!rt || !is || !ts || !fr || !co || !by || !u || rt >= STRUCT_MAX || is >= STRUCT_MAX || ts >= STRUCT_MAX ||
	    fr >= STRUCT_MAX || co >= STRUCT_MAX || by >= STRUCT_MAX || u >= STRUCT_MAX) {
		snprintf(why, whylen, "its table of offsets gives sizes out of bounds");
		return -EBADMSG;
	}
	L.version = (uint16_t)(ver >> 16);
	L.name = names[t - tables];
	L.tested = 1;
	L.flags = t->flags;
	L.rt_interp_head = member(tab, t->rt_interp_head, rt, 8, OFFSET_MAX);
	L.is_next = member(tab, t->is_next, is, 8, OFFSET_MAX);
	L.is_threads_head = member(tab, t->is_threads_head, is, 8, OFFSET_MAX);
	L.ts_next = member(tab, t->ts_next, ts, 8, READ_TS_MAX);
	L.ts_native_tid = member(tab, t->ts_native_tid, ts, 8, READ_TS_MAX);
	L.ts_current_frame = member(tab, t->ts_current_frame, ts, 8, READ_TS_MAX);
	L.ts_base_frame = t->ts_base_frame ? member(tab, t->ts_base_frame, ts, 8, READ_TS_MAX) : 0;
	L.ts_chunk = member(tab, t->ts_chunk, ts, 24, READ_TS_MAX);
	L.ts_top = L.ts_chunk == UINT16_MAX ? UINT16_MAX : L.ts_chunk + 8;
	L.ts_limit = L.ts_chunk == UINT16_MAX ? UINT16_MAX : L.ts_chunk + 16;
	L.fr_code = member(tab, t->fr_executable, fr, 8, READ_FRAME_MAX);
	L.fr_previous = member(tab, t->fr_previous, fr, 8, READ_FRAME_MAX);
	L.fr_prev_instr = member(tab, t->fr_instr_ptr, fr, 8, READ_FRAME_MAX);
	L.fr_owner = member(tab, t->fr_owner, fr, 1, READ_FRAME_MAX);
	L.owner_cstack = OWNER_MARK;
	/* co_code_adaptive: where the code units start, and what is read of
	 * a code object: every other field lies below it. */
	L.co_code = member(tab, t->co_code_adaptive, co, 0, READ_CODE_MAX);
	L.co_firstlineno = member(tab, t->co_firstlineno, co, 4, L.co_code);
	L.co_filename = member(tab, t->co_filename, co, 8, L.co_code);
	L.co_name = member(tab, t->co_name, co, 8, L.co_code);
	L.co_qualname = member(tab, t->co_qualname, co, 8, L.co_code);
	L.co_linetable = member(tab, t->co_linetable, co, 8, L.co_code);
	L.ob_type = member(tab, t->ob_type, co, 8, L.co_code);
	/* A compact str's characters follow its PyASCIIObject (ASCII) or its
	 * PyCompactUnicodeObject, which adds utf8_length and utf8 (3.15 gives
	 * its size; before, 16 bytes more). */
	L.str_ascii_data = member(tab, t->u_ascii_size, u, 0, READ_STR_MAX);
	L.str_length = member(tab, t->u_length, u, 8, L.str_ascii_data);
	L.str_state = member(tab, t->u_state, u, 4, L.str_ascii_data);
	if (t->u_compact_size)
		L.str_compact_data = member(tab, t->u_compact_size, u, 0, READ_STR_MAX);
	else
		L.str_compact_data = L.str_ascii_data > READ_STR_MAX - 16 ? UINT16_MAX : L.str_ascii_data + 16;
	L.bytes_data = member(tab, t->bytes_ob_sval, by, 0, READ_BYTES_MAX);
	L.bytes_size = member(tab, t->bytes_ob_size, by, 8, L.bytes_data);
	L.chunk_data = CHUNK_DATA;
	L.ts_size = max16(max16(max16(L.ts_next, L.ts_native_tid), max16(L.ts_current_frame, L.ts_base_frame)),
			  L.ts_limit) + 8;
	L.fr_size = max16(max16(L.fr_code, L.fr_previous), L.fr_prev_instr) + 8;
	if (L.fr_owner >= L.fr_size)
		L.fr_size = (uint16_t)(L.fr_owner + 1);
	bad = L.rt_interp_head == UINT16_MAX || L.is_next == UINT16_MAX || L.is_threads_head == UINT16_MAX ||
	      L.ts_next == UINT16_MAX || L.ts_native_tid == UINT16_MAX || L.ts_current_frame == UINT16_MAX ||
	      L.ts_base_frame == UINT16_MAX || L.ts_chunk == UINT16_MAX || L.fr_code == UINT16_MAX ||
	      L.fr_previous == UINT16_MAX || L.fr_prev_instr == UINT16_MAX || L.fr_owner == UINT16_MAX ||
	      L.co_code == UINT16_MAX || L.co_firstlineno == UINT16_MAX || L.co_filename == UINT16_MAX ||
	      L.co_name == UINT16_MAX || L.co_qualname == UINT16_MAX || L.co_linetable == UINT16_MAX ||
	      L.ob_type == UINT16_MAX || L.str_ascii_data == UINT16_MAX || L.str_length == UINT16_MAX ||
	      L.str_state == UINT16_MAX || L.str_compact_data == UINT16_MAX ||
	      L.str_compact_data < L.str_ascii_data || L.str_compact_data > u ||
	      L.bytes_data == UINT16_MAX || L.bytes_size == UINT16_MAX ||
	      L.ts_size > READ_TS_MAX || L.ts_size > ts || L.fr_size > READ_FRAME_MAX;
	if (bad) {
		snprintf(why, whylen, "CPython %s's table of offsets puts a field outside its structure", vn);
		return -EBADMSG;
	}
	*out = L;
	return 0;
}
