/* The JVM's code cache read from outside (see jvm.h): its heaps, the
 * code blob holding a pc (through each heap's segment map, as HotSpot's
 * CodeHeap::find_blob does), and what a blob says of itself: its code,
 * its frame size, its kind, an nmethod's Method* and compile id.
 * Sampler thread only. */
#ifndef PT_JVM_CODECACHE_H
#define PT_JVM_CODECACHE_H

#include <stddef.h>
#include <stdint.h>

#include "ptrace/runtimes/jvm/state.h"

enum pt__jvm_kind {
	PT__JVM_STUB,       /* stubs, adapters, runtime stubs, the call stub */
	PT__JVM_NMETHOD,    /* compiled Java (and native methods' wrappers) */
	PT__JVM_INTERP,     /* the interpreter's code */
};

/* A code blob as read. */
struct pt__jvm_blob {
	uint64_t addr;
	uint64_t code_begin, code_end;   /* its instructions */
	uint64_t name;                   /* the address of its name (libjvm's text) */
	int frame_size;                  /* words, <= 0: none */
	int fco;                         /* frame complete offset from code_begin, -1: none */
	enum pt__jvm_kind kind;
	uint64_t method;                 /* nmethod: its Method* */
	int64_t compile_id;              /* nmethod: its compile id (0: unknown) */
	uint8_t raw[PT__JVM_BLOB_MAX];   /* the blob's first len bytes */
	size_t len;
};

/* Reads the code cache's bounds, heaps, the interpreter's code and the
 * call stub's return address. Returns 0, -EAGAIN (the JVM has not set
 * them up yet), -EFAULT or -EBADMSG (they are not what they must be). */
int pt__jvm_cache_read(struct pt_jvm *j);

/* The blob holding pc into *b. Returns 0, -ENOENT (no blob holds it),
 * -EFAULT, -EBADMSG (the heap's map or the blob is not what it must be). */
int pt__jvm_blob_find(struct pt_jvm *j, uint64_t pc, struct pt__jvm_blob *b);

/* 1 if pc lies in the code cache, else 0. */
static inline int pt__jvm_in_cache(const struct pt_jvm *j, uint64_t pc)
{
	return pc >= j->cc_lo && pc < j->cc_hi;
}

#endif
