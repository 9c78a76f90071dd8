/* Java threads' names (see jvm.h), as jstack gives them rather than the 15
 * characters the kernel keeps: each JavaThread of the JVM's thread list,
 * its kernel tid (its OSThread's) and its java.lang.Thread's name (a
 * String in the Java heap, through the offsets the classes' field records
 * give), read at most once a second. Sampler thread only, but for the
 * pure function, which any thread may call. */
#ifndef PT_JVM_THREADS_H
#define PT_JVM_THREADS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pt_jvm;

/* The name of the Java thread the target knows as nstid into buf[0..len).
 * Returns 1, or 0 if it is none (or its name cannot be read). */
int pt__jvm_thread_name(struct pt_jvm *j, pid_t nstid, char *buf, size_t len);
/* Forgets the names and what was found of the heap's layout. */
void pt__jvm_threads_reset(struct pt_jvm *j);

/* A Java String's characters s[0..n) (Latin-1 for coder 0, UTF-16LE for
 * coder 1) as UTF-8 into out[0..cap), control characters as '?', cut at
 * a character's end to fit. Returns its length, or -1 for another coder
 * or an odd UTF-16 length. Pure. */
int pt_jvm_string_utf8(const uint8_t *s, size_t n, int coder, char *out, size_t cap);

#endif
