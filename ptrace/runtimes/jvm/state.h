/* What the parts of the JVM reader share, inside ptrace/runtimes/jvm/ only
 * (CONVENTIONS H1; jvm.h and each part's header are the public side): the
 * handle, with the layout VMStructs gave, the code cache's heaps, and the
 * caches the names of Java frames live in; and the one read of target
 * memory they all make. Types and inline helpers only. The parts (jvm.c,
 * vmstructs.c, codecache.c, methods.c, scopes.c, walk.c, threads.c) share
 * it; none of them calls back into one that calls it.
 * Sampler thread only. */
#ifndef PT_JVM_STATE_H
#define PT_JVM_STATE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/map.h"
#include "ptrace/runtimes/jvm/jvm.h"
#include "ptrace/space/mem.h"

/* The VMStructs entries podprof reads (vmstructs.c names each, with the
 * other names a release gives it). Statics give an address (JF_S_*),
 * fields an offset. */
enum pt__jvm_f {
	/* statics */
	JF_S_HEAPS,              /* CodeCache::_heaps: GrowableArray<CodeHeap*>* */
	JF_S_CC_LOW,             /* CodeCache::_low_bound, _high_bound: the reserved code */
	JF_S_CC_HIGH,
	JF_S_INTERP,             /* AbstractInterpreter::_code: StubQueue* */
	JF_S_CALL_STUB_RET,      /* StubRoutines::_call_stub_return_address */
	JF_S_MAJOR,              /* Abstract_VM_Version::_vm_major_version: int */
	JF_S_RELEASE,            /* Abstract_VM_Version::_s_vm_release: const char* */
	JF_S_THREADS,            /* ThreadsSMRSupport::_java_thread_list: ThreadsList* */
	JF_S_THREAD_KLASS,       /* vmClasses' Thread and String klasses: InstanceKlass* */
	JF_S_STRING_KLASS,
	JF_S_OOP_BASE,           /* CompressedOops' base and shift */
	JF_S_OOP_SHIFT,
	JF_S_FLAGS,              /* JVMFlag::flags, numFlags */
	JF_S_NFLAGS,
	/* fields */
	JF_GA_LEN, JF_GA_DATA,                         /* GrowableArray */
	JF_HEAP_MEMORY, JF_HEAP_SEGMAP, JF_HEAP_LOG2,   /* CodeHeap */
	JF_VS_LOW, JF_VS_HIGH,                          /* VirtualSpace */
	JF_HB_USED,                                     /* HeapBlock::Header */
	JF_SQ_BUFFER, JF_SQ_LIMIT,                      /* StubQueue */
	JF_CB_NAME, JF_CB_SIZE, JF_CB_FRAME_SIZE, JF_CB_FCO,   /* CodeBlob */
	JF_CB_CODE_BEGIN, JF_CB_CODE_END,               /* pointers (up to 22) */
	JF_CB_CODE_OFFSET, JF_CB_DATA_OFFSET,           /* offsets from the blob (23 on) */
	JF_CB_KIND, JF_CB_MUTABLE, JF_CB_RELOC_SIZE,
	JF_NM_METHOD, JF_NM_COMPILE_ID,                 /* nmethod (CompiledMethod up to 22) */
	JF_NM_PCS, JF_NM_DEPS, JF_NM_METADATA,          /* offsets from the blob (up to 22) */
	JF_NM_SCOPES_BEGIN,                             /* a pointer (up to 22) */
	JF_NM_IMMUTABLE, JF_NM_SCOPES,                  /* 23 on */
	JF_PD_PC, JF_PD_SCOPE,                          /* PcDesc */
	JF_M_CONST,                                     /* Method */
	JF_CM_CONSTANTS, JF_CM_FLAGS, JF_CM_CODE_SIZE, JF_CM_NAME, JF_CM_SIG,   /* ConstMethod */
	JF_CP_HOLDER, JF_CP_SOURCE, JF_CP_LENGTH,       /* ConstantPool */
	JF_IK_CONSTANTS, JF_K_NAME,                     /* InstanceKlass, Klass */
	JF_SYM_LENGTH, JF_SYM_BODY,                     /* Symbol */
	JF_TL_LENGTH, JF_TL_THREADS,                    /* ThreadsList */
	JF_JT_OSTHREAD, JF_OS_TID, JF_JT_OBJ, JF_OH_OBJ,   /* JavaThread, OSThread, OopHandle */
	JF_IK_FIELDS, JF_IK_NFIELDS, JF_IK_FIELDSTREAM, /* a class's fields (17; 21 on) */
	JF_FLAG_NAME, JF_FLAG_ADDR,                     /* JVMFlag */
	JF_N
};

/* Types whose size podprof needs. */
enum pt__jvm_t { JT_HEAPBLOCK, JT_CONSTMETHOD, JT_CONSTANTPOOL, JT_PCDESC, JT_FLAG, JT_N };

/* Integer constants. */
enum pt__jvm_c {
	JC_KIND_NMETHOD,         /* CodeBlobKind::Nmethod (23 on) */
	JC_HAS_LINES,            /* the line table's bit in ConstMethod's flags */
	JC_SENDER_SP,            /* frame::interpreter_frame_sender_sp_offset (words) */
	JC_N
};

struct pt__jvm_field {
	uint64_t v;              /* a static's address, a field's offset */
	uint32_t width;          /* bytes of its type (0: unknown) */
	int found;
};

/* One heap of the code cache: its committed code, and its segment map
 * (a byte per segment of 2^shift bytes, telling how far back its block
 * starts). */
struct pt__jvm_heap {
	uint64_t lo, hi, segmap;
	unsigned int shift;
};
#define PT__JVM_MAX_HEAPS 8
/* Most bytes of a blob read at once (blob_len). */
#define PT__JVM_BLOB_MAX 512u

struct pt__jvm_method;   /* a resolved Method (methods.c) */
struct pt__jvm_frame;    /* what a token names (methods.c) */
struct pt__jvm_chain;    /* a compiled pc's frames (scopes.c) */
struct pt__jvm_names;    /* Java threads' names (threads.c) */

enum pt__jvm_state { PT__JVM_NONE, PT__JVM_UNSUPPORTED, PT__JVM_ACTIVE };

struct pt_jvm {
	struct pt_space *as;
	struct pt_mem *mem;
	unsigned int row;                /* its tokens' row in the runtimes' table */
	enum pt__jvm_state state;
	int major;                       /* the JDK's feature release (17) */
	int ux;                          /* UNSIGNED5's excluded byte: 0 up to JDK 19, 1 from 20 */
	struct pt__jvm_field f[JF_N];
	uint64_t tsize[JT_N];
	int64_t c[JC_N];
	unsigned int have_c;             /* bit per JC_* found */
	size_t blob_len;                 /* bytes of a blob read: its header and nmethod's fields */
	size_t head_len;                 /* ... its header's alone */
	/* the code cache (codecache.c) */
	uint64_t cc_lo, cc_hi;           /* all of it, reserved */
	uint64_t interp_lo, interp_hi, call_stub_ret;
	struct pt__jvm_heap heaps[PT__JVM_MAX_HEAPS];
	int nheaps;
	uint64_t heaps_ns;               /* when they were read (0: never) */
	/* names (methods.c), kept until the handle is reset */
	struct pt__jvm_method *methods;
	size_t nmethods, methods_cap;
	struct base_map method_index;    /* a Method* -> its index + 1 */
	struct pt__jvm_frame *frames;    /* by id: a token is pt_rt_token(row, id) */
	size_t nframes, frames_cap;
	struct base_map frame_index;     /* hash of (method, line) or a stub's name -> id */
	char *pool;                      /* NUL-terminated strings */
	size_t pool_len, pool_cap;
	struct base_map strs;            /* hash of a string -> its offset in pool */
	/* compiled pcs' frames (scopes.c) */
	struct pt__jvm_chain *chains;
	size_t nchains, chains_cap;
	struct base_map chain_index;     /* hash of (blob, compile id, pc) -> index */
	uint32_t *chain_ids;             /* every chain's frame ids */
	size_t nchain_ids, chain_ids_cap;
	uint8_t *scratch;                /* a blob's PcDescs as read */
	size_t scratch_cap;
	/* Java threads' names (threads.c) */
	struct pt__jvm_names *names;
	struct pt_jvm_stats st;
};

/* A read of target memory, whole or nothing (through the space's page
 * cache: only read-only file pages are kept). Returns 0 or -EFAULT. */
static inline int pt__jvm_read(struct pt_jvm *j, uint64_t addr, void *dst, size_t len)
{
	if (!addr || addr + len < addr)
		return -EFAULT;
	return pt_mem_read(j->mem, addr, dst, len) ? -EFAULT : 0;
}

static inline int pt__jvm_word(struct pt_jvm *j, uint64_t addr, uint64_t *v)
{
	return pt__jvm_read(j, addr, v, sizeof(*v));
}

/* An integer field of `width` bytes at off in buf of len bytes (0 if it
 * lies outside), sign-extended where asked. */
static inline int64_t pt__jvm_int(const uint8_t *buf, size_t len, uint64_t off, uint32_t width,
				  int is_signed)
{
	uint8_t b[8] = { 0 };

	if (!width || width > 8 || off > len || len - off < width)
		return 0;
	memcpy(b, buf + off, width);
	if (is_signed && width < 8 && (b[width - 1] & 0x80))
		memset(b + width, 0xff, 8 - width);
	{
		int64_t v;

		memcpy(&v, b, sizeof(v));
		return v;
	}
}

/* The field f of a structure copied into buf (its width as VMStructs
 * typed it, 8 for pointers). */
static inline int64_t pt__jvm_get(const struct pt_jvm *j, enum pt__jvm_f f, const uint8_t *buf,
				  size_t len, int is_signed)
{
	return j->f[f].found ? pt__jvm_int(buf, len, j->f[f].v, j->f[f].width, is_signed) : 0;
}

#endif
