/* VMStructs read from the target (see vmstructs.h). The tables are arrays
 * of fixed-size entries whose size and field offsets libjvm exports too;
 * each is walked to its terminating entry (a NULL name), bounded. Names
 * are C strings in libjvm's .rodata, read through the page cache (read-only
 * file pages are kept), so the few thousand entries cost a few reads of
 * the tables themselves. Sampler thread only. */
#include "ptrace/runtimes/jvm/vmstructs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/runtimes/jvm/state.h"

const char *const pt__jvm_sym_names[PT__JVM_NSYMS] = {
	"gHotSpotVMStructs",
	"gHotSpotVMStructEntryArrayStride",
	"gHotSpotVMStructEntryTypeNameOffset",
	"gHotSpotVMStructEntryFieldNameOffset",
	"gHotSpotVMStructEntryTypeStringOffset",
	"gHotSpotVMStructEntryIsStaticOffset",
	"gHotSpotVMStructEntryOffsetOffset",
	"gHotSpotVMStructEntryAddressOffset",
	"gHotSpotVMTypes",
	"gHotSpotVMTypeEntryArrayStride",
	"gHotSpotVMTypeEntryTypeNameOffset",
	"gHotSpotVMTypeEntrySizeOffset",
	"gHotSpotVMIntConstants",
	"gHotSpotVMIntConstantEntryArrayStride",
	"gHotSpotVMIntConstantEntryNameOffset",
	"gHotSpotVMIntConstantEntryValueOffset",
};
enum {
	S_STRUCTS, S_S_STRIDE, S_S_TYPE, S_S_FIELD, S_S_TSTRING, S_S_STATIC, S_S_OFFSET, S_S_ADDRESS,
	S_TYPES, S_T_STRIDE, S_T_NAME, S_T_SIZE,
	S_INTS, S_I_STRIDE, S_I_NAME, S_I_VALUE,
};

/* Bounds on what a table may be: entries of at most MAX_STRIDE bytes, at
 * most MAX_ENTRIES of them (17 has about 2,100 in all), names of at most
 * MAX_NAME bytes (longer ones are none of ours). */
#define MAX_STRIDE 256u
#define MAX_ENTRIES 65536u
#define MAX_NAME 96
#define CHUNK 64u          /* entries read at once */
#define MAX_TYPE_SIZE (1u << 16)
#define MAX_FIELD_OFFSET (1u << 16)

/* The names of each JF_* entry, a release's first (HotSpot renames some,
 * moves others to a base class). Facts from vmStructs.cpp of JDK 17, 21
 * and 25, and the tables of those releases as read here. */
struct name2 {
	const char *type, *field;
};
static const struct {
	struct name2 n[3];
	int is_static;
} wants[JF_N] = {
	[JF_S_HEAPS] = { { { "CodeCache", "_heaps" } }, 1 },
	[JF_S_CC_LOW] = { { { "CodeCache", "_low_bound" } }, 1 },
	[JF_S_CC_HIGH] = { { { "CodeCache", "_high_bound" } }, 1 },
	[JF_S_INTERP] = { { { "AbstractInterpreter", "_code" } }, 1 },
	[JF_S_CALL_STUB_RET] = { { { "StubRoutines", "_call_stub_return_address" } }, 1 },
	[JF_S_MAJOR] = { { { "Abstract_VM_Version", "_vm_major_version" } }, 1 },
	[JF_S_RELEASE] = { { { "Abstract_VM_Version", "_s_vm_release" } }, 1 },
	[JF_S_THREADS] = { { { "ThreadsSMRSupport", "_java_thread_list" } }, 1 },
	[JF_S_THREAD_KLASS] = { { { "vmClasses", "_klasses[static_cast<int>(vmClassID::Thread_klass_knum)]" } }, 1 },
	[JF_S_STRING_KLASS] = { { { "vmClasses", "_klasses[static_cast<int>(vmClassID::String_klass_knum)]" } }, 1 },
	[JF_S_OOP_BASE] = { { { "CompressedOops", "_narrow_oop._base" }, { "CompressedOops", "_base" } }, 1 },
	[JF_S_OOP_SHIFT] = { { { "CompressedOops", "_narrow_oop._shift" }, { "CompressedOops", "_shift" } }, 1 },
	[JF_S_FLAGS] = { { { "JVMFlag", "flags" } }, 1 },
	[JF_S_NFLAGS] = { { { "JVMFlag", "numFlags" } }, 1 },
	[JF_GA_LEN] = { { { "GrowableArrayBase", "_len" } }, 0 },
	[JF_GA_DATA] = { { { "GrowableArray<int>", "_data" } }, 0 },
	[JF_HEAP_MEMORY] = { { { "CodeHeap", "_memory" } }, 0 },
	[JF_HEAP_SEGMAP] = { { { "CodeHeap", "_segmap" } }, 0 },
	[JF_HEAP_LOG2] = { { { "CodeHeap", "_log2_segment_size" } }, 0 },
	[JF_VS_LOW] = { { { "VirtualSpace", "_low" } }, 0 },
	[JF_VS_HIGH] = { { { "VirtualSpace", "_high" } }, 0 },
	[JF_HB_USED] = { { { "HeapBlock::Header", "_used" } }, 0 },
	[JF_SQ_BUFFER] = { { { "StubQueue", "_stub_buffer" } }, 0 },
	[JF_SQ_LIMIT] = { { { "StubQueue", "_buffer_limit" } }, 0 },
	[JF_CB_NAME] = { { { "CodeBlob", "_name" } }, 0 },
	[JF_CB_SIZE] = { { { "CodeBlob", "_size" } }, 0 },
	[JF_CB_FRAME_SIZE] = { { { "CodeBlob", "_frame_size" } }, 0 },
	[JF_CB_FCO] = { { { "CodeBlob", "_frame_complete_offset" } }, 0 },
	[JF_CB_CODE_BEGIN] = { { { "CodeBlob", "_code_begin" } }, 0 },
	[JF_CB_CODE_END] = { { { "CodeBlob", "_code_end" } }, 0 },
	[JF_CB_CODE_OFFSET] = { { { "CodeBlob", "_code_offset" } }, 0 },
	[JF_CB_DATA_OFFSET] = { { { "CodeBlob", "_data_offset" } }, 0 },
	[JF_CB_KIND] = { { { "CodeBlob", "_kind" } }, 0 },
	[JF_CB_MUTABLE] = { { { "CodeBlob", "_mutable_data" } }, 0 },
	[JF_CB_RELOC_SIZE] = { { { "CodeBlob", "_relocation_size" } }, 0 },
	[JF_NM_METHOD] = { { { "CompiledMethod", "_method" }, { "nmethod", "_method" } }, 0 },
	[JF_NM_COMPILE_ID] = { { { "nmethod", "_compile_id" } }, 0 },
	[JF_NM_PCS] = { { { "nmethod", "_scopes_pcs_offset" } }, 0 },
	[JF_NM_DEPS] = { { { "nmethod", "_dependencies_offset" } }, 0 },
	[JF_NM_METADATA] = { { { "nmethod", "_metadata_offset" } }, 0 },
	[JF_NM_SCOPES_BEGIN] = { { { "CompiledMethod", "_scopes_data_begin" }, { "nmethod", "_scopes_data_begin" } }, 0 },
	[JF_NM_IMMUTABLE] = { { { "nmethod", "_immutable_data" } }, 0 },
	[JF_NM_SCOPES] = { { { "nmethod", "_scopes_data_offset" } }, 0 },
	[JF_PD_PC] = { { { "PcDesc", "_pc_offset" } }, 0 },
	[JF_PD_SCOPE] = { { { "PcDesc", "_scope_decode_offset" } }, 0 },
	[JF_M_CONST] = { { { "Method", "_constMethod" } }, 0 },
	[JF_CM_CONSTANTS] = { { { "ConstMethod", "_constants" } }, 0 },
	[JF_CM_FLAGS] = { { { "ConstMethod", "_flags._flags" }, { "ConstMethod", "_flags" } }, 0 },
	[JF_CM_CODE_SIZE] = { { { "ConstMethod", "_code_size" } }, 0 },
	[JF_CM_NAME] = { { { "ConstMethod", "_name_index" } }, 0 },
	[JF_CM_SIG] = { { { "ConstMethod", "_signature_index" } }, 0 },
	[JF_CP_HOLDER] = { { { "ConstantPool", "_pool_holder" } }, 0 },
	[JF_CP_SOURCE] = { { { "ConstantPool", "_source_file_name_index" } }, 0 },
	[JF_CP_LENGTH] = { { { "ConstantPool", "_length" } }, 0 },
	[JF_IK_CONSTANTS] = { { { "InstanceKlass", "_constants" } }, 0 },
	[JF_K_NAME] = { { { "Klass", "_name" } }, 0 },
	[JF_SYM_LENGTH] = { { { "Symbol", "_length" } }, 0 },
	[JF_SYM_BODY] = { { { "Symbol", "_body" } }, 0 },
	[JF_TL_LENGTH] = { { { "ThreadsList", "_length" } }, 0 },
	[JF_TL_THREADS] = { { { "ThreadsList", "_threads" } }, 0 },
	[JF_JT_OSTHREAD] = { { { "JavaThread", "_osthread" }, { "Thread", "_osthread" } }, 0 },
	[JF_OS_TID] = { { { "OSThread", "_thread_id" } }, 0 },
	[JF_JT_OBJ] = { { { "JavaThread", "_threadObj" } }, 0 },
	[JF_OH_OBJ] = { { { "OopHandle", "_obj" } }, 0 },
	[JF_IK_FIELDS] = { { { "InstanceKlass", "_fields" } }, 0 },
	[JF_IK_NFIELDS] = { { { "InstanceKlass", "_java_fields_count" } }, 0 },
	[JF_IK_FIELDSTREAM] = { { { "InstanceKlass", "_fieldinfo_stream" } }, 0 },
	[JF_FLAG_NAME] = { { { "JVMFlag", "_name" } }, 0 },
	[JF_FLAG_ADDR] = { { { "JVMFlag", "_addr" } }, 0 },
};

static const char *const type_wants[JT_N] = {
	[JT_HEAPBLOCK] = "HeapBlock",
	[JT_CONSTMETHOD] = "ConstMethod",
	[JT_CONSTANTPOOL] = "ConstantPool",
	[JT_PCDESC] = "PcDesc",
	[JT_FLAG] = "JVMFlag",
};

static const char *const const_wants[JC_N][2] = {
	[JC_KIND_NMETHOD] = { "CodeBlobKind::Nmethod" },
	[JC_HAS_LINES] = { "ConstMethodFlags::_misc_has_linenumber_table", "ConstMethod::_has_linenumber_table" },
	[JC_SENDER_SP] = { "frame::interpreter_frame_sender_sp_offset" },
};

int pt__jvm_cstr(struct pt_jvm *j, uint64_t addr, char *buf, size_t len)
{
	size_t got = 0;

	if (!len)
		return -EFAULT;
	/* A page at a time: the string may end just before an unmapped one. */
	while (got + 1 < len) {
		uint64_t at = addr + got;
		size_t n = PT_MEM_PAGE - (size_t)(at % PT_MEM_PAGE);
		char *nul;

		if (n > len - 1 - got)
			n = len - 1 - got;
		if (pt__jvm_read(j, at, buf + got, n))
			return -EFAULT;
		if ((nul = memchr(buf + got, 0, n)))
			return (int)(nul - buf);
		got += n;
	}
	buf[got] = 0;
	return (int)got;
}

/* One table being walked: its entries read CHUNK at a time. */
struct table {
	uint64_t at, stride;
	uint8_t *buf;            /* CHUNK entries */
	uint64_t first, n;       /* the entries in buf: [first, first + n) */
};

/* Entry i of the table, or NULL if it cannot be read. */
static const uint8_t *entry(struct pt_jvm *j, struct table *t, uint64_t i)
{
	if (i < t->first || i >= t->first + t->n) {
		t->first = i;
		t->n = CHUNK;
		/* The table's end may lie close to its mapping's: what a whole
		 * chunk cannot read, one entry can. */
		if (pt__jvm_read(j, t->at + i * t->stride, t->buf, CHUNK * t->stride)) {
			t->n = 1;
			if (pt__jvm_read(j, t->at + i * t->stride, t->buf, t->stride)) {
				t->n = 0;
				return NULL;
			}
		}
	}
	return t->buf + (i - t->first) * t->stride;
}

/* Checks the stride and that each offset's field (8 bytes) fits in it. */
static int table_ok(uint64_t stride, const uint64_t *off, int n)
{
	if (stride < 8 || stride > MAX_STRIDE || stride % 4)
		return 0;
	for (int i = 0; i < n; i++)
		if (off[i] > stride - 8)
			return 0;
	return 1;
}

static int name_is(const char *a, const char *b)
{
	return b && !strcmp(a, b);
}

/* The width of a field typed ts, if a pointer (8); 0 until the types
 * table gives it. */
static uint32_t pointer_width(const char *ts)
{
	size_t n = strlen(ts);

	return n && ts[n - 1] == '*' ? 8 : 0;
}

static int read_structs(struct pt_jvm *j, const uint64_t *v, uint8_t *buf, char (*tstr)[MAX_NAME])
{
	uint64_t off[5] = { v[S_S_TYPE], v[S_S_FIELD], v[S_S_TSTRING], v[S_S_OFFSET], v[S_S_ADDRESS] };
	struct table t = { v[S_STRUCTS], v[S_S_STRIDE], buf, 0, 0 };
	uint64_t last_type = 0;
	int last_match = 0;
	char type[MAX_NAME] = "";

	if (!table_ok(t.stride, off, 5) || t.stride < 4 || v[S_S_STATIC] > t.stride - 4)
		return -EBADMSG;
	for (uint64_t i = 0; i < MAX_ENTRIES; i++) {
		const uint8_t *e = entry(j, &t, i);
		char field[MAX_NAME];
		uint64_t tn;
		int is_static;

		if (!e)
			return -EFAULT;
		if (!(tn = pt__rd64(e + off[0])))
			return 0;   /* the end */
		/* Entries of one type share its name's string: read once. */
		if (tn != last_type) {
			last_type = tn;
			last_match = 0;
			if (pt__jvm_cstr(j, tn, type, sizeof(type)) < 0)
				continue;
			for (int k = 0; k < JF_N && !last_match; k++)
				for (int a = 0; a < 3; a++)
					last_match |= name_is(type, wants[k].n[a].type);
		}
		if (!last_match || pt__jvm_cstr(j, pt__rd64(e + off[1]), field, sizeof(field)) < 0)
			continue;
		is_static = pt__rd32(e + v[S_S_STATIC]) != 0;
		for (int k = 0; k < JF_N; k++) {
			struct pt__jvm_field *f = &j->f[k];

			if (f->found || is_static != wants[k].is_static)
				continue;
			for (int a = 0; a < 3 && wants[k].n[a].type; a++) {
				if (!name_is(type, wants[k].n[a].type) || !name_is(field, wants[k].n[a].field))
					continue;
				f->v = is_static ? pt__rd64(e + off[4]) : pt__rd64(e + off[3]);
				if (!is_static && f->v >= MAX_FIELD_OFFSET)
					return -EBADMSG;
				f->found = 1;
				tstr[k][0] = 0;
				if (pt__jvm_cstr(j, pt__rd64(e + off[2]), tstr[k], MAX_NAME) < 0)
					tstr[k][0] = 0;
				f->width = pointer_width(tstr[k]);
				break;
			}
		}
	}
	return -EBADMSG;   /* no end */
}

static int read_types(struct pt_jvm *j, const uint64_t *v, uint8_t *buf, char (*tstr)[MAX_NAME])
{
	uint64_t off[2] = { v[S_T_NAME], v[S_T_SIZE] };
	struct table t = { v[S_TYPES], v[S_T_STRIDE], buf, 0, 0 };

	if (!table_ok(t.stride, off, 2))
		return -EBADMSG;
	for (uint64_t i = 0; i < MAX_ENTRIES; i++) {
		const uint8_t *e = entry(j, &t, i);
		char name[MAX_NAME];
		uint64_t tn, size;

		if (!e)
			return -EFAULT;
		if (!(tn = pt__rd64(e + off[0])))
			return 0;
		size = pt__rd64(e + off[1]);
		if (size > MAX_TYPE_SIZE || pt__jvm_cstr(j, tn, name, sizeof(name)) < 0)
			continue;
		for (int k = 0; k < JT_N; k++)
			if (!j->tsize[k] && name_is(name, type_wants[k]))
				j->tsize[k] = size;
		/* The widths of the fields of this type (integers: "int",
		 * "u2", "int16_t", "CodeBlobKind"...). */
		for (int k = 0; k < JF_N; k++)
			if (j->f[k].found && !j->f[k].width && size <= 8 && !strcmp(tstr[k], name))
				j->f[k].width = (uint32_t)size;
	}
	return -EBADMSG;
}

static int read_ints(struct pt_jvm *j, const uint64_t *v, uint8_t *buf)
{
	uint64_t off[1] = { v[S_I_NAME] };
	struct table t = { v[S_INTS], v[S_I_STRIDE], buf, 0, 0 };

	/* the value is an int32 */
	if (!table_ok(t.stride, off, 1) || v[S_I_VALUE] > t.stride - 4)
		return -EBADMSG;
	for (uint64_t i = 0; i < MAX_ENTRIES; i++) {
		const uint8_t *e = entry(j, &t, i);
		char name[MAX_NAME];
		uint64_t nm;

		if (!e)
			return -EFAULT;
		if (!(nm = pt__rd64(e + off[0])))
			return 0;
		if (pt__jvm_cstr(j, nm, name, sizeof(name)) < 0)
			continue;
		for (int k = 0; k < JC_N; k++)
			if (!(j->have_c & (1u << k)) &&
			    (name_is(name, const_wants[k][0]) || name_is(name, const_wants[k][1]))) {
				j->c[k] = (int32_t)pt__rd32(e + v[S_I_VALUE]);
				j->have_c |= 1u << k;
			}
	}
	return -EBADMSG;
}

/* What podprof cannot do without: 1 with the first missing named in
 * buf, else 0. */
static int missing(const struct pt_jvm *j, char *buf, size_t len)
{
	static const enum pt__jvm_f need[] = {
		JF_S_HEAPS, JF_S_CC_LOW, JF_S_CC_HIGH, JF_S_INTERP, JF_S_CALL_STUB_RET, JF_S_MAJOR,
		JF_GA_LEN, JF_GA_DATA, JF_HEAP_MEMORY, JF_HEAP_SEGMAP, JF_HEAP_LOG2, JF_VS_LOW,
		JF_VS_HIGH, JF_HB_USED, JF_SQ_BUFFER, JF_SQ_LIMIT, JF_CB_NAME, JF_CB_SIZE,
		JF_CB_FRAME_SIZE, JF_CB_FCO, JF_NM_METHOD, JF_M_CONST, JF_CM_CONSTANTS,
		JF_CM_CODE_SIZE, JF_CM_NAME, JF_CM_SIG, JF_CP_HOLDER, JF_CP_LENGTH, JF_IK_CONSTANTS,
		JF_K_NAME, JF_SYM_LENGTH, JF_SYM_BODY,
	};

	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		enum pt__jvm_f k = need[i];
		/* fields read as integers or pointers need their width */
		int whole = k == JF_HEAP_MEMORY || k == JF_HEAP_SEGMAP || k == JF_SYM_BODY;

		if (!j->f[k].found || (!wants[k].is_static && !whole && !j->f[k].width)) {
			snprintf(buf, len, "%s::%s", wants[k].n[0].type, wants[k].n[0].field);
			return 1;
		}
	}
	if (!(j->f[JF_CB_CODE_BEGIN].found && j->f[JF_CB_CODE_END].found) &&
	    !(j->f[JF_CB_CODE_OFFSET].found && j->f[JF_CB_DATA_OFFSET].found)) {
		snprintf(buf, len, "CodeBlob::_code_begin");
		return 1;
	}
	/* 23 on: a blob's kind says which is an nmethod (the names of 17-22 do) */
	if (j->f[JF_CB_CODE_OFFSET].found &&
	    !(j->f[JF_CB_KIND].found && j->f[JF_CB_KIND].width && (j->have_c & (1u << JC_KIND_NMETHOD)))) {
		snprintf(buf, len, "CodeBlob::_kind");
		return 1;
	}
	for (int k = 0; k < JT_N; k++)
		if (k != JT_FLAG && k != JT_PCDESC && (!j->tsize[k] || j->tsize[k] > 4096)) {
			snprintf(buf, len, "the size of %s", type_wants[k]);
			return 1;
		}
	return 0;
}

/* Bytes of a blob read at once: up to the last field of its header (the
 * first `header` of the list) or of an nmethod's that podprof reads. */
static size_t blob_len(const struct pt_jvm *j, int header)
{
	static const enum pt__jvm_f blob[] = {
		JF_CB_NAME, JF_CB_SIZE, JF_CB_FRAME_SIZE, JF_CB_FCO, JF_CB_CODE_BEGIN, JF_CB_CODE_END,
		JF_CB_CODE_OFFSET, JF_CB_DATA_OFFSET, JF_CB_KIND, JF_CB_MUTABLE, JF_CB_RELOC_SIZE,
		JF_NM_METHOD, JF_NM_COMPILE_ID, JF_NM_PCS, JF_NM_DEPS, JF_NM_METADATA,
		JF_NM_SCOPES_BEGIN, JF_NM_IMMUTABLE, JF_NM_SCOPES,
	};
	size_t len = 0, n = header ? 11 : sizeof(blob) / sizeof(blob[0]);

	for (size_t i = 0; i < n; i++)
		if (j->f[blob[i]].found && j->f[blob[i]].v + 8 > len)
			len = j->f[blob[i]].v + 8;
	return len;
}

int pt__jvm_tables_read(struct pt_jvm *j, const uint64_t *sym, char *why, size_t len)
{
	uint64_t v[PT__JVM_NSYMS];
	char (*tstr)[MAX_NAME] = NULL, gone[160];
	uint8_t *buf = NULL;
	int32_t major;
	int err;

	why[0] = 0;
	memset(j->f, 0, sizeof(j->f));
	memset(j->tsize, 0, sizeof(j->tsize));
	j->have_c = 0;
	for (int i = 0; i < PT__JVM_NSYMS; i++)
		if (!sym[i] || pt__jvm_word(j, sym[i], &v[i])) {
			snprintf(why, len, "%s cannot be read", pt__jvm_sym_names[i]);
			return -EFAULT;
		}
	if (!v[S_STRUCTS] || !v[S_TYPES] || !v[S_INTS] || !v[S_S_STRIDE]) {
		snprintf(why, len, "its VMStructs are not set up yet (a JVM starting)");
		return -EAGAIN;
	}
	if (!(buf = base_malloc(CHUNK * MAX_STRIDE)) || !(tstr = base_calloc(JF_N, sizeof(*tstr)))) {
		err = -ENOMEM;
		goto out;
	}
	if ((err = read_structs(j, v, buf, tstr)) || (err = read_types(j, v, buf, tstr)) ||
	    (err = read_ints(j, v, buf))) {
		snprintf(why, len, "its VMStructs tables %s", err == -EFAULT ? "cannot be read" :
			 "are not what they should be");
		goto out;
	}
	if (missing(j, gone, sizeof(gone))) {
		snprintf(why, len, "its VMStructs lack %s, which podprof needs", gone);
		err = -ENOENT;
		goto out;
	}
	if (pt__jvm_read(j, j->f[JF_S_MAJOR].v, &major, sizeof(major)) || major < 9 || major > 99) {
		snprintf(why, len, "its release cannot be read");
		err = -EBADMSG;
		goto out;
	}
	j->major = major;
	/* JDK 20 made the compressed streams' bytes UNSIGNED5, which excludes
	 * the zero byte (JDK-8292758): each byte is one more than before. */
	j->ux = major >= 20;
	j->blob_len = blob_len(j, 0);
	j->head_len = blob_len(j, 1);
	if (j->blob_len > PT__JVM_BLOB_MAX) {
		snprintf(why, len, "its code blobs are larger than podprof reads");
		err = -EBADMSG;
		goto out;
	}
	err = 0;
out:
	base_free(buf);
	base_free(tstr);
	return err;
}
