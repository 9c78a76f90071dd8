/* The trace as Chrome Trace Event JSON (Perfetto, speedscope, chrome://
 * tracing): each thread's states as slices, CPU samples as a V8 profile.
 * Any thread. */
#ifndef ENC_TRACE_JSON_H
#define ENC_TRACE_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "encoder/trace.h"

/* Writes Chrome Trace Event JSON, gzip-compressed if gz, into a new buffer
 * (the caller frees it with base_free) of at most max bytes. Returns 0, -E2BIG, -EINVAL or
 * -ENOMEM. */
int enc_trace_json(const struct enc_trace *tr, size_t max, int gz, uint8_t **out, size_t *len);

#endif
