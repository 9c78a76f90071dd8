/* Noticing an exec without waiting for its event: a fingerprint of the
 * target's address space, compared before and after each batch of
 * captures (stop.c), so that stacks taken across an exec are dropped
 * rather than unwound against the wrong program. Sampler thread only. */
#include "ptrace/mechanism/execfp.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/map.h"
#include "ptrace/proc/proc.h"
#include "ptrace/mechanism/mechanism.h"

static uint64_t hash_fingerprint(const unsigned char *buf, ssize_t n)
{
	return n > 0 ? base_hash_bytes(BASE_HASH_SEED, buf, (size_t)n) : 0;
}

/* The fingerprint from /proc/<pid>/stat where auxv cannot be read (mode
 * 0400: a target of another uid, podprof without CAP_DAC_OVERRIDE): its
 * code and stack addresses (startcode, endcode, startstack: fields 26-28,
 * shown to a process that may ptrace it), which every exec randomizes. */
static uint64_t stat_fingerprint(pid_t pid, pid_t alt)
{
	char path[96], buf[1024];
	const char *s, *from = NULL;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)(alt > 0 ? alt : pid));
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || !(s = strrchr(buf, ')')))
		return 0;
	/* The k-th space after the ')' that ends field 2 comes before field k + 2. */
	for (int k = 1; k <= 27 && (s = strchr(s + 1, ' ')); k++)
		if (k == 24)
			from = s;
	return from && s ? hash_fingerprint((const unsigned char *)from, s - from) : 0;
}

/* A hash of the ELF auxiliary vector, which every exec writes anew (the
 * addresses of the stack's random bytes, of the vDSO and of the
 * interpreter: randomized; the entry point, the program headers). One read
 * of /proc/<pid>/auxv costs a third of a microsecond, /proc/<pid>/stat's
 * code and stack addresses 2.8. A leader that ended (pthread_exit) has no
 * address space: then thread `alt`'s (> 0). */
uint64_t pt__execfp_read(struct pt_tracee *t, pid_t alt)
{
	unsigned char buf[1024];
	char path[96];
	uint64_t fp = 0;

	if (t->auxv_fd >= 0)
		fp = hash_fingerprint(buf, pread(t->auxv_fd, buf, sizeof(buf), 0));
	if (!fp && alt > 0) {
		snprintf(path, sizeof(path), "/proc/%d/task/%d/auxv", (int)t->pid, (int)alt);
		fp = hash_fingerprint(buf, pt_proc_slurp(path, (char *)buf, sizeof(buf)));
	}
	if (!fp)
		fp = stat_fingerprint(t->pid, alt);
	return fp;
}

void pt__execfp_open(struct pt_tracee *t)
{
	char path[64];

	if (t->auxv_fd >= 0)
		close(t->auxv_fd);
	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)t->pid);
	t->auxv_fd = open(path, O_RDONLY | O_CLOEXEC);
}
