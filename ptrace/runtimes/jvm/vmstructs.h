/* HotSpot's VMStructs tables, read in the target's memory (see jvm.h):
 * the entries podprof uses (state.h's JF_*, JT_*, JC_*), found by name
 * among the thousands each release has, with the other names a release
 * gives some of them. Sampler thread only. */
#ifndef PT_JVM_VMSTRUCTS_H
#define PT_JVM_VMSTRUCTS_H

#include <stddef.h>
#include <stdint.h>

struct pt_jvm;

/* The symbols libjvm.so exports that describe the tables, in the order
 * pt__jvm_tables_read takes their addresses: each is a uint64_t (a table's
 * address, an entry's size or a field's offset in an entry), set by
 * libjvm's initializers, so read from memory (the file holds zeros). */
#define PT__JVM_NSYMS 16
extern const char *const pt__jvm_sym_names[PT__JVM_NSYMS];

/* Reads the tables whose symbols are at sym[0..PT__JVM_NSYMS) (runtime
 * addresses) into j's f, tsize, c and have_c, and j's release (major, ux,
 * blob_len). Returns 0; -EAGAIN if they are not set yet (a JVM starting);
 * -EFAULT if they cannot be read; -EBADMSG if they are not what VMStructs
 * are (an entry size or offset out of bounds, no end); -ENOENT if an entry
 * podprof needs is missing (a release it cannot read); -ENOMEM. why[0..len)
 * says which. */
int pt__jvm_tables_read(struct pt_jvm *j, const uint64_t *sym, char *why, size_t len);

/* The NUL-terminated string at addr into buf[0..len) (cut to fit). Returns
 * its length or -EFAULT. */
int pt__jvm_cstr(struct pt_jvm *j, uint64_t addr, char *buf, size_t len);

#endif
