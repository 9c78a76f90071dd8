/* Reading the target's memory without stopping it: process_vm_readv, with a
 * page cache for mappings that cannot change (read-only file mappings: code,
 * .eh_frame, .rodata). The cache is a pool shared by every process one
 * tracer reads: a page of a file is kept once for all the processes that map
 * that file at the same address (the workers a pre-fork server forked).
 * Sampler thread only. */
#ifndef PT_MEM_H
#define PT_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pt_maps;
struct pt_mem;
struct pt_mem_pool;

#define PT_MEM_PAGE 4096u
/* The pool's pages per process read, and its most pages (16 MB). */
#define PT_MEM_POOL_PER_PROC 256u
#define PT_MEM_POOL_MAX 4096u

int pt_mem_pool_new(struct pt_mem_pool **out);
void pt_mem_pool_free(struct pt_mem_pool *p);
/* Sizes the pool for nproc processes (PT_MEM_POOL_PER_PROC pages each, up
 * to PT_MEM_POOL_MAX; none for 0): a new size drops what the pool held. Its
 * pages are resident only once used. Returns 0 or -ENOMEM (the pool is then
 * empty and reads go uncached). */
int pt_mem_pool_size(struct pt_mem_pool *p, unsigned int nproc);

/* A process's reader; pool NULL: every read uncached. */
int pt_mem_new(struct pt_mem **out, pid_t pid, struct pt_mem_pool *pool);
void pt_mem_free(struct pt_mem *m);
/* Drops every page cached for this process alone (exec, re-attach); a
 * file's pages shared with others stay, keyed by the file itself. */
void pt_mem_flush(struct pt_mem *m);
/* The maps used to decide what may be cached; not owned. */
void pt_mem_set_maps(struct pt_mem *m, const struct pt_maps *maps);

/* Reads len bytes at addr. Returns 0, -EFAULT (unmapped) or -ESRCH. */
int pt_mem_read(struct pt_mem *m, uint64_t addr, void *dst, size_t len);
/* One region of a vectored read: len bytes at addr into buf; err set by
 * the read (0, -EFAULT or -ESRCH). */
struct pt_mem_region {
	uint64_t addr;
	void *buf;
	size_t len;
	int err;
};
/* Reads each of the n regions, uncached, in as few system calls as the
 * kernel allows (one per PT_MEM_REGIONS_BATCH while every region reads
 * whole); a region that does not read whole has its err set and the
 * others are still read. Returns 0, or -ESRCH (the process is gone: the
 * regions not read have err -ESRCH). */
#define PT_MEM_REGIONS_BATCH 256
int pt_mem_read_regions(pid_t pid, struct pt_mem_region *r, size_t n);
/* Reads as much of [addr, addr+len) as is mapped, page by page, without
 * caching. Returns the bytes read (0 if none) or -ESRCH. */
ssize_t pt_mem_read_partial(pid_t pid, uint64_t addr, void *dst, size_t len);

struct pt_mem_stats {
	uint64_t hits, misses, uncached;
	uint64_t shared_hits;    /* hits on a page another process read */
};
void pt_mem_stats(const struct pt_mem *m, struct pt_mem_stats *out);

#endif
