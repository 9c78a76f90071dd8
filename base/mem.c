/* The allocation entry point and its failure injection. The counter costs
 * one relaxed load per allocation while nothing is armed; armed (tests and
 * make torture only), one atomic increment. Any thread. */
#include "base/mem.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static atomic_int armed;             /* counting since base_mem_fail_at */
static _Atomic uint64_t counted;     /* allocations since then */
static _Atomic uint64_t fail_nth;    /* the one that fails, 0: none */
static atomic_int failed;            /* it did */

void base_mem_fail_at(uint64_t nth)
{
	atomic_store(&armed, 0);
	atomic_store(&counted, 0);
	atomic_store(&failed, 0);
	atomic_store(&fail_nth, nth);
	atomic_store(&armed, 1);
}

void base_mem_fail_off(void)
{
	atomic_store(&armed, 0);
	atomic_store(&fail_nth, 0);
}

uint64_t base_mem_counted(void)
{
	return atomic_load(&armed) ? atomic_load(&counted) : 0;
}

int base_mem_failed(void)
{
	return atomic_load(&failed);
}

/* 1 if this allocation is the one to fail. */
static int fail_now(void)
{
	uint64_t n;

	if (!atomic_load_explicit(&armed, memory_order_relaxed))
		return 0;
	n = atomic_fetch_add(&counted, 1) + 1;
	if (n != atomic_load(&fail_nth))
		return 0;
	atomic_store(&failed, 1);
	return 1;
}

void *base_malloc(size_t size)
{
	return fail_now() ? NULL : malloc(size ? size : 1);
}

void *base_calloc(size_t n, size_t size)
{
	size_t bytes;

	if (base_size_mul(n, size, &bytes) || fail_now())
		return NULL;
	return calloc(bytes ? n : 1, bytes ? size : 1);
}

void *base_realloc(void *p, size_t size)
{
	return fail_now() ? NULL : realloc(p, size ? size : 1);
}

void *base_reallocarray(void *p, size_t n, size_t size)
{
	size_t bytes;

	if (base_size_mul(n, size, &bytes))
		return NULL;
	return base_realloc(p, bytes);
}

void base_free(void *p)
{
	free(p);
}

void *base_memdup(const void *p, size_t n)
{
	void *q = base_malloc(n);

	if (q && n)
		memcpy(q, p, n);
	return q;
}

char *base_strndup(const char *s, size_t n)
{
	size_t len;
	char *q;

	if (!s)
		return NULL;
	len = strnlen(s, n);
	if (len == SIZE_MAX || !(q = base_malloc(len + 1)))
		return NULL;
	memcpy(q, s, len);
	q[len] = '\0';
	return q;
}

char *base_strdup(const char *s)
{
	return s ? base_strndup(s, SIZE_MAX) : NULL;
}

void *base_calloc_pages(size_t n, size_t size)
{
	size_t bytes;
	void *p;

	if (base_size_mul(n, size, &bytes) || fail_now())
		return NULL;
	p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void base_free_pages(void *p, size_t n, size_t size)
{
	size_t bytes = n * size;

	if (p)
		munmap(p, bytes ? bytes : 1);
}
