/* gzip (RFC 1952) with zlib. Any thread. */
#ifndef ENC_GZ_H
#define ENC_GZ_H

#include <stddef.h>
#include <stdint.h>

/* Compresses in[0..len) into a new buffer (the caller frees it with
 * base_free) of at most max bytes. Returns 0, -E2BIG past max, -ENOMEM or
 * -EIO (zlib error). */
int enc_gz_compress(const uint8_t *in, size_t len, size_t max, uint8_t **out, size_t *out_len);

#endif
