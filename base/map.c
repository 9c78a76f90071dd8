/* The hash map: open addressing, linear probing, at most half full. A
 * slot's home is taken from the high bits of key * 2^64/phi (Fibonacci
 * hashing), so that keys in a row (tids, addresses) spread over the table;
 * with at most half the slots used a probe run stays short. Owns its
 * table. Any thread; a map has one owner at a time. */
#include "base/map.h"

#include <errno.h>
#include <string.h>

#include "base/mem.h"

static size_t home(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

/* Moves every entry into a table of cap slots. */
static int rehash(struct base_map *m, size_t cap)
{
	struct base_map_slot *v = base_calloc(cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->slots[i].key)
			continue;
		for (j = home(m->slots[i].key, cap); v[j].key; j = (j + 1) & (cap - 1)) {
		}
		v[j] = m->slots[i];
	}
	base_free(m->slots);
	m->slots = v;
	m->cap = cap;
	return 0;
}

int base_map_reserve(struct base_map *m, size_t n)
{
	size_t cap = m->cap ? m->cap : 16;

	if (n > BASE_MAP_MAX)
		return -E2BIG;
	while (cap < 2 * n)
		cap *= 2;
	return cap == m->cap ? 0 : rehash(m, cap);
}

uint64_t *base_map_get(const struct base_map *m, uint64_t key)
{
	if (!m->cap || !key)
		return NULL;
	for (size_t j = home(key, m->cap); m->slots[j].key; j = (j + 1) & (m->cap - 1))
		if (m->slots[j].key == key)
			return &m->slots[j].val;
	return NULL;
}

uint64_t *base_map_find(const struct base_map *m, uint64_t hash, base_map_eq_cb eq,
			const void *arg)
{
	if (!m->cap || !hash)
		return NULL;
	for (size_t j = home(hash, m->cap); m->slots[j].key; j = (j + 1) & (m->cap - 1))
		if (m->slots[j].key == hash && eq(arg, m->slots[j].val))
			return &m->slots[j].val;
	return NULL;
}

/* Inserts (key, val) in a free slot; replace: overwrite key's entry. */
static int insert(struct base_map *m, uint64_t key, uint64_t val, int replace)
{
	size_t j;
	int err;

	if (!key)
		return -EINVAL;
	if ((m->n + 1) * 2 > m->cap && (err = base_map_reserve(m, m->n + 1)))
		return err;
	for (j = home(key, m->cap); m->slots[j].key; j = (j + 1) & (m->cap - 1))
		if (replace && m->slots[j].key == key) {
			m->slots[j].val = val;
			return 0;
		}
	m->slots[j] = (struct base_map_slot){ key, val };
	m->n++;
	return 0;
}

int base_map_put(struct base_map *m, uint64_t key, uint64_t val)
{
	return insert(m, key, val, 1);
}

int base_map_add(struct base_map *m, uint64_t hash, uint64_t val)
{
	return insert(m, hash, val, 0);
}

int base_map_del(struct base_map *m, uint64_t key)
{
	size_t j, k, mask = m->cap - 1;

	if (!m->cap || !key)
		return -ENOENT;
	for (j = home(key, m->cap); m->slots[j].key != key; j = (j + 1) & mask)
		if (!m->slots[j].key)
			return -ENOENT;
	/* Backward shift: each later entry of the run whose home does not lie
	 * cyclically in (j, k] moves into the hole, which moves to it. */
	for (k = (j + 1) & mask; m->slots[k].key; k = (k + 1) & mask) {
		size_t h = home(m->slots[k].key, m->cap);

		if (j <= k ? (j < h && h <= k) : (j < h || h <= k))
			continue;
		m->slots[j] = m->slots[k];
		j = k;
	}
	m->slots[j] = (struct base_map_slot){ 0, 0 };
	m->n--;
	return 0;
}

const struct base_map_slot *base_map_next(const struct base_map *m, size_t *pos)
{
	for (; *pos < m->cap; (*pos)++)
		if (m->slots[*pos].key)
			return &m->slots[(*pos)++];
	return NULL;
}

void base_map_free(struct base_map *m)
{
	if (!m)
		return;
	base_free(m->slots);
	*m = (struct base_map){ 0 };
}

uint64_t base_hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h ? h : 1;
}

uint64_t base_hash_str(const char *s)
{
	return base_hash_bytes(BASE_HASH_SEED, s, strlen(s));
}
