/* HotSpot's Java frames, read from outside the JVM with nothing done to
 * it: no agent, no attach, no file written, no flag needed at its start.
 * libjvm.so exports the description of its own structures that its
 * Serviceability Agent reads (VMStructs: gHotSpotVMStructs, gHotSpotVMTypes
 * and the constants tables, each entry a type or field by name with its
 * offset, size or value), and podprof reads it in the target's memory to
 * find, per release, what it needs: the code cache (its heaps and their
 * segment maps, so the code blob holding a pc), each blob's frame size and
 * kind, an nmethod's Method* and its inlining (PcDescs and scopes), a
 * Method's class, name, signature, source file and line table, and the
 * interpreter's and the call stub's code. docs/runtimes-jvm.md says which
 * entries and why.
 *
 * Per sample, after the thread resumed (nothing is read in the stop, so
 * the kernel's stack copies of perf_event serve as well as ptrace's): the
 * native unwind stops at the first frame in the code cache (the unwinder's
 * JIT range), and the merge walks the Java frames from there over the
 * stack copy (compiled frames by their blob's frame size, interpreted
 * frames by their frame link and the Method* and bcp in their slots, stubs
 * by their blob), hands the native frames above them (the call stub's
 * caller) back to the unwinder, and so on. Each Java frame becomes a token
 * (ptrace/core/runtime.h) of its method and line, named by lines().
 *
 * Everything read from the target is untrusted: each value is checked
 * against what it must be (a Method's pool must point back at it through
 * its class, a pc must lie in its blob's code, frames must go up the
 * stack), every walk and read is bounded, and a lying JVM gives fewer
 * frames, never a crash or a loop.
 *
 * The parts: vmstructs.h (the tables), codecache.h (heaps and blobs),
 * methods.h (names, lines, tokens), scopes.h (inlining), walk.h (the
 * frames), threads.h (Java threads' names); they share state.h. Sampler
 * thread only, except the pure functions the parts' headers say. */
#ifndef PT_JVM_H
#define PT_JVM_H

#include <stddef.h>
#include <stdint.h>

#include "ptrace/core/runtime.h"

struct pt_jvm;
struct pt_space;

extern const struct pt_runtime_ops pt_runtime_jvm;

/* What the reader counted since its process was found. */
struct pt_jvm_stats {
	uint64_t tables_ns;       /* reading VMStructs at detection */
	uint64_t walks;           /* samples that reached Java code */
	uint64_t java_frames;     /* Java frames named */
	uint64_t stub_frames;     /* stubs and adapters named by their blob */
	uint64_t lost;            /* walks that stopped at something they could not read */
	uint64_t heap_reads;      /* the code cache's heaps read (again) */
	uint64_t methods;         /* methods resolved */
};

/* Reads the VMStructs whose symbols are at sym[0..16) (vmstructs.h's
 * order: runtime addresses) into rt, the JVM runtime's state for its
 * process, and makes it active: what detection does once it found
 * libjvm.so (tests give tables of their own). Returns 0 or a negative
 * errno with why[0..len) saying why (see pt__jvm_tables_read). */
int pt_jvm_load(struct pt_rt *rt, const uint64_t *sym, char *why, size_t len);
/* rt's counters. */
void pt_jvm_stats(struct pt_rt *rt, struct pt_jvm_stats *out);

#endif
