/* Reading the target's memory without stopping it: process_vm_readv, with a
 * page cache for mappings that cannot change (read-only file mappings: code,
 * .eh_frame, .rodata). Sampler thread only. */
#ifndef PT_MEM_H
#define PT_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pt_maps;
struct pt_mem;

#define PT_MEM_PAGE 4096u

int pt_mem_new(struct pt_mem **out, pid_t pid, unsigned int cache_pages);
void pt_mem_free(struct pt_mem *m);
/* Drops every cached page (exec, re-attach). */
void pt_mem_flush(struct pt_mem *m);
/* The maps used to decide what may be cached; not owned. */
void pt_mem_set_maps(struct pt_mem *m, const struct pt_maps *maps);

/* Reads len bytes at addr. Returns 0, -EFAULT (unmapped) or -ESRCH. */
int pt_mem_read(struct pt_mem *m, uint64_t addr, void *dst, size_t len);
/* Reads as much of [addr, addr+len) as is mapped, page by page, without
 * caching. Returns the bytes read (0 if none) or -ESRCH. */
ssize_t pt_mem_read_partial(pid_t pid, uint64_t addr, void *dst, size_t len);

struct pt_mem_stats {
	uint64_t hits, misses, uncached;
};
void pt_mem_stats(const struct pt_mem *m, struct pt_mem_stats *out);

#endif
