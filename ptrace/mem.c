/* Reading the target's memory (see mem.h): process_vm_readv, whole or
 * page by page, and a direct-mapped cache of pages that cannot change (a
 * page's slot is its page number modulo the cache's size: a newer page
 * simply takes the slot, no probing, no eviction order to keep). Sampler
 * thread only. */
#include "ptrace/mem.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "base/mem.h"
#include "ptrace/proc.h"

struct page {
	uint64_t addr;   /* page address + 1; 0 = empty slot */
	uint8_t data[PT_MEM_PAGE];
};

struct pt_mem {
	pid_t pid;
	const struct pt_maps *maps;
	unsigned int npages;     /* power of two */
	struct page *pages;
	struct pt_mem_stats st;
};

int pt_mem_new(struct pt_mem **out, pid_t pid, unsigned int cache_pages)
{
	struct pt_mem *m;
	unsigned int n = 1;

	*out = NULL;
	while (n < cache_pages)
		n *= 2;
	m = base_calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->pages = base_calloc(n, sizeof(*m->pages));
	if (!m->pages) {
		base_free(m);
		return -ENOMEM;
	}
	m->pid = pid;
	m->npages = n;
	*out = m;
	return 0;
}

void pt_mem_free(struct pt_mem *m)
{
	if (!m)
		return;
	base_free(m->pages);
	base_free(m);
}

void pt_mem_flush(struct pt_mem *m)
{
	for (unsigned int i = 0; i < m->npages; i++)
		m->pages[i].addr = 0;
}

void pt_mem_set_maps(struct pt_mem *m, const struct pt_maps *maps)
{
	/* A page is cached only while the maps say it cannot change; with new
	 * maps (a library unloaded, another mapped at its place) start over. */
	m->maps = maps;
	pt_mem_flush(m);
}

static int vm_read(pid_t pid, uint64_t addr, void *dst, size_t len)
{
	struct iovec local = { dst, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return errno == ESRCH ? -ESRCH : -EFAULT;
	return (size_t)n == len ? 0 : -EFAULT;
}

ssize_t pt_mem_read_partial(pid_t pid, uint64_t addr, void *dst, size_t len)
{
	/* One remote iovec per page: the kernel does not split an iovec element,
	 * so a single element that runs past the end of the mapping would fail
	 * whole instead of returning what was readable. */
	struct iovec local = { dst, len }, remote[32];
	size_t done = 0;

	while (done < len) {
		size_t want = 0;
		int k = 0;
		ssize_t n;

		while (k < 32 && done + want < len) {
			uint64_t a = addr + done + want;
			size_t chunk = PT_MEM_PAGE - (a & (PT_MEM_PAGE - 1));

			if (chunk > len - done - want)
				chunk = len - done - want;
			remote[k].iov_base = (void *)(uintptr_t)a;
			remote[k].iov_len = chunk;
			want += chunk;
			k++;
		}
		local.iov_base = (char *)dst + done;
		local.iov_len = want;
		n = process_vm_readv(pid, &local, 1, remote, (unsigned long)k, 0);
		if (n < 0)
			return errno == ESRCH ? -ESRCH : (ssize_t)done;
		done += (size_t)n;
		if ((size_t)n < want)
			break;
	}
	return (ssize_t)done;
}

static int cacheable(const struct pt_mem *m, uint64_t page)
{
	const struct pt_map *mp = m->maps ? pt_maps_find(m->maps, page) : NULL;

	/* Only private, non-writable mappings of a file (or the vDSO) hold
	 * bytes that cannot change under us. */
	return mp && !(mp->flags & PT_MAP_W) && (mp->inode || mp->path[0] == '[') &&
	       mp->end >= page + PT_MEM_PAGE;
}

int pt_mem_read(struct pt_mem *m, uint64_t addr, void *dst, size_t len)
{
	uint8_t *out = dst;

	while (len) {
		uint64_t page = addr & ~(uint64_t)(PT_MEM_PAGE - 1);
		size_t off = addr - page, n = PT_MEM_PAGE - off;
		struct page *slot;
		int err;

		if (n > len)
			n = len;
		/* A page in the cache was cacheable when it was read, under the
		 * same maps (new maps flush it): a hit needs no maps lookup. */
		slot = &m->pages[(page / PT_MEM_PAGE) & (m->npages - 1)];
		if (slot->addr == page + 1) {
			m->st.hits++;
			memcpy(out, slot->data + off, n);
		} else if (!cacheable(m, page)) {
			m->st.uncached++;
			if ((err = vm_read(m->pid, addr, out, n)))
				return err;
		} else {
			m->st.misses++;
			if ((err = vm_read(m->pid, page, slot->data, PT_MEM_PAGE))) {
				slot->addr = 0;
				return err;
			}
			slot->addr = page + 1;
			memcpy(out, slot->data + off, n);
		}
		out += n;
		addr += n;
		len -= n;
	}
	return 0;
}

void pt_mem_stats(const struct pt_mem *m, struct pt_mem_stats *out)
{
	*out = m->st;
}
