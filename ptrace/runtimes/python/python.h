/* CPython's own frames (3.11 to 3.15), read from outside the interpreter:
 * which Python function, file and line each native _PyEval_EvalFrameDefault
 * frame is running. The interpreter is found by its exported symbols
 * (_PyRuntime, Py_Version) or its .PyRuntime section; struct layouts come
 * from a table of ours per release for 3.11 and 3.12, and from the
 * interpreter's own table of offsets (_Py_DebugOffsets, read through a
 * descriptor of ours per minor release) from 3.13 on. A release podprof
 * has no table or descriptor for is never guessed at (the target is
 * profiled natively, and the answers say so). Everything read from the target is untrusted: every pointer
 * is read through a bounded copy, every chain walk is capped, and a lying
 * structure gives a short or native-only stack, never a crash or a loop.
 *
 * Per sample, in two steps:
 *   - pt_py_capture, while the thread is stopped (right after the stack
 *     copy): the thread's frame chain, which changes as soon as it runs,
 *     as (code object, instruction) pairs: two process_vm_readv calls
 *     (the thread state, then the top of its frame stack) in the usual case;
 *   - pt_py_merge, after it resumed: code objects, names and line tables
 *     (immutable once created) are read and cached by address, and each
 *     native eval frame of the unwound stack is replaced by a token standing
 *     for its Python frames (innermost first). A token is an address no
 *     user-space code can have (PT_PY_TOKEN_BASE), so stack tables, caches
 *     and every endpoint carry it like any frame; pt_py_lines names it.
 *
 * This header holds the types the parts share with their callers; the
 * parts are interp.h (the handle, detection, the per-release
 * layouts), offsets.h (3.13 on: the layout from _Py_DebugOffsets), frames.h (the reads of a stop, the tokens after it) and
 * names.h (what a token names). Sampler thread only, except the pure
 * functions pt_py_layout_find, pt_py_layout_from_table, pt_py_jumps_out
 * and pt_py_addr2line, which any thread may call. */
#ifndef PT_PYTHON_H
#define PT_PYTHON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/core/runtime.h"

struct pt_capture;
struct pt_maps;
struct pt_mem;
struct pt_modules;
struct pt_py;

/* Where the layout of one CPython release puts what we read (byte offsets).
 * 3.11 and 3.12: a table of ours per release (interp.c), facts from their
 * headers (Include/internal/pycore_runtime.h, pycore_interp.h,
 * pycore_frame.h, Include/cpython/pystate.h, code.h, unicodeobject.h,
 * bytesobject.h). 3.13 and later: built from the target's own table of
 * offsets, _Py_DebugOffsets (offsets.c). */
struct pt_py_layout {
	uint16_t version;          /* 0x030b: major << 8 | minor */
	const char *name;          /* "3.11" */
	int tested;                /* checked against a real interpreter here */
	unsigned int flags;        /* PT_PY_L_* */
	/* _PyRuntimeState */
	uint16_t rt_interp_head;   /* interpreters.head */
	/* PyInterpreterState */
	uint16_t is_next, is_threads_head;
	/* PyThreadState; ts_size: the bytes read, covering the fields below.
	 * The innermost frame: through the _PyCFrame at ts_cframe (3.11,
	 * 3.12: PT_PY_L_CFRAME), else at ts_current_frame. ts_base_frame
	 * (3.15; 0: none): the pointer to the thread's sentinel frame, where
	 * every whole chain ends. */
	uint16_t ts_next, ts_native_tid, ts_cframe, ts_current_frame, ts_base_frame;
	uint16_t ts_chunk, ts_top, ts_limit, ts_size;
	/* _PyCFrame */
	uint16_t cf_current_frame, cf_previous;
	/* _PyInterpreterFrame (fr_size: the bytes read, up to its localsplus
	 * at most). fr_code: f_code (3.11, 3.12), f_executable (3.13 on; a
	 * tagged reference from 3.14: PT_PY_L_TAGGED); fr_prev_instr:
	 * prev_instr (3.11, 3.12), instr_ptr (3.13 on). An eval call's first
	 * frame is marked: 3.11 sets its is_entry (fr_is_entry, 0: none);
	 * 3.12 on link it to a frame on the C stack whose owner is
	 * owner_cstack or more (0xff: none), a marker that is not shown. */
	uint16_t fr_code, fr_previous, fr_prev_instr, fr_is_entry, fr_owner, fr_size;
	uint8_t owner_cstack;
	/* PyCodeObject; co_code: co_code_adaptive, the first code unit (the
	 * bytes read of a code object: every co_ field lies below it) */
	uint16_t co_firstlineno, co_filename, co_name, co_qualname, co_linetable, co_code;
	/* PyObject's ob_type */
	uint16_t ob_type;
	/* PyASCIIObject / PyCompactUnicodeObject, PyBytesObject */
	uint16_t str_length, str_state, str_ascii_data, str_compact_data;
	uint16_t bytes_size, bytes_data;
	/* _PyStackChunk: where its frames start */
	uint16_t chunk_data;
};
#define PT_PY_L_CFRAME 0x1u        /* the innermost frame through a _PyCFrame */
#define PT_PY_L_TAGGED 0x2u        /* f_executable is a _PyStackRef: its low 2 bits a tag */

/* Tokens: values in frames[] that stand for Python frames (the runtimes'
 * tokens, ptrace/core/runtime.h: a handle's are those of its table row,
 * row 0 unless set). */
#define PT_PY_TOKEN_BASE PT_RT_TOKEN_BASE
static inline int pt_py_is_token(uint64_t a)
{
	return pt_rt_is_token(a);
}

/* Caps. */
#define PT_PY_EVAL_PARTS 4         /* _PyEval_EvalFrameDefault's code ranges (its split parts) */
#define PT_PY_MAX_FRAMES 128       /* Python frames read per sample */
#define PT_PY_MAX_FAR_READS 8      /* frames outside the frame stack copy (generators) */
#define PT_PY_BULK_BYTES 16384     /* most of the frame stack copied per sample */

/* One Python frame as read during a stop. */
struct pt_py_raw {
	uint64_t code;             /* PyCodeObject address */
	uint64_t instr;            /* prev_instr (instr_ptr from 3.13): address of a code unit */
	uint8_t flags;             /* PT_PY_RAW_* */
};
#define PT_PY_RAW_ENTRY 0x1u       /* the outermost frame of its eval call (shown) */
#define PT_PY_RAW_MARK  0x2u       /* a marker between eval calls (3.12: not shown) */

/* A thread's frame chain as read during a stop. */
struct pt_py_cap {
	int n;                     /* frames in f (0: none read) */
	int truncated;             /* a cap or a failed read ended the walk */
	struct pt_py_raw f[PT_PY_MAX_FRAMES];
};

/* One Python frame of a token, as pt_py_lines gives it. */
struct pt_py_line {
	const char *func;          /* co_qualname ("Class.method", "<module>") */
	const char *file;          /* co_filename */
	int line;                  /* 0: unknown */
	int start_line;            /* co_firstlineno */
};

/* What detection found. */
enum pt_py_state {
	PT_PY_NONE = 0,            /* not a CPython process (or none found yet) */
	PT_PY_ACTIVE,              /* a known release: frames are read */
	PT_PY_UNSUPPORTED,         /* CPython, but not readable: a release podprof does not
	                            * know, a free-threaded build (detection's note says) */
};

/* Counters, for the log and tests. */
struct pt_py_stats {
	uint64_t captures, frames, far_reads, stale, code_reads, tokens, full;
	uint64_t unlinked;   /* captures that read the caller's chain (see pt_py_capture) */
	/* Samples whose chain was merged, and of them those that lack some of
	 * their Python frames: the chain cut by a read that failed (torn
	 * while read, or a lie) or by a cap, or a frame's code unreadable;
	 * their eval calls concerned keep the native frame. */
	uint64_t merged, torn;
};

/* Tests and fuzzing: a memory image instead of the target's. fn returns 0
 * when [addr, addr + len) was read whole. */
typedef int (*pt_py_read_fn)(void *arg, uint64_t addr, void *dst, size_t len);

/* CPython as a runtime of ptrace/runtimes/'s table (python.c). */
extern const struct pt_runtime_ops pt_runtime_python;

#endif
