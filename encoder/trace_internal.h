/* Helpers shared by the trace writers (encoder/ only, STYLE H1): a bounded
 * output buffer, varints, a string table, a u64 map, and the events of each
 * thread in time order. Any thread; no locking. */
#ifndef ENC_TRACE_INTERNAL_H
#define ENC_TRACE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "encoder/trace.h"

/* An output buffer of at most max bytes; the first failure sticks in err
 * (-E2BIG past max, -ENOMEM) and later writes do nothing. */
struct enc__ob {
	uint8_t *data;
	size_t len, cap, max;
	int err;
};
void enc__ob_init(struct enc__ob *ob, size_t max);
void enc__ob_put(struct enc__ob *ob, const void *p, size_t n);
void enc__ob_byte(struct enc__ob *ob, uint8_t b);
void enc__ob_uvarint(struct enc__ob *ob, uint64_t v);
void enc__ob_printf(struct enc__ob *ob, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as the inside of a JSON string: quotes, backslashes and control
 * characters escaped, bytes that are not UTF-8 replaced by U+FFFD. */
void enc__ob_json_str(struct enc__ob *ob, const char *s);
/* Hands the bytes over (caller frees). Returns 0 or the buffer's error. */
int enc__ob_finish(struct enc__ob *ob, uint8_t **out, size_t *len);
void enc__ob_free(struct enc__ob *ob);

/* Writes v as an unsigned LEB128 varint into buf (10 bytes at most).
 * Returns its length. */
size_t enc__uvarint(uint8_t *buf, uint64_t v);

/* Distinct strings by content, with ids 1, 2, ... in order of first sight;
 * "" and NULL are 0. The table keeps copies. */
struct enc__strtab {
	const char **keys;       /* open addressing, cap a power of two */
	uint32_t *ids;
	size_t cap, used;
	int err;
};
/* The id of s (0 if memory ran out: see err); *fresh is set at first sight. */
uint64_t enc__strtab_id(struct enc__strtab *t, const char *s, int *fresh);
void enc__strtab_free(struct enc__strtab *t);

/* A map from u64 to u64. */
struct enc__u64map {
	uint64_t *keys, *vals;   /* keys stored + 1: 0 marks a free slot */
	size_t cap, used;
};
/* Returns 1 and sets *v if k is there, else 0. */
int enc__u64map_get(const struct enc__u64map *m, uint64_t k, uint64_t *v);
/* Returns 0 or -ENOMEM. */
int enc__u64map_put(struct enc__u64map *m, uint64_t k, uint64_t v);
void enc__u64map_free(struct enc__u64map *m);

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
