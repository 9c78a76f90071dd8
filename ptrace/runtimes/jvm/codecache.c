/* The code cache (see codecache.h). HotSpot keeps its code in one to
 * three heaps (non-nmethods, profiled and non-profiled nmethods, with the
 * default segmented code cache), each a reserved range whose committed
 * part grows, and a segment map beside it: one byte per segment (2^7 bytes
 * by default), 0xff for a free one, else how many segments back to step
 * towards its block's first, which is 0. A block begins with a HeapBlock
 * header (its length and whether it is used), then the blob. Facts from
 * HotSpot's heap.hpp/heap.cpp and codeBlob.hpp of 17, 21 and 25.
 * Sampler thread only. */
#include "ptrace/runtimes/jvm/codecache.h"

#include <errno.h>
#include <string.h>

#include "ptrace/core/internal.h"
#include "ptrace/runtimes/jvm/vmstructs.h"

/* The code cache is at most 2 GB (ReservedCodeCacheSize's limit). */
#define MAX_CACHE (1ull << 31)
/* A heap whose committed part does not hold a pc of the cache is read
 * again, at most this often (it grows as the JVM compiles). */
#define REREAD_NS 100000000ull
/* Steps back through a segment map: a blob of 2^17 segments (16 MB of
 * 128-byte segments) takes 2^17 / 254 of them. */
#define MAX_HOPS 1024
#define WINDOW 256u        /* segment map bytes read at once */
#define MAX_BLOB (1u << 30)
#define MAX_FRAME_WORDS (1 << 20)

/* An integer (or pointer) field f of the structure at addr. */
static int field(struct pt_jvm *j, uint64_t addr, enum pt__jvm_f f, int64_t *out)
{
	uint8_t b[8];

	if (!j->f[f].found || !j->f[f].width || pt__jvm_read(j, addr + j->f[f].v, b, j->f[f].width))
		return -EFAULT;
	*out = pt__jvm_int(b, sizeof(b), 0, j->f[f].width, 1);
	return 0;
}

/* A static's value (integer or pointer, of its width; 8 if unknown). */
static int static_value(struct pt_jvm *j, enum pt__jvm_f f, uint64_t *out)
{
	uint8_t b[8] = { 0 };
	uint32_t w = j->f[f].width && j->f[f].width <= 8 ? j->f[f].width : 8;

	if (!j->f[f].found || pt__jvm_read(j, j->f[f].v, b, w))
		return -EFAULT;
	memcpy(out, b, sizeof(*out));
	return 0;
}

static int read_heap(struct pt_jvm *j, uint64_t h, struct pt__jvm_heap *out)
{
	int64_t lo, hi, segmap, shift;
	uint64_t mem = h + j->f[JF_HEAP_MEMORY].v, seg = h + j->f[JF_HEAP_SEGMAP].v;

	if (field(j, mem, JF_VS_LOW, &lo) || field(j, mem, JF_VS_HIGH, &hi) ||
	    field(j, seg, JF_VS_LOW, &segmap) || field(j, h, JF_HEAP_LOG2, &shift))
		return -EFAULT;
	if ((uint64_t)lo < j->cc_lo || (uint64_t)hi > j->cc_hi || hi < lo || !segmap || shift < 4 ||
	    shift > 16)
		return -EBADMSG;
	*out = (struct pt__jvm_heap){ (uint64_t)lo, (uint64_t)hi, (uint64_t)segmap, (unsigned int)shift };
	return 0;
}

int pt__jvm_cache_read(struct pt_jvm *j)
{
	uint64_t lo, hi, ga, data, heaps[PT__JVM_MAX_HEAPS], q, stub_ret;
	int64_t n, buf, limit;
	int err;

	j->heaps_ns = pt__now_ns();
	j->st.heap_reads++;
	if (static_value(j, JF_S_CC_LOW, &lo) || static_value(j, JF_S_CC_HIGH, &hi) ||
	    static_value(j, JF_S_HEAPS, &ga))
		return -EFAULT;
	if (!lo || !ga)
		return -EAGAIN;   /* not made yet: a JVM starting */
	if (hi <= lo || hi - lo > MAX_CACHE)
		return -EBADMSG;
	j->cc_lo = lo;
	j->cc_hi = hi;
	if (field(j, ga, JF_GA_LEN, &n) || field(j, ga, JF_GA_DATA, (int64_t *)&data))
		return -EFAULT;
	if (n < 1 || n > PT__JVM_MAX_HEAPS)
		return -EBADMSG;
	if (pt__jvm_read(j, data, heaps, (size_t)n * sizeof(heaps[0])))
		return -EFAULT;
	for (int i = 0; i < n; i++)
		if ((err = read_heap(j, heaps[i], &j->heaps[i])))
			return err;
	j->nheaps = (int)n;
	/* The interpreter's code: its stub queue's buffer. */
	if (static_value(j, JF_S_INTERP, &q) || !q || field(j, q, JF_SQ_BUFFER, &buf) ||
	    field(j, q, JF_SQ_LIMIT, &limit))
		return -EFAULT;
	if ((uint64_t)buf < lo || limit <= 0 || (uint64_t)limit > hi - (uint64_t)buf)
		return -EBADMSG;
	j->interp_lo = (uint64_t)buf;
	j->interp_hi = (uint64_t)buf + (uint64_t)limit;
	if (static_value(j, JF_S_CALL_STUB_RET, &stub_ret))
		return -EFAULT;
	j->call_stub_ret = stub_ret;
	return 0;
}

static const struct pt__jvm_heap *heap_of(const struct pt_jvm *j, uint64_t pc)
{
	for (int i = 0; i < j->nheaps; i++)
		if (pc >= j->heaps[i].lo && pc < j->heaps[i].hi)
			return &j->heaps[i];
	return NULL;
}

/* The first segment of the block holding segment idx of h. Returns 0,
 * -ENOENT (a free segment) or -EFAULT/-EBADMSG. */
static int block_start(struct pt_jvm *j, const struct pt__jvm_heap *h, uint64_t *idx)
{
	uint8_t win[WINDOW];
	uint64_t start = 0, at = *idx;
	int hops = 0, have = 0;

	for (;;) {
		uint8_t b;

		if (!have || at < start) {
			start = at >= WINDOW - 1 ? at - (WINDOW - 1) : 0;
			if (pt__jvm_read(j, h->segmap + start, win, (size_t)(at - start + 1)))
				return -EFAULT;
			have = 1;
		}
		b = win[at - start];
		if (b == 0xff)
			return hops ? -EBADMSG : -ENOENT;
		if (!b)
			break;
		if (b > at || ++hops > MAX_HOPS)
			return -EBADMSG;
		at -= b;
	}
	*idx = at;
	return 0;
}

/* What kind of code a blob of 17-22 is, by its name ("nmethod" or, a
 * native method's wrapper, "native nmethod"); 23 on, by its kind. */
static enum pt__jvm_kind kind_of(struct pt_jvm *j, struct pt__jvm_blob *b)
{
	char name[16];

	if (j->f[JF_CB_KIND].found)
		return pt__jvm_get(j, JF_CB_KIND, b->raw, b->len, 0) == j->c[JC_KIND_NMETHOD] ?
			       PT__JVM_NMETHOD : PT__JVM_STUB;
	if (pt__jvm_cstr(j, b->name, name, sizeof(name)) < 0)
		return PT__JVM_STUB;
	return !strcmp(name, "nmethod") || !strcmp(name, "native nmethod") ? PT__JVM_NMETHOD :
									      PT__JVM_STUB;
}

int pt__jvm_blob_find(struct pt_jvm *j, uint64_t pc, struct pt__jvm_blob *b)
{
	const struct pt__jvm_heap *h = heap_of(j, pc);
	uint64_t idx, block, blob, size;
	uint8_t head[16];
	int err;

	if (!h && pt__jvm_in_cache(j, pc) && pt__now_ns() - j->heaps_ns >= REREAD_NS &&
	    !pt__jvm_cache_read(j))
		h = heap_of(j, pc);
	if (!h)
		return -ENOENT;
	idx = (pc - h->lo) >> h->shift;
	if ((err = block_start(j, h, &idx)))
		return err;
	block = h->lo + (idx << h->shift);
	if (j->f[JF_HB_USED].v + j->f[JF_HB_USED].width > sizeof(head) ||
	    pt__jvm_read(j, block, head, sizeof(head)))
		return -EFAULT;
	if (!pt__jvm_int(head, sizeof(head), j->f[JF_HB_USED].v, j->f[JF_HB_USED].width, 0))
		return -ENOENT;   /* a free block */
	blob = block + j->tsize[JT_HEAPBLOCK];
	memset(b, 0, sizeof(*b));
	b->addr = blob;
	/* An nmethod's fields lie past a stub's end: a small blob at the end
	 * of the committed code is read by its header alone. */
	b->len = j->blob_len;
	if (pt__jvm_read(j, blob, b->raw, b->len)) {
		b->len = j->head_len;
		if (pt__jvm_read(j, blob, b->raw, b->len))
			return -EFAULT;
	}
	b->name = (uint64_t)pt__jvm_get(j, JF_CB_NAME, b->raw, b->len, 0);
	size = (uint64_t)pt__jvm_get(j, JF_CB_SIZE, b->raw, b->len, 1);
	b->frame_size = (int)pt__jvm_get(j, JF_CB_FRAME_SIZE, b->raw, b->len, 1);
	b->fco = (int)pt__jvm_get(j, JF_CB_FCO, b->raw, b->len, 1);
	if (j->f[JF_CB_CODE_BEGIN].found) {
		b->code_begin = (uint64_t)pt__jvm_get(j, JF_CB_CODE_BEGIN, b->raw, b->len, 0);
		b->code_end = (uint64_t)pt__jvm_get(j, JF_CB_CODE_END, b->raw, b->len, 0);
	} else {
		b->code_begin = blob + (uint64_t)pt__jvm_get(j, JF_CB_CODE_OFFSET, b->raw, b->len, 1);
		b->code_end = blob + (uint64_t)pt__jvm_get(j, JF_CB_DATA_OFFSET, b->raw, b->len, 1);
	}
	if (!size || size > MAX_BLOB || b->code_begin < blob || b->code_end > blob + size ||
	    pc < b->code_begin || pc >= b->code_end || b->frame_size < -1 ||
	    b->frame_size > MAX_FRAME_WORDS || !b->name)
		return -EBADMSG;
	if (pc >= j->interp_lo && pc < j->interp_hi) {
		b->kind = PT__JVM_INTERP;
		return 0;
	}
	b->kind = kind_of(j, b);
	if (b->kind == PT__JVM_NMETHOD) {
		if (b->len < j->blob_len)
			return -EFAULT;
		b->method = (uint64_t)pt__jvm_get(j, JF_NM_METHOD, b->raw, b->len, 0);
		b->compile_id = pt__jvm_get(j, JF_NM_COMPILE_ID, b->raw, b->len, 1);
	}
	return 0;
}
