/* What the parts of the CPython reader share, inside ptrace/ only (CONVENTIONS
 * H1; python.h and each part's header are the public side): the handle,
 * with the caches that the names of Python frames live in, and the one
 * read of target memory they all make. Types only. The parts (python.h
 * names them: the handle's life and detection, the reads of a stop, what a
 * token names) share it; none of them calls back into another.
 * Sampler thread only. */
#ifndef PT_PYTHON_STATE_H
#define PT_PYTHON_STATE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "base/map.h"
#include "ptrace/runtimes/python/python.h"

/* One resolved Python frame of a token: the string pool offsets of its
 * function and file, its line and its function's first line. */
struct pt__py_frame {
	uint32_t func, file;
	int32_t line, start;
};

struct pt__py_code;    /* a cached code object (names.c) */
struct pt__py_group;   /* a token's frames (names.c) */

struct pt_py {
	pid_t pid;
	struct pt_mem *mem;
	enum pt_py_state state;
	const struct pt_py_layout *L;   /* &lay once active, else NULL */
	struct pt_py_layout lay;        /* the release's (a copy of a table's row, or offsets.c's) */
	uint32_t version;
	uint64_t runtime, code_type;
	/* _PyEval_EvalFrameDefault's code: its symbol's range, then the parts
	 * the compiler split off it (interp.c) */
	uint64_t eval[PT_PY_EVAL_PARTS][2];
	int neval;
	/* names.c's caches, kept until the handle is reset */
	struct pt__py_code *codes;      /* in order of first read, MAX_CODES at most */
	size_t ncodes, codes_cap;
	struct base_map code_index;     /* a code object's address (never 0) -> its index */
	char *pool;                     /* NUL-terminated strings */
	size_t pool_len, pool_cap;
	struct base_map strs;           /* hash of a string -> its offset in pool */
	struct pt__py_frame *gf;        /* every group's frames */
	size_t ngf, gf_cap;
	struct pt__py_group *groups;    /* by id: a token is token_base + id */
	uint64_t token_base;            /* PT_PY_TOKEN_BASE, or its runtime row's (python.c) */
	size_t ngroups, groups_cap;
	struct base_map gidx;           /* hash of a group's frames -> its id */
	uint8_t bulk[PT_PY_BULK_BYTES]; /* the top of a thread's frame stack, per stop */
	pt_py_read_fn read;             /* tests and fuzzing: memory other than the target's */
	void *read_arg;
	struct pt_py_stats st;
};

/* One read of the running (or stopped) target, whole or nothing: one
 * process_vm_readv, or the reader a test or fuzzer set. Returns 0 or
 * -EFAULT. */
static inline int pt__py_read(struct pt_py *py, uint64_t addr, void *dst, size_t len)
{
	struct iovec local = { dst, len }, remote = { (void *)(uintptr_t)addr, len };

	if (py->read)
		return py->read(py->read_arg, addr, dst, len) ? -EFAULT : 0;
	return process_vm_readv(py->pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

/* 1 if addr lies in _PyEval_EvalFrameDefault's code (one native frame per
 * eval call). */
static inline int pt__py_is_eval(const struct pt_py *py, uint64_t addr)
{
	for (int i = 0; i < py->neval; i++)
		if (addr >= py->eval[i][0] && addr < py->eval[i][1])
			return 1;
	return 0;
}

#endif
