/* gzip with zlib: one call compresses one buffer into a new one. zlib's
 * own allocations (the deflate state) go through base/ as ours do, so they
 * are counted and can be made to fail. Any thread; no shared state. */
#include "encoder/gz.h"

#include <errno.h>
#include <zlib.h>

#include "base/mem.h"

/* zlib's allocator: a NULL return is its Z_NULL, and deflateInit2 then
 * fails with Z_MEM_ERROR. */
static voidpf gz_alloc(voidpf opaque, uInt items, uInt size)
{
	(void)opaque;
	return base_calloc(items, size);
}

static void gz_free(voidpf opaque, voidpf p)
{
	(void)opaque;
	base_free(p);
}

int enc_gz_compress(const uint8_t *in, size_t len, size_t max, uint8_t **out, size_t *out_len)
{
	z_stream z = { .zalloc = gz_alloc, .zfree = gz_free };
	size_t cap = deflateBound(&z, (uLong)len) + 64;
	uint8_t *buf;
	int zr, err = 0;

	*out = NULL;
	/* 15 window bits + 16: write a gzip header and trailer, not zlib's. */
	if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	cap = deflateBound(&z, (uLong)len) + 64;
	if (cap > max)
		cap = max;
	buf = base_malloc(cap);
	if (!buf) {
		deflateEnd(&z);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = buf;
	z.avail_out = (uInt)cap;
	/* deflateBound() guarantees one Z_FINISH call suffices; anything else
	 * means the cap was hit. */
	zr = deflate(&z, Z_FINISH);
	if (zr != Z_STREAM_END)
		err = zr == Z_OK || zr == Z_BUF_ERROR ? -E2BIG : -EIO;
	*out_len = z.total_out;
	if (deflateEnd(&z) != Z_OK && !err)
		err = -EIO;
	if (err) {
		base_free(buf);
		return err;
	}
	*out = buf;
	return 0;
}
