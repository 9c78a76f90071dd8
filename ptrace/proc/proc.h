/* /proc readers and parsers (CONVENTIONS H14). Parsers take text and never touch the
 * file system, so tests feed them recorded and hostile samples. Any thread. */
#ifndef PT_PROC_H
#define PT_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PT_PROC_MAX_MAPS 65536        /* mappings kept from one maps file */
#define PT_PROC_MAX_PATH 4096

/* Reads up to len-1 bytes of `path` and NUL-terminates. Returns the byte
 * count, -ESRCH when the process or thread is gone (ENOENT/ESRCH), or
 * another negative errno. */
ssize_t pt_proc_slurp(const char *path, char *buf, size_t len);
/* Reads the whole file into a new buffer (caller frees), at most `max` bytes.
 * Returns 0, -E2BIG past max, -ESRCH, -ENOMEM or another negative errno. */
int pt_proc_slurp_alloc(const char *path, size_t max, char **out, size_t *len);

struct pt_stat {
	char comm[64];       /* may hold spaces and ')' */
	char state;          /* R, S, D, T, t, Z, X, I */
	int ppid;
	unsigned long flags; /* PF_* */
	uint64_t utime, stime; /* clock ticks */
	long num_threads;
	uint64_t starttime;
	long rss_pages;
	int processor;       /* the CPU it last ran on, -1 if the line stops before */
};
#define PT_PF_KTHREAD 0x00200000UL

/* Parses /proc/<pid>/stat, e.g.
 *   "1234 (my (app)) S 1 1234 1234 0 -1 4194560 ..." (comm may hold ") ").
 * Fields are read after the last ')'. Returns 0 or -EBADMSG. */
int pt_proc_parse_stat(const char *text, struct pt_stat *out);
/* Parses /proc/<tid>/schedstat "123456 789 10\n": ns on CPU and, each if
 * not NULL, ns spent runnable waiting for a CPU and the number of times the
 * thread got a CPU. */
int pt_proc_parse_schedstat(const char *text, uint64_t *run_ns, uint64_t *wait_ns,
			    uint64_t *slices);
/* Parses /proc/loadavg "0.52 0.58 0.59 3/345 12345\n": the number of threads
 * runnable in the whole system now (3), the reader included. */
int pt_proc_parse_loadavg(const char *text, uint64_t *running);
/* Innermost NSpid from /proc/<pid>/status ("NSpid:\t4321\t7"), or the Pid: line. */
int pt_proc_parse_nspid(const char *text, pid_t *out);
/* Value of "Key:" in status text (e.g. "VmRSS", "TracerPid") as an integer
 * (kB for memory lines). Returns 0, -ENOENT or -EBADMSG. */
int pt_proc_status_value(const char *text, const char *key, long long *out);

/* Parses /proc/<tid>/syscall: "230 0x1 0x0 0x7ffc 0x0 0x0 0x0 0x7ffc1000 0x7f00beef"
 * (number, six arguments, stack pointer, program counter) or "-1 SP PC"
 * (blocked outside a system call). "running" and anything else: -EAGAIN or
 * -EBADMSG. */
int pt_proc_parse_syscall(const char *text, long *nr, uint64_t *sp, uint64_t *pc);

/* "read", "futex", ... for an x86-64 system call number; NULL if unknown. */
const char *pt_syscall_name(int nr);

#define PT_MAP_R 1u
#define PT_MAP_W 2u
#define PT_MAP_X 4u
#define PT_MAP_P 8u
#define PT_MAP_DELETED 16u   /* path ended with " (deleted)" (stripped) */

struct pt_map {
	uint64_t start, end, offset;
	uint64_t inode;
	unsigned int dev_major, dev_minor;
	unsigned int flags;      /* PT_MAP_* */
	const char *path;        /* "" for anonymous; points into pt_maps' text */
};

struct pt_maps {
	struct pt_map *v;
	size_t n;
	char *text;              /* owned copy the paths point into */
};

/* Parses /proc/<pid>/maps text, e.g.
 *   "55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1835 /usr/bin/app (deleted)"
 *   "7ffd5e1f0000-7ffd5e1f2000 r-xp 00000000 00:00 0      [vdso]"
 * Paths may contain spaces; " (deleted)" is stripped and flagged. Lines past
 * PT_PROC_MAX_MAPS are dropped (-E2BIG). Returns 0, -EBADMSG, -E2BIG or -ENOMEM;
 * *out is NULL on failure. */
int pt_proc_parse_maps(const char *text, size_t len, struct pt_maps **out);
int pt_proc_read_maps(pid_t pid, struct pt_maps **out);
void pt_maps_free(struct pt_maps *m);
/* Binary search: the mapping holding addr, or NULL. */
const struct pt_map *pt_maps_find(const struct pt_maps *m, uint64_t addr);

/* One mapping of /proc/<pid>/smaps with the sizes kept, in bytes. */
struct pt_smap {
	struct pt_map map;
	uint64_t rss, pss, private_dirty, swap;
};
struct pt_smaps {
	struct pt_smap *v;
	size_t n;
	char *text;              /* owned copy the paths point into */
};
/* Parses /proc/<pid>/smaps text: a maps line per mapping (as
 * pt_proc_parse_maps), then "Key:   N kB" lines, e.g.
 *   "7f1c2a000000-7f1c2a021000 rw-p 00000000 00:00 0 "
 *   "Rss:                 132 kB"
 *   "VmFlags: rd wr mr mw me ac sd"
 * Rss, Pss, Private_Dirty and Swap are kept; other lines skipped. Returns
 * 0, -EBADMSG, -E2BIG (past PT_PROC_MAX_MAPS, the rest dropped) or -ENOMEM;
 * *out is NULL on failure. Any thread. */
int pt_proc_parse_smaps(const char *text, size_t len, struct pt_smaps **out);
/* Reads and parses /proc/<pid>/smaps (at most 256 MiB of text). Returns 0
 * (also past PT_PROC_MAX_MAPS: the first ones), -ESRCH or another negative
 * errno. */
int pt_proc_read_smaps(pid_t pid, struct pt_smaps **out);
void pt_smaps_free(struct pt_smaps *m);

/* Lists /proc/<pid>/task into a new array (caller frees) of at most `max`.
 * Returns 0, -ESRCH, -E2BIG (array still filled to max) or -ENOMEM. */
int pt_proc_list_tasks(pid_t pid, size_t max, pid_t **out, size_t *n);

#endif
