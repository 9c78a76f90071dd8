/* Reading the target's memory (see mem.h): process_vm_readv, whole or
 * page by page, and a direct-mapped pool of pages that cannot change,
 * shared by the readers of one tracer (a page's slot is a hash of its key:
 * a newer page simply takes the slot, no probing, no eviction order to
 * keep). Sampler thread only. */
#include "ptrace/space/mem.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "base/mem.h"
#include "ptrace/proc/proc.h"

/* Where a cached page came from. A file's page that cannot differ between
 * the processes mapping the file at that address is keyed by the file
 * (device, inode, offset) and the address; any other cacheable page (the
 * vDSO, a read-only mapping the loader wrote first) by its reader's
 * generation and the address. */
struct key {
	uint64_t addr;           /* page address + 1; 0 = empty slot */
	uint64_t inode, offset;  /* shared pages; 0, 0 otherwise */
	uint64_t owner;          /* a reader's generation for its own pages; 0 shared */
	uint64_t reader;         /* the generation that read it */
	uint32_t dev;
};

struct pt_mem_pool {
	unsigned int npages;     /* power of two; 0: no cache */
	struct key *keys;        /* apart from the pages: a lookup touches no page */
	uint8_t (*pages)[PT_MEM_PAGE];
	uint64_t next_gen;
};

struct pt_mem {
	pid_t pid;
	struct pt_mem_pool *pool;
	uint64_t gen;            /* this reader's own pages; new at each flush */
	const struct pt_maps *maps;
	const struct pt_map *last;   /* the mapping of the last read */
	struct pt_mem_stats st;
};

int pt_mem_pool_new(struct pt_mem_pool **out)
{
	*out = base_calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void pool_drop(struct pt_mem_pool *p)
{
	base_free_pages(p->keys, p->npages, sizeof(*p->keys));
	base_free_pages(p->pages, p->npages, sizeof(*p->pages));
	p->keys = NULL;
	p->pages = NULL;
	p->npages = 0;
}

void pt_mem_pool_free(struct pt_mem_pool *p)
{
	if (!p)
		return;
	pool_drop(p);
	base_free(p);
}

int pt_mem_pool_size(struct pt_mem_pool *p, unsigned int nproc)
{
	unsigned int want = 0;

	if (nproc)
		for (want = PT_MEM_POOL_PER_PROC; want < PT_MEM_POOL_MAX && want / PT_MEM_POOL_PER_PROC < nproc;)
			want *= 2;
	if (want == p->npages)
		return 0;
	pool_drop(p);
	if (!want)
		return 0;
	p->npages = want;
	p->keys = base_calloc_pages(want, sizeof(*p->keys));
	p->pages = base_calloc_pages(want, sizeof(*p->pages));
	if (!p->keys || !p->pages) {
		pool_drop(p);
		return -ENOMEM;
	}
	return 0;
}

int pt_mem_new(struct pt_mem **out, pid_t pid, struct pt_mem_pool *pool)
{
	struct pt_mem *m;

	*out = NULL;
	m = base_calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->pid = pid;
	m->pool = pool;
	m->gen = pool ? ++pool->next_gen : 0;
	*out = m;
	return 0;
}

/* Forgets every page this reader's generation read, shared ones too: a
 * page read while the maps were stale (an exec during an unwind, a library
 * replaced between two maps reads) may hold another file's bytes under
 * this file's key. The keys only are scanned, no page touched. */
static void drop_read_by(struct pt_mem_pool *p, uint64_t gen)
{
	for (unsigned int i = 0; p && i < p->npages; i++)
		if (p->keys[i].addr && p->keys[i].reader == gen)
			p->keys[i].addr = 0;
}

void pt_mem_free(struct pt_mem *m)
{
	if (m)
		drop_read_by(m->pool, m->gen);
	base_free(m);
}

void pt_mem_flush(struct pt_mem *m)
{
	/* A new generation: what the old one read is dropped (above); its
	 * own pages would never be hit again anyway. */
	if (m->pool) {
		drop_read_by(m->pool, m->gen);
		m->gen = ++m->pool->next_gen;
	}
	m->last = NULL;
}

void pt_mem_set_maps(struct pt_mem *m, const struct pt_maps *maps)
{
	/* With new maps (a library unloaded, another mapped at its place)
	 * start over: what this reader read under the old ones goes (flush);
	 * other readers' pages of a file are found by the file the new maps
	 * name at the address, so they stay right. */
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

int pt_mem_read_regions(pid_t pid, struct pt_mem_region *r, size_t n)
{
	struct iovec local[PT_MEM_REGIONS_BATCH], remote[PT_MEM_REGIONS_BATCH];
	size_t i = 0;

	while (i < n) {
		size_t k = 0;
		ssize_t got;

		/* process_vm_readv stops at the first remote region it cannot
		 * read whole: those before it are done, it is read alone (its
		 * error), and the batch goes on after it. */
		for (; k < PT_MEM_REGIONS_BATCH && i + k < n; k++) {
			local[k] = (struct iovec){ r[i + k].buf, r[i + k].len };
			remote[k] = (struct iovec){ (void *)(uintptr_t)r[i + k].addr, r[i + k].len };
			r[i + k].err = 0;
		}
		got = process_vm_readv(pid, local, (unsigned long)k, remote, (unsigned long)k, 0);
		if (got < 0 && errno == ESRCH) {
			for (; i < n; i++)
				r[i].err = -ESRCH;
			return -ESRCH;
		}
		if (got < 0)
			got = 0;
		for (size_t j = 0; j < k; j++) {
			if ((size_t)got >= r[i + j].len) {
				got -= (ssize_t)r[i + j].len;
				continue;
			}
			/* the first region not read whole */
			r[i + j].err = vm_read(pid, r[i + j].addr, r[i + j].buf, r[i + j].len);
			if (r[i + j].err == -ESRCH) {
				for (i += j; i < n; i++)
					r[i].err = -ESRCH;
				return -ESRCH;
			}
			k = j + 1;
			break;
		}
		i += k;
	}
	return 0;
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

/* The key of the page at `page` under this reader's maps; 0 (with
 * key->addr 0) when it is not to be cached. */
static int page_key(struct pt_mem *m, uint64_t page, struct key *key)
{
	const struct pt_map *mp = m->last, *next;

	if (!mp || page < mp->start || page >= mp->end)
		mp = m->last = m->maps ? pt_maps_find(m->maps, page) : NULL;
	memset(key, 0, sizeof(*key));
	/* Only private non-writable mappings of a file (or the vDSO) hold
	 * bytes that cannot change under us (a shared one may be written
	 * through another mapping of the file). */
	if (!mp || (mp->flags & PT_MAP_W) || !(mp->flags & PT_MAP_P) ||
	    !(mp->inode || mp->path[0] == '[') || mp->end < page + PT_MEM_PAGE)
		return 0;
	key->addr = page + 1;
	/* The loader writes a read-only mapping before it protects it (RELRO:
	 * relocations, different in each process that is not a fork): such
	 * a mapping lies just before the writable rest of its segment. */
	next = mp + 1 < m->maps->v + m->maps->n ? mp + 1 : NULL;
	if (!mp->inode || (next && next->start == mp->end && (next->flags & PT_MAP_W))) {
		key->owner = m->gen;
		return 1;
	}
	key->inode = mp->inode;
	key->dev = (mp->dev_major << 20) | mp->dev_minor;
	key->offset = mp->offset + (page - mp->start);
	return 1;
}

static int same_key(const struct key *a, const struct key *b)
{
	return a->addr == b->addr && a->owner == b->owner && a->inode == b->inode &&
	       a->offset == b->offset && a->dev == b->dev;
}

static size_t slot_of(const struct pt_mem_pool *p, const struct key *k)
{
	uint64_t h = (k->addr / PT_MEM_PAGE) ^ (k->owner * 0x9e3779b97f4a7c15ull) ^
		     (k->inode * 0xc2b2ae3d27d4eb4full);

	return (size_t)(h ^ (h >> 29)) & (p->npages - 1);
}

int pt_mem_read(struct pt_mem *m, uint64_t addr, void *dst, size_t len)
{
	struct pt_mem_pool *p = m->pool;
	uint8_t *out = dst;

	while (len) {
		uint64_t page = addr & ~(uint64_t)(PT_MEM_PAGE - 1);
		size_t off = addr - page, n = PT_MEM_PAGE - off, i;
		struct key k;
		int err;

		if (n > len)
			n = len;
		if (!p || !p->npages || !page_key(m, page, &k)) {
			m->st.uncached++;
			if ((err = vm_read(m->pid, addr, out, n)))
				return err;
		} else if (same_key(&p->keys[i = slot_of(p, &k)], &k)) {
			m->st.hits++;
			m->st.shared_hits += p->keys[i].reader != m->gen;
			memcpy(out, p->pages[i] + off, n);
		} else {
			m->st.misses++;
			p->keys[i].addr = 0;
			if ((err = vm_read(m->pid, page, p->pages[i], PT_MEM_PAGE)))
				return err;
			k.reader = m->gen;
			p->keys[i] = k;
			memcpy(out, p->pages[i] + off, n);
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
