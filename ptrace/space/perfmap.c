/* A JIT's perf map (see perfmap.h): parsed once into entries sorted by
 * start, with their names in one buffer, and looked up by binary search;
 * opened inside the target's root without following its links. Any
 * thread; a parsed map is read-only, so threads may share it. */
#include "ptrace/space/perfmap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/mem.h"

struct entry {
	uint64_t start, end;
	uint32_t name;          /* offset in names */
	uint32_t seq;           /* line order: later wins */
};

struct pt_perfmap {
	struct entry *v;
	size_t n;
	char *names;
};

/* Overlapping entries searched below the best candidate. JITs rarely stack
 * more than a few generations of code on one address. */
#define OVERLAP_SCAN 64

static int parse_hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int digits = 0;

	if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (; s < end; s++, digits++) {
		int d;

		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		if (v >> 60)
			return -1;   /* more than 64 bits */
		v = v << 4 | (uint64_t)d;
	}
	if (!digits)
		return -1;
	*p = s;
	*out = v;
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* One line, without its '\n'. Returns 0 with the fields or -1 if malformed. */
static int parse_line(const char *s, const char *end, uint64_t *start, uint64_t *size,
		      const char **name, size_t *name_len)
{
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	if (parse_hex(&s, end, start) || s == end || (*s != ' ' && *s != '\t'))
		return -1;
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	if (parse_hex(&s, end, size) || s == end || (*s != ' ' && *s != '\t'))
		return -1;
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	while (end > s && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (s == end || memchr(s, '\0', (size_t)(end - s)))
		return -1;
	if (!*size || *start + *size < *start)
		return -1;
	*name = s;
	*name_len = (size_t)(end - s);
	if (*name_len > PT_PERFMAP_MAX_NAME)
		*name_len = PT_PERFMAP_MAX_NAME;
	return 0;
}

int pt_perfmap_parse(const char *text, size_t len, struct pt_perfmap **out, size_t *bad)
{
	struct pt_perfmap *pm;
	const char *p = text, *end;
	size_t lines = 0, nbad = 0, names_len = 0;

	*out = NULL;
	if (bad)
		*bad = 0;
	if (len > PT_PERFMAP_MAX_BYTES)
		len = PT_PERFMAP_MAX_BYTES;
	end = text + len;
	for (const char *q = text; q < end && (q = memchr(q, '\n', (size_t)(end - q))); q++)
		lines++;
	lines++;
	if (lines > PT_PERFMAP_MAX_ENTRIES)
		lines = PT_PERFMAP_MAX_ENTRIES;
	pm = base_calloc(1, sizeof(*pm));
	if (!pm)
		return -ENOMEM;
	/* Names never outgrow the text: each is a cut of its own line plus NUL. */
	pm->v = base_reallocarray(NULL, lines, sizeof(*pm->v));
	pm->names = base_malloc(len + 1);
	if (!pm->v || !pm->names) {
		pt_perfmap_free(pm);
		return -ENOMEM;
	}
	while (p < end && pm->n < lines) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *name;
		const char *le = nl ? nl : end;
		uint64_t start, size;
		size_t nlen;

		if (le == p || parse_line(p, le, &start, &size, &name, &nlen)) {
			nbad += le != p;
		} else {
			struct entry *e = &pm->v[pm->n];

			e->start = start;
			e->end = start + size;
			e->name = (uint32_t)names_len;
			e->seq = (uint32_t)pm->n;
			memcpy(pm->names + names_len, name, nlen);
			names_len += nlen;
			pm->names[names_len++] = '\0';
			pm->n++;
		}
		p = le + 1;
	}
	qsort(pm->v, pm->n, sizeof(*pm->v), cmp_entry);
	if (bad)
		*bad = nbad;
	*out = pm;
	return 0;
}

void pt_perfmap_free(struct pt_perfmap *pm)
{
	if (!pm)
		return;
	base_free(pm->v);
	base_free(pm->names);
	base_free(pm);
}

size_t pt_perfmap_count(const struct pt_perfmap *pm)
{
	return pm ? pm->n : 0;
}

const char *pt_perfmap_lookup(const struct pt_perfmap *pm, uint64_t addr)
{
	const struct entry *best = NULL;
	size_t lo = 0, hi, stop;

	if (!pm || !pm->n)
		return NULL;
	/* lo = the number of entries starting at or below addr. */
	hi = pm->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pm->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	stop = lo > OVERLAP_SCAN ? lo - OVERLAP_SCAN : 0;
	for (size_t i = lo; i > stop; i--) {
		const struct entry *e = &pm->v[i - 1];

		if (addr < e->end && (!best || e->seq > best->seq))
			best = e;
	}
	return best ? pm->names + best->name : NULL;
}

static int open_in_root(int root, const char *rel)
{
	struct open_how how = {
		.flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, root, rel, &how, sizeof(how));

	if (fd >= 0 || errno != ENOSYS)
		return fd >= 0 ? (int)fd : -errno;
	/* Kernels before 5.6: no symlink at all, neither /tmp nor the file. */
	int dir = openat(root, "tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), f;

	if (dir < 0)
		return -errno;
	f = openat(dir, strchr(rel, '/') + 1, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
	f = f < 0 ? -errno : f;
	close(dir);
	return f;
}

int pt_perfmap_open(pid_t pid, pid_t nspid)
{
	char path[64], rel[64];
	struct stat st;
	int root, fd;

	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	snprintf(rel, sizeof(rel), "tmp/perf-%d.map", (int)nspid);
	root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	fd = open_in_root(root, rel);
	close(root);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}
