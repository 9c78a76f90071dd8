/* The floor of any LD_PRELOAD malloc interposer, for make bench's
 * allocation microbenchmark: malloc and free that only pass the call on
 * to glibc's own, built with the agent's flags (a tail jump through the
 * GOT, no PLT stub). Whatever it costs over glibc alone (the app's call
 * lands in one more function before glibc's) the agent cannot go below;
 * the bench prints the agent's cost beside it. */
#include <stddef.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);

__attribute__((visibility("default"))) void *malloc(size_t n)
{
	return __libc_malloc(n);
}

__attribute__((visibility("default"))) void free(void *p)
{
	__libc_free(p);
}
