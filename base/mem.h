/* The one allocation entry point of podprof (CONVENTIONS H17): every module
 * allocates through these, so that one place counts allocations and a test
 * can make any one of them fail. Each returns NULL (base_free: nothing) on
 * failure, the C library's way; callers propagate -ENOMEM. Checked size
 * arithmetic for the sizes they are given. Any thread. */
#ifndef BASE_MEM_H
#define BASE_MEM_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* malloc(size); NULL on failure. */
void *base_malloc(size_t size);
/* calloc(n, size): zeroed; NULL on failure or when n * size overflows. */
void *base_calloc(size_t n, size_t size);
/* realloc(p, size): on failure NULL, and p is left as it was (never write
 * the result back over p before checking it: CONVENTIONS H17). */
void *base_realloc(void *p, size_t size);
/* realloc(p, n * size), NULL (p untouched) when n * size overflows. */
void *base_reallocarray(void *p, size_t n, size_t size);
/* free(p). NULL-safe. */
void base_free(void *p);
/* A copy of s (NUL-terminated), of at most n bytes of s, of n bytes at p:
 * NULL on failure (base_strdup(NULL) is NULL too). */
char *base_strdup(const char *s);
char *base_strndup(const char *s, size_t n);
void *base_memdup(const void *p, size_t n);
/* n * size zeroed bytes of their own pages (anonymous mmap): a page
 * becomes resident only when written, whatever malloc's thresholds, for
 * large tables used sparsely. NULL on failure or overflow; freed with
 * base_free_pages(p, n, size). */
void *base_calloc_pages(size_t n, size_t size);
void base_free_pages(void *p, size_t n, size_t size);

/* Checked size arithmetic: *out = a * b (a + b); -E2BIG when it does not
 * fit in a size_t (*out is then left alone), else 0. */
static inline int base_size_mul(size_t a, size_t b, size_t *out)
{
	size_t r;

	if (__builtin_mul_overflow(a, b, &r))
		return -E2BIG;
	*out = r;
	return 0;
}

static inline int base_size_add(size_t a, size_t b, size_t *out)
{
	size_t r;

	if (__builtin_add_overflow(a, b, &r))
		return -E2BIG;
	*out = r;
	return 0;
}

/* ---- failure injection (tests, make torture) ------------------------------ */

/* From this call on, allocations are counted, and the nth of them (1: the
 * next one) fails, once; nth 0 only counts. Every thread's allocations
 * count: in a running server the one that fails is whichever comes nth. */
void base_mem_fail_at(uint64_t nth);
/* Stops counting and failing. */
void base_mem_fail_off(void);
/* Allocations counted since the last base_mem_fail_at (0 when off). */
uint64_t base_mem_counted(void);
/* 1 once the failure armed by the last base_mem_fail_at happened. */
int base_mem_failed(void);

#endif
