/* Growing arrays by doubling. The caller's typed pointer is read and
 * written through memcpy: the array code never needs to know its type.
 * Owns nothing (the caller owns its array). Any thread. */
#include "base/array.h"

#include <errno.h>
#include <string.h>

#include "base/mem.h"

static int grow(void *itemsp, size_t *cap, size_t need, size_t size, int zero)
{
	size_t ncap = *cap ? *cap : 8, bytes;
	void *items, *v;

	if (need <= *cap)
		return 0;
	if (need > BASE_ARRAY_MAX || !size)
		return -E2BIG;
	while (ncap < need)
		ncap *= 2;
	if (ncap > BASE_ARRAY_MAX)
		ncap = BASE_ARRAY_MAX;
	if (base_size_mul(ncap, size, &bytes))
		return -E2BIG;
	memcpy(&items, itemsp, sizeof(items));
	if (!(v = base_realloc(items, bytes)))
		return -ENOMEM;
	if (zero)
		memset((char *)v + *cap * size, 0, (ncap - *cap) * size);
	memcpy(itemsp, &v, sizeof(v));
	*cap = ncap;
	return 0;
}

int base_array_reserve(void *itemsp, size_t *cap, size_t need, size_t size)
{
	return grow(itemsp, cap, need, size, 1);
}

int base_array_grow(void *itemsp, size_t *cap, size_t need, size_t size)
{
	return grow(itemsp, cap, need, size, 0);
}
