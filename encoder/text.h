/* Go's legacy text profiles (runtime/pprof, debug >= 1) over a neutral
 * description of stacks: the count profile of debug=1 (stacks grouped,
 * most common first) and the panic-style dump of goroutine?debug=2. The
 * caller fills the description from whatever its stacks come from; this
 * module knows nothing of the sampler. Any thread; no shared state. */
#ifndef ENC_TEXT_H
#define ENC_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* A code location (one frame). */
struct enc_text_loc {
	uint64_t addr;
	const char *name;       /* function name or "module+0x...", never NULL */
	const char *file;       /* path of its mapping, or NULL for anonymous memory */
	uint64_t file_off;      /* addr as an offset into file */
	int64_t line;           /* > 0: a source line of file (interpreted code) */
};

/* One stack (one thread, in a thread dump). */
struct enc_text_stack {
	const uint32_t *locs;   /* indices into enc_text_profile.locs, leaf first */
	uint32_t n;
	int64_t count;          /* the weight the count profile sums */
	int64_t id;             /* thread id: Go's goroutine number in the dump */
	const char *thread;     /* thread name */
	const char *state;      /* "running", "sleeping", ... */
	const char *syscall;    /* system call it is in ("?" if unnamed), or NULL */
	int64_t weight;         /* contention: the delay (ns) */
	/* heap: inuse_objects, inuse_bytes, alloc_objects, alloc_bytes, as sampled */
	int64_t heap[4];
	/* A text of several processes: this stack's (its pid, 0: one process,
	 * and name). Stacks of different processes are never grouped. */
	int64_t pid;
	const char *process;
};

struct enc_text_profile {
	const char *name;       /* "goroutine": the count profile's "<name> profile:" */
	const struct enc_text_loc *locs;
	size_t nlocs;
	const struct enc_text_stack *stacks;
	size_t nstacks;
	/* What the text lacks and why, lines separated by '\n' (NULL: none):
	 * each printed as a line "# podprof: <line>", after the count
	 * profile's first line, before the dump's first block. */
	const char *note;
};

/* debug=1: "<name> profile: total <nstacks>", then one record per distinct
 * stack (same addresses, same process), counts summed, largest first:
 * "N @ pc pc ...", a line "# labels: {"pid":"N", "process":"name"}" in a
 * text of several processes (as Go prints a goroutine's labels), then
 * "#\tpc\tname\tfile +off" per frame. The text goes into a new
 * buffer (the caller frees it with base_free) of at most max bytes.
 * Returns 0, -E2BIG past max, or -ENOMEM; *out is NULL on failure. */
int enc_text_count_encode(const struct enc_text_profile *p, size_t max, char **out, size_t *len);

/* goroutine?debug=2: one block per stack, by increasing id, shaped like
 * Go's panic output: "goroutine <id> [<state>, syscall <sc>, thread
 * "<name>"]:", then "name(...)" and "\tfile +off" per frame. In a text of
 * several processes, by process (increasing pid), each under a line
 * "process <pid> (<name>):". Returns and
 * owns as enc_text_count_encode. */
int enc_text_dump_encode(const struct enc_text_profile *p, size_t max, char **out, size_t *len);

/* block and mutex, debug=1: Go's "--- contention:" (kind "contention") or
 * "--- mutex:" text, delays in ns as cycles at cycles/second=1000000000:
 * "<delay> <count> @ pc pc ..." per distinct stack, largest delay first,
 * then "#\tpc\tname\tfile +off" per frame. Returns and owns as
 * enc_text_count_encode. */
int enc_text_contention_encode(const struct enc_text_profile *p, const char *kind, size_t max,
			       char **out, size_t *len);

/* heap and allocs with allocation stacks, debug=1: Go's heap text,
 * "heap profile: I: IB [A: AB] @ heap/<2*rate>" (the totals; Go writes
 * twice its rate there, which pprof's reader expects), then per stack
 * "i: ib [a: ab] @ pc pc ...", most bytes in use first, and a "#" line per
 * frame. Values as given: Go prints them as sampled with its rate, and
 * pprof scales them when it reads the text; with rate 1 ("heap/2") they
 * are read as they are. Returns and owns as enc_text_count_encode. */
int enc_text_heap_encode(const struct enc_text_profile *p, uint64_t rate, size_t max, char **out,
			 size_t *len);

#endif
