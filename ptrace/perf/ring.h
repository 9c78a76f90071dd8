/* A perf_event ring buffer as podprof maps and reads it (perf_event_open(2):
 * the metadata page, then a data area of a power of two of pages), one per
 * thread's event (perfev.c). Records are handed over whole, a record that
 * wraps round the end copied into a scratch buffer first. Sampler thread
 * only. */
#ifndef PT_RING_H
#define PT_RING_H

#include <stddef.h>
#include <stdint.h>

struct perf_event_mmap_page;

struct pt_ring {
	struct perf_event_mmap_page *pg;
	size_t map_len;
	uint8_t *data;
	uint64_t size;        /* of the data area, a power of two */
	size_t max_record;    /* the largest record the reader takes whole */
	uint8_t *scratch;     /* a record that wraps round the end, made whole */
};

/* Maps fd's ring with room for `want` bytes at least (2 pages at least),
 * halved down to one record of max_record bytes where the locked-memory
 * limits refuse it. Returns 0, -ENOMEM (the limits: not even one record;
 * or no memory) or another negative errno of mmap. */
int pt__ring_map(struct pt_ring *r, int fd, size_t want, size_t max_record);
/* Unmaps; what it held is lost. Safe on a ring never mapped (zeroed). */
void pt__ring_unmap(struct pt_ring *r);
/* 1 if the ring holds records not read yet. */
int pt__ring_pending(const struct pt_ring *r);
/* Reads what the kernel wrote since the last read: each record, header
 * included, to fn (with its type), which returns 0 to go on, 1 to stop
 * before the next (this one is then left for the next read), or -1 for a
 * record that cannot be. A record larger than max_record that wraps is
 * passed over; PERF_RECORD_LOST's count is added to *lost. Returns 0, or
 * -EBADMSG for a header or a record that cannot be (the ring is then
 * emptied). */
int pt__ring_read(struct pt_ring *r, int (*fn)(void *arg, uint32_t type, const uint8_t *rec, size_t len),
		  void *arg, uint64_t *lost);

#endif
