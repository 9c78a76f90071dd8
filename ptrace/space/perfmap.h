/* Symbols of just-in-time compiled code from the target's perf map,
 * /tmp/perf-<pid>.map inside its root: one "START SIZE NAME" line per
 * function, hexadecimal without or with 0x (written by node --perf-basic-prof,
 * python -X perf, perf-map-agent for the JVM, LuaJIT, ...). The file belongs
 * to the target, so everything about it is bounded: bytes read, entries kept,
 * name length. Later lines win where ranges overlap (the JIT reused the
 * memory). Parsing never touches the file system. */
#ifndef PT_PERFMAP_H
#define PT_PERFMAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PT_PERFMAP_MAX_BYTES   (64u << 20)  /* larger files: the first 64 MiB */
#define PT_PERFMAP_MAX_ENTRIES 1000000u
#define PT_PERFMAP_MAX_NAME    1024u        /* longer names are cut */

struct pt_perfmap;

/* Parses perf-map text. Malformed lines are skipped and counted in
 * *bad (may be NULL). Returns 0 or -ENOMEM; *out is NULL on failure. */
int pt_perfmap_parse(const char *text, size_t len, struct pt_perfmap **out, size_t *bad);
void pt_perfmap_free(struct pt_perfmap *pm);
size_t pt_perfmap_count(const struct pt_perfmap *pm);
/* The name of the function holding addr, or NULL. */
const char *pt_perfmap_lookup(const struct pt_perfmap *pm, uint64_t addr);

/* Opens /tmp/perf-<nspid>.map in /proc/<pid>/root, resolving every symlink
 * inside the target's root (never ours), refusing anything but a regular
 * file. Returns an fd or a negative errno (-ENOENT: the target writes none). */
int pt_perfmap_open(pid_t pid, pid_t nspid);

#endif
