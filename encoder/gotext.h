/* A Go program's goroutine profile in Go's own text shapes, over a neutral
 * description of its goroutines: debug=1, runtime/pprof's count profile
 * (goroutines grouped by stack and labels, most common first, frames
 * aligned as Go's tabwriter aligns them), and debug=2, runtime.Stack's
 * dump (Go's panic output: "goroutine N [state, M minutes]:", frames with
 * file:line and +0x offsets, "created by F in goroutine P"). Any thread; no
 * shared state. */
#ifndef ENC_GOTEXT_H
#define ENC_GOTEXT_H

#include <stddef.h>
#include <stdint.h>

/* One frame as Go's traceback has it: a physical frame (the function
 * holding the code at pc) or one inlined into it. */
struct enc_go_frame {
	const char *func;       /* "main.blockChan" */
	const char *file;       /* its source file, NULL: unknown */
	int64_t line;           /* 0: unknown */
	uint64_t pc;            /* the return address (a caller's), or the PC itself (the leaf
				 * of a running goroutine) */
	uint64_t entry;         /* its physical function's entry (0: unknown: no offset) */
	int inlined;            /* inlined into the next frame (no offset of its own) */
};

struct enc_go_goroutine {
	uint64_t id;
	const char *state;      /* "chan receive", "running", ... */
	int64_t wait_minutes;   /* < 1: not printed */
	int locked, scan;
	const uint32_t *frames; /* indices into enc_go_dump.frames, leaf first */
	uint32_t n;
	int64_t created_by;     /* index into frames of the go statement's frame (innermost at
				 * it), and created_by_func the function holding it; -1: none */
	const char *created_by_func;
	uint64_t parent;        /* the creator's id (0: unknown or not printed) */
	const char *labels;     /* debug=1's "{\"k\":\"v\", ...}", NULL: none */
};

struct enc_go_dump {
	const struct enc_go_frame *frames;
	size_t nframes;
	const struct enc_go_goroutine *goroutines;
	size_t n;
	int go_minor;           /* the program's release (1.<minor>): what its own prints */
};

/* debug=1: "goroutine profile: total N", then "C @ pc pc ..." per group
 * (same frames and labels), most common first, "# labels: {...}", and a
 * tab-aligned "#\tpc\tfunc+0xoff\tfile:line" per frame, the runtime's own
 * frames at the top left out as Go leaves them out. Into a new buffer (the
 * caller frees it with base_free) of at most max bytes. Returns 0, -E2BIG
 * past max, or -ENOMEM; *out is NULL on failure. */
int enc_gotext_count_encode(const struct enc_go_dump *d, size_t max, char **out, size_t *len);
/* debug=2: every goroutine by increasing id, as runtime.Stack(all) prints
 * it. Returns and owns as enc_gotext_count_encode. */
int enc_gotext_dump_encode(const struct enc_go_dump *d, size_t max, char **out, size_t *len);
/* Go's labelMap.String: {"k":"v", ...}, the quoted pairs sorted, into
 * buf[0..len) (cut at len). kv holds n keys and values alternately. */
void enc_gotext_labels(const char *const *kv, size_t n, char *buf, size_t len);

#endif
