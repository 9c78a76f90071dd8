#include "encoder/gz.h"

#include <errno.h>
#include <stdlib.h>
#include <zlib.h>

int enc_gz_compress(const uint8_t *in, size_t len, size_t max, uint8_t **out, size_t *out_len)
{
	z_stream z = { 0 };
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
	buf = malloc(cap);
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
		free(buf);
		return err;
	}
	*out = buf;
	return 0;
}
