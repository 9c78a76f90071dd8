/* Growable arrays: a typed pointer, a count and a capacity kept by the
 * caller, grown here by doubling (one policy for podprof). Any thread; an
 * array has one owner at a time. */
#ifndef BASE_ARRAY_H
#define BASE_ARRAY_H

#include <stddef.h>
#include <string.h>

/* Most elements an array may hold: counts and ids stay within an int32
 * (pprof ids, trace indices), so growth past this is refused, cleanly,
 * long before a size computation could overflow. */
#define BASE_ARRAY_MAX ((size_t)1 << 31)

/* Makes room for `need` elements of `size` bytes at *itemsp (a pointer to
 * the caller's typed pointer), whose capacity is *cap: at least doubles it
 * (from 8), zeroes the new elements, updates both. Returns 0, -E2BIG (need
 * over BASE_ARRAY_MAX) or -ENOMEM; on failure the array is as it was.
 * Use BASE_ARRAY_RESERVE, which passes the element size. */
int base_array_reserve(void *itemsp, size_t *cap, size_t need, size_t size);

#define BASE_ARRAY_RESERVE(items, cap, need) \
	base_array_reserve(&(items), &(cap), (need), sizeof(*(items)))

/* As base_array_reserve, but the new room is left as realloc leaves it:
 * for arrays whose elements are written whole as they are added (byte
 * pools, frames copied in), where zeroing room never read costs page
 * faults (a symbol table read 8 % slower with it, measured). */
int base_array_grow(void *itemsp, size_t *cap, size_t need, size_t size);

#define BASE_ARRAY_GROW(items, cap, need) \
	base_array_grow(&(items), &(cap), (need), sizeof(*(items)))

/* A pointer to a new zeroed element at the end of items (count n, capacity
 * cap), n incremented; NULL (nothing changed) if it cannot grow. Only that
 * element is zeroed (the room past it is not touched: a trace's events
 * grow by doubling, and zeroing the unused half raised podprof's peak RSS
 * by a megabyte). The arguments are evaluated more than once: plain
 * lvalues only. */
#define BASE_ARRAY_PUSH(items, n, cap)                                         \
	(BASE_ARRAY_GROW(items, cap, (n) + 1) ? NULL :                          \
	 (typeof(&(items)[0]))memset(&(items)[(n)++], 0, sizeof(*(items))))



/* The number of elements of a fixed array. */
#define BASE_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The structure that holds member `member` at ptr. */
#define BASE_CONTAINER_OF(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#endif
