/* Helpers shared by the trace writers (encoder/ only, CONVENTIONS H1): varints
 * and JSON strings appended to a base_buf, a string table, and the events
 * of each thread in time order. Any thread; no locking. */
#ifndef ENC_TRACE_UTIL_H
#define ENC_TRACE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "base/map.h"
#include "encoder/trace.h"

struct base_buf;

/* Appends v as an unsigned LEB128 varint. A failure sticks in ob->err. */
void enc__ob_uvarint(struct base_buf *ob, uint64_t v);
/* Appends s as the inside of a JSON string: quotes, backslashes and control
 * characters escaped, and < > & (so that it may sit inside an HTML script
 * element), bytes that are not UTF-8 replaced by U+FFFD. A failure sticks
 * in ob->err. */
void enc__ob_json_str(struct base_buf *ob, const char *s);

/* Writes v as an unsigned LEB128 varint into buf (10 bytes at most).
 * Returns its length. */
size_t enc__uvarint(uint8_t *buf, uint64_t v);

/* Distinct strings by content, with ids 1, 2, ... in order of first sight;
 * "" and NULL are 0. The table keeps copies. Zero-initialised is empty. */
struct enc__strtab {
	char **strs;             /* the copies: id i + 1 is strs[i] */
	size_t n, cap;
	struct base_map index;   /* hash of a string -> its place in strs */
	int err;                 /* the first failure (-ENOMEM, -E2BIG), or 0 */
};
/* The id of s (0 if memory ran out: see err); *fresh is set at first sight. */
uint64_t enc__strtab_id(struct enc__strtab *t, const char *s, int *fresh);
void enc__strtab_free(struct enc__strtab *t);

/* The events of each thread, stably sorted by time: thread i's are
 * ev[first[i] .. first[i+1]); RSS events go with thread 0 (with P 0). */
struct enc__buckets {
	uint32_t *ev;
	size_t *first;
};
/* Returns 0, -EINVAL (an event names no thread, or a stack out of range)
 * or -ENOMEM. */
int enc__buckets_by_thread(struct enc__buckets *b, const struct enc_trace *tr);
void enc__buckets_free(struct enc__buckets *b);

#endif
