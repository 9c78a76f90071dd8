/* What a compiled pc runs (see jvm.h): the methods the JIT inlined there,
 * innermost first, and the one it compiled last, each at its bytecode,
 * from the nmethod's PcDescs (one per call and safepoint: the one at or
 * after the pc) and its scopes (a chain of method and bci, each naming its
 * sender). Without them (a release whose tables podprof cannot find, or no
 * PcDesc), the compiled method alone. Sampler thread only. */
#ifndef PT_JVM_SCOPES_H
#define PT_JVM_SCOPES_H

#include <stdint.h>

struct pt_jvm;
struct pt__jvm_blob;

/* The token ids of the frames at pc in nmethod b into ids[0..max),
 * innermost first; cached by blob, compile id and pc. Returns how many
 * (0: not even its method could be read). */
int pt__jvm_scopes(struct pt_jvm *j, const struct pt__jvm_blob *b, uint64_t pc, uint64_t *ids, int max);
/* Forgets the cache. */
void pt__jvm_scopes_reset(struct pt_jvm *j);

#endif
