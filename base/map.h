/* The hash map of podprof: non-zero 64-bit keys to 64-bit values, in one
 * table of open addressing with linear probing, a power of two of slots
 * kept at most half full, doubled when it would fill past that (the one
 * probing and resize policy; deletion shifts entries back, leaving no
 * tombstones). Two uses:
 *   - exact keys (a tid, an address + 1): base_map_get / _put / _del;
 *   - keys that are hashes of something larger (a string, a stack): several
 *     values may share a hash, and the caller tells them apart with an
 *     equality callback: base_map_find / _add. The value is usually an
 *     index into the caller's own array of the things hashed.
 * Key 0 is not a key (it marks a free slot): base_hash_* never return it.
 * Any thread; a map has one owner at a time. */
#ifndef BASE_MAP_H
#define BASE_MAP_H

#include <stddef.h>
#include <stdint.h>

struct base_map_slot {
	uint64_t key;          /* 0: free */
	uint64_t val;
};

/* Zero-initialised is an empty map (no allocation until the first put). */
struct base_map {
	struct base_map_slot *slots;
	size_t cap, n;
};

/* Most entries a map may hold (its table stays within 2^32 slots). */
#define BASE_MAP_MAX ((size_t)1 << 31)

/* The value stored under key, or NULL. The pointer is valid until the next
 * change to the map. */
uint64_t *base_map_get(const struct base_map *m, uint64_t key);
/* Stores val under key, replacing what was there. Returns 0, -EINVAL (key
 * 0), -E2BIG (past BASE_MAP_MAX entries) or -ENOMEM (the map unchanged). */
int base_map_put(struct base_map *m, uint64_t key, uint64_t val);
/* Removes key. Returns 0 or -ENOENT. */
int base_map_del(struct base_map *m, uint64_t key);

/* Tells whether the thing behind val is the one the caller looks for. */
typedef int (*base_map_eq_cb)(const void *arg, uint64_t val);
/* The value of the first entry of this hash that eq(arg, value) accepts,
 * or NULL. */
uint64_t *base_map_find(const struct base_map *m, uint64_t hash, base_map_eq_cb eq,
			const void *arg);
/* Adds an entry (hash, val), beside any of the same hash. Returns as
 * base_map_put. */
int base_map_add(struct base_map *m, uint64_t hash, uint64_t val);

/* Makes room for n entries without growing again. Returns as base_map_put. */
int base_map_reserve(struct base_map *m, size_t n);
/* Entries held. */
static inline size_t base_map_count(const struct base_map *m)
{
	return m->n;
}
/* The next entry at or after slot *pos, *pos moved past it; NULL at the
 * end. Start with *pos = 0; the map must not change meanwhile. */
const struct base_map_slot *base_map_next(const struct base_map *m, size_t *pos);
/* Frees the table; the map is empty again. NULL-safe. */
void base_map_free(struct base_map *m);

/* ---- hashing (never 0) ------------------------------------------------------ */

/* FNV-1a over n bytes, continuing from h (start with BASE_HASH_SEED). */
#define BASE_HASH_SEED 0xcbf29ce484222325ull
uint64_t base_hash_bytes(uint64_t h, const void *p, size_t n);
/* The hash of a NUL-terminated string. */
uint64_t base_hash_str(const char *s);
/* Folds one 64-bit word into h (for arrays of words such as stacks). */
static inline uint64_t base_hash_word(uint64_t h, uint64_t w)
{
	h ^= w;
	h *= 0x100000001b3ull;
	h ^= h >> 29;
	return h ? h : 1;
}

#endif
