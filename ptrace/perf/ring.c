/* A perf_event ring buffer (see ring.h). The kernel writes at data_head,
 * we read up to it and publish data_tail (include/uapi/linux/perf_event.h:
 * an acquire of the head, a release of the tail). */
#include "ptrace/perf/ring.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/mem.h"

int pt__ring_map(struct pt_ring *r, int fd, size_t want, size_t max_record)
{
	size_t pgsz = (size_t)sysconf(_SC_PAGESIZE), pages = 2;
	int err;

	memset(r, 0, sizeof(*r));
	while (pages * pgsz < want)
		pages *= 2;
	/* Each ring is charged to the locked-memory limits (perf_event_mlock_kb
	 * per CPU, then RLIMIT_MEMLOCK): halve it down to one record. */
	for (;;) {
		r->map_len = (pages + 1) * pgsz;
		r->pg = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (r->pg != MAP_FAILED)
			break;
		err = -errno;
		r->pg = NULL;
		if (err != -EPERM || pages / 2 * pgsz < max_record)
			return err == -EPERM ? -ENOMEM : err;
		pages /= 2;
	}
	r->size = r->pg->data_size ? r->pg->data_size : pages * pgsz;
	r->data = (uint8_t *)r->pg + (r->pg->data_offset ? r->pg->data_offset : pgsz);
	r->max_record = max_record;
	if (!(r->scratch = base_malloc(max_record))) {
		pt__ring_unmap(r);
		return -ENOMEM;
	}
	return 0;
}

void pt__ring_unmap(struct pt_ring *r)
{
	if (r->pg)
		munmap(r->pg, r->map_len);
	base_free(r->scratch);
	memset(r, 0, sizeof(*r));
}

int pt__ring_pending(const struct pt_ring *r)
{
	return __atomic_load_n(&r->pg->data_head, __ATOMIC_ACQUIRE) != r->pg->data_tail;
}

int pt__ring_read(struct pt_ring *r, int (*fn)(void *arg, uint32_t type, const uint8_t *rec, size_t len),
		  void *arg, uint64_t *lost)
{
	uint64_t head = __atomic_load_n(&r->pg->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->pg->data_tail;
	int err = 0;

	while (tail < head) {
		struct perf_event_header h;
		uint64_t off = tail & (r->size - 1);
		const uint8_t *rec = r->data + off;

		/* Records are 8-byte aligned and the area a power of two: a
		 * header never wraps, a record may. */
		memcpy(&h, rec, sizeof(h));
		if (h.size < sizeof(h) || h.size > head - tail) {
			err = -EBADMSG;
			tail = head;
			break;
		}
		if (off + h.size > r->size) {
			size_t first = (size_t)(r->size - off);

			if (h.size > r->max_record) {
				tail += h.size;   /* not one of ours: skip it */
				continue;
			}
			memcpy(r->scratch, rec, first);
			memcpy(r->scratch + first, r->data, h.size - first);
			rec = r->scratch;
		}
		if (h.type == PERF_RECORD_LOST && h.size >= sizeof(h) + 16) {
			uint64_t k;

			memcpy(&k, rec + sizeof(h) + 8, sizeof(k));
			*lost += k;
		} else if (fn) {
			int rc = fn(arg, h.type, rec, h.size);

			if (rc < 0) {
				err = -EBADMSG;
				tail = head;
				break;
			}
			if (rc)
				break;   /* left for the next read */
		}
		tail += h.size;
	}
	__atomic_store_n(&r->pg->data_tail, tail, __ATOMIC_RELEASE);
	return err;
}
