/* What a Java frame's token names (see jvm.h): a Method read once and
 * cached by address (checked again each second: a class unloaded frees
 * its methods), as its class, name, signature, source file and line
 * table; a token per (method, line) or per stub's name, kept until the
 * handle is reset. Sampler thread only, but for the pure functions, which
 * any thread may call. */
#ifndef PT_JVM_METHODS_H
#define PT_JVM_METHODS_H

#include <stddef.h>
#include <stdint.h>

struct pt_jvm;
struct pt_rt_line;

/* The index of the resolved Method at addr, read now if not cached (or
 * cached over a second ago and since changed), or -1 if addr is no Method
 * (its pool's class does not point back at its pool, a name is out of
 * its pool...). Valid until the next call. */
long pt__jvm_method(struct pt_jvm *j, uint64_t addr);
/* The bytecode index of bcp in method m, or -1 if it is none of its
 * bytecodes. */
int pt__jvm_bci(const struct pt_jvm *j, long m, uint64_t bcp);
/* The id of the token of method m at bytecode bci (-1: unknown), made if
 * new, or -1 when the tokens are full. */
long pt__jvm_frame(struct pt_jvm *j, long m, int bci);
/* The id of the token of a stub or adapter whose name (a string of
 * libjvm's) is at name, or -1. */
long pt__jvm_stub(struct pt_jvm *j, uint64_t name);
/* What token id names: 1 with *out set (strings owned by j until its
 * reset), 0 if there is no such id. */
int pt__jvm_line(const struct pt_jvm *j, uint64_t id, struct pt_rt_line *out);
/* Symbol idx of the constant pool at cp into buf (NUL-terminated, cut to
 * cap - 1). Returns its length or -EFAULT. */
int pt__jvm_pool_symbol(struct pt_jvm *j, uint64_t cp, int64_t idx, char *buf, size_t cap);
/* Forgets every method, token and string. */
void pt__jvm_names_reset(struct pt_jvm *j);

/* An UNSIGNED5 number (HotSpot's compressed streams: up to five bytes, a
 * byte below 192 the last; each byte less ux, the excluded byte: 0 up to
 * JDK 19, 1 from 20) at p[*i..len), *i moved past it. Returns 0 or
 * -EBADMSG. Pure. */
int pt_jvm_u5(const uint8_t *p, size_t len, size_t *i, int ux, uint32_t *out);
/* The line of bytecode bci in a compressed line number table tab[0..len)
 * (pairs of bci and line deltas from (0, 0): a byte 0 ends it, 0xff is
 * followed by two zig-zag UNSIGNED5 deltas, any other byte b is b >> 3
 * and b & 7), as HotSpot's Method::line_number_from_bci finds it: the
 * entry of that bci, else of the greatest below it. *start gets the
 * least line of the table. Returns the line, 0 if unknown, -1 if the
 * table is not one. Pure. */
int pt_jvm_line_of(const uint8_t *tab, size_t len, int ux, int bci, int *start);
/* A class's name as Java users write it ("java.lang.Thread") from its
 * internal name in[0..n) ("java/lang/Thread"), a hidden class's address
 * suffix dropped ("Hot$$Lambda+0x0000000801001000" -> "Hot$$Lambda"), into
 * out[0..cap). Returns its length. Pure. */
size_t pt_jvm_class_name(const char *in, size_t n, char *out, size_t cap);

#endif
