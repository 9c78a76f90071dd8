/* The /proc readers and parsers (see proc.h): whole files read into memory
 * of their own, and maps, smaps, stat, status and syscall lines parsed from
 * text, every field through a bounded cursor. Any thread: nothing here is
 * shared. */
#include "ptrace/proc/proc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/array.h"
#include "base/buf.h"
#include "base/mem.h"

static int vanished(int err)
{
	return err == -ENOENT || err == -ESRCH ? -ESRCH : err;
}

ssize_t pt_proc_slurp(const char *path, char *buf, size_t len)
{
	size_t got = 0;
	int fd, err = 0;

	if (len == 0)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return vanished(-errno);
	while (got < len - 1) {
		ssize_t n = read(fd, buf + got, len - 1 - got);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = vanished(-errno);
			break;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return err ? err : (ssize_t)got;
}

int pt_proc_slurp_alloc(const char *path, size_t max, char **out, size_t *len)
{
	struct base_buf b;
	size_t got;
	int fd, err;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return vanished(-errno);
	/* The first read takes most files whole (16 KiB: about 160 lines of
	 * a maps file); the buffer doubles from there, up to max
	 * bytes: a file that fills them is -E2BIG. Reads go straight into the
	 * room reserved. */
	base_buf_init(&b, max);
	err = base_buf_reserve(&b, max < 16383 ? max : 16383);
	while (!err && !(err = base_buf_reserve(&b, 1))) {
		ssize_t n = read(fd, b.data + b.len, b.cap - 1 - b.len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = vanished(-errno);
			break;
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
		b.data[b.len] = '\0';
	}
	close(fd);
	if (err) {
		base_buf_free(&b);
		return err;
	}
	if ((err = base_buf_take(&b, out, &got)))
		return err;
	if (len)
		*len = got;
	return 0;
}

/* Cursor helpers for space-separated numeric fields. */
static int next_u64(const char **cur, uint64_t *out)
{
	const char *s = *cur;
	char *end;

	while (*s == ' ')
		s++;
	if (!isdigit((unsigned char)*s))
		return -EBADMSG;
	errno = 0;
	*out = strtoull(s, &end, 10);
	if (errno)
		return -EBADMSG;
	*cur = end;
	return 0;
}

static int next_i64(const char **cur, long long *out)
{
	const char *s = *cur;
	char *end;

	while (*s == ' ')
		s++;
	if (*s != '-' && !isdigit((unsigned char)*s))
		return -EBADMSG;
	errno = 0;
	*out = strtoll(s, &end, 10);
	if (errno || end == s)
		return -EBADMSG;
	*cur = end;
	return 0;
}

static int skip_fields(const char **cur, int n)
{
	const char *s = *cur;

	while (n-- > 0) {
		while (*s == ' ')
			s++;
		if (!*s)
			return -EBADMSG;
		while (*s && *s != ' ')
			s++;
	}
	*cur = s;
	return 0;
}

int pt_proc_parse_stat(const char *text, struct pt_stat *out)
{
	const char *open = strchr(text, '('), *close = strrchr(text, ')'), *s;
	long long v;
	uint64_t u;
	size_t n;

	memset(out, 0, sizeof(*out));
	if (!open || !close || close < open)
		return -EBADMSG;
	n = (size_t)(close - open - 1);
	if (n >= sizeof(out->comm))
		n = sizeof(out->comm) - 1;
	memcpy(out->comm, open + 1, n);
	out->comm[n] = '\0';
	s = close + 1;
	/* field 3: state */
	while (*s == ' ')
		s++;
	if (!*s || !isalpha((unsigned char)*s))
		return -EBADMSG;
	out->state = *s++;
	if (next_i64(&s, &v))          /* 4 ppid */
		return -EBADMSG;
	out->ppid = (int)v;
	if (skip_fields(&s, 4))        /* 5 pgrp .. 8 tpgid */
		return -EBADMSG;
	if (next_u64(&s, &u))          /* 9 flags */
		return -EBADMSG;
	out->flags = (unsigned long)u;
	if (skip_fields(&s, 4))        /* 10 minflt .. 13 cmajflt */
		return -EBADMSG;
	if (next_u64(&s, &out->utime) || next_u64(&s, &out->stime))  /* 14, 15 */
		return -EBADMSG;
	if (skip_fields(&s, 4))        /* 16 cutime .. 19 nice */
		return -EBADMSG;
	if (next_i64(&s, &v))          /* 20 num_threads */
		return -EBADMSG;
	out->num_threads = (long)v;
	if (skip_fields(&s, 1))        /* 21 itrealvalue */
		return -EBADMSG;
	if (next_u64(&s, &out->starttime))  /* 22 */
		return -EBADMSG;
	if (skip_fields(&s, 1) || next_i64(&s, &v))  /* 23 vsize, 24 rss */
		return -EBADMSG;
	out->rss_pages = (long)v;
	out->processor = -1;
	if (!skip_fields(&s, 14) && !next_i64(&s, &v))  /* 25 rsslim .. 38, 39 processor */
		out->processor = (int)v;
	return 0;
}

int pt_proc_parse_schedstat(const char *text, uint64_t *run_ns, uint64_t *wait_ns,
			    uint64_t *slices)
{
	uint64_t wait;
	int err = next_u64(&text, run_ns);

	if (err || (!wait_ns && !slices))
		return err;
	if ((err = next_u64(&text, wait_ns ? wait_ns : &wait)))
		return err;
	return slices ? next_u64(&text, slices) : 0;
}

int pt_proc_parse_loadavg(const char *text, uint64_t *running)
{
	const char *s = text;

	for (int i = 0; i < 3; i++) {   /* the three load averages */
		while (*s == ' ')
			s++;
		if (!*s || *s == ' ')
			return -EBADMSG;
		while (*s && *s != ' ')
			s++;
	}
	return next_u64(&s, running) || *s != '/' ? -EBADMSG : 0;
}

static int next_hex(const char **cur, uint64_t *out)
{
	const char *s = *cur;
	char *end;

	while (*s == ' ')
		s++;
	if (s[0] != '0' || s[1] != 'x' || !isxdigit((unsigned char)s[2]))
		return -EBADMSG;
	errno = 0;
	*out = strtoull(s + 2, &end, 16);
	if (errno)
		return -EBADMSG;
	*cur = end;
	return 0;
}

static const char *const syscall_names[] = {
#include "syscalls.h"
};

const char *pt_syscall_name(int nr)
{
	if (nr < 0 || (size_t)nr >= sizeof(syscall_names) / sizeof(syscall_names[0]))
		return NULL;
	return syscall_names[nr];
}

int pt_proc_parse_syscall(const char *text, long *nr, uint64_t *sp, uint64_t *pc)
{
	long long n;
	uint64_t arg;

	if (!strncmp(text, "running", 7))
		return -EAGAIN;
	if (next_i64(&text, &n) || n < -1 || n > 4095)
		return -EBADMSG;
	if (n >= 0)
		for (int i = 0; i < 6; i++)
			if (next_hex(&text, &arg))
				return -EBADMSG;
	if (next_hex(&text, sp) || next_hex(&text, pc))
		return -EBADMSG;
	*nr = (long)n;
	return 0;
}

int pt_proc_status_value(const char *text, const char *key, long long *out)
{
	size_t klen = strlen(key);
	const char *line = text;

	while (line && *line) {
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			const char *s = line + klen + 1;

			while (*s == ' ' || *s == '\t')
				s++;
			return next_i64(&s, out) ? -EBADMSG : 0;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -ENOENT;
}

int pt_proc_parse_nspid(const char *text, pid_t *out)
{
	const char *line = strstr(text, "\nNSpid:");
	long long v = 0;

	if (line) {
		const char *s = line + 7;
		int found = 0;

		/* "NSpid:\t4321\t7": the last number is the PID in the innermost namespace. */
		while (*s && *s != '\n') {
			while (*s == '\t' || *s == ' ')
				s++;
			if (*s == '\n' || !*s)
				break;
			if (next_i64(&s, &v))
				return -EBADMSG;
			found = 1;
		}
		if (found && v > 0 && v <= INT_MAX) {
			*out = (pid_t)v;
			return 0;
		}
		return -EBADMSG;
	}
	if (pt_proc_status_value(text, "Pid", &v) || v <= 0 || v > INT_MAX)
		return -EBADMSG;
	*out = (pid_t)v;
	return 0;
}

static int parse_hex(const char **cur, uint64_t *out, char stop)
{
	const char *s = *cur;
	char *end;

	if (!isxdigit((unsigned char)*s))
		return -EBADMSG;
	errno = 0;
	*out = strtoull(s, &end, 16);
	if (errno || *end != stop)
		return -EBADMSG;
	*cur = end + 1;
	return 0;
}

static int parse_map_line(char *line, struct pt_map *m)
{
	const char *s = line;
	uint64_t maj, min, inode;
	char *path;
	size_t plen;

	memset(m, 0, sizeof(*m));
	if (parse_hex(&s, &m->start, '-') || parse_hex(&s, &m->end, ' '))
		return -EBADMSG;
	if (strlen(s) < 5 || s[4] != ' ')
		return -EBADMSG;
	m->flags = (s[0] == 'r' ? PT_MAP_R : 0) | (s[1] == 'w' ? PT_MAP_W : 0) |
		   (s[2] == 'x' ? PT_MAP_X : 0) | (s[3] == 'p' ? PT_MAP_P : 0);
	s += 5;
	if (parse_hex(&s, &m->offset, ' ') || parse_hex(&s, &maj, ':') || parse_hex(&s, &min, ' '))
		return -EBADMSG;
	if (next_u64(&s, &inode))
		return -EBADMSG;
	if (m->end < m->start)
		return -EBADMSG;
	m->dev_major = (unsigned int)maj;
	m->dev_minor = (unsigned int)min;
	m->inode = inode;
	while (*s == ' ')
		s++;
	path = (char *)s;
	plen = strlen(path);
	if (plen >= 10 && !strcmp(path + plen - 10, " (deleted)")) {
		path[plen - 10] = '\0';
		m->flags |= PT_MAP_DELETED;
	}
	m->path = path;
	return 0;
}

/* The next line of a text split in place, NUL-terminated; advances *next. */
static char *next_line(char **next)
{
	char *line = *next, *nl;

	if (!line || !*line)
		return NULL;
	nl = strchr(line, '\n');
	if (nl)
		*nl++ = '\0';
	*next = nl;
	return line;
}

int pt_proc_parse_maps(const char *text, size_t len, struct pt_maps **out)
{
	struct pt_maps *m;
	size_t cap = 0;
	char *line, *next;
	int err = 0;

	*out = NULL;
	m = base_calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	/* Room for 64 mappings at first (a small program's whole maps). */
	m->text = base_malloc(len + 1);
	if (!m->text || BASE_ARRAY_RESERVE(m->v, cap, 64)) {
		err = -ENOMEM;
		goto out;
	}
	memcpy(m->text, text, len);
	m->text[len] = '\0';
	next = m->text;
	while ((line = next_line(&next))) {
		struct pt_map *e;

		if (m->n == PT_PROC_MAX_MAPS) {
			err = -E2BIG;
			break;
		}
		if (!(e = BASE_ARRAY_PUSH(m->v, m->n, cap))) {
			err = -ENOMEM;
			goto out;
		}
		if (parse_map_line(line, e)) {
			err = -EBADMSG;
			goto out;
		}
	}
	*out = m;
	m = NULL;
out:
	pt_maps_free(m);
	return err;
}

int pt_proc_read_maps(pid_t pid, struct pt_maps **out)
{
	char path[64], *text;
	size_t len;
	int err;

	*out = NULL;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	err = pt_proc_slurp_alloc(path, 64u << 20, &text, &len);
	if (err)
		return err;
	err = pt_proc_parse_maps(text, len, out);
	base_free(text);
	return err == -E2BIG && *out ? 0 : err;
}

void pt_maps_free(struct pt_maps *m)
{
	if (!m)
		return;
	base_free(m->v);
	base_free(m->text);
	base_free(m);
}

const struct pt_map *pt_maps_find(const struct pt_maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m ? m->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < m->v[mid].start)
			hi = mid;
		else if (addr >= m->v[mid].end)
			lo = mid + 1;
		else
			return &m->v[mid];
	}
	return NULL;
}

int pt_proc_list_tasks(pid_t pid, size_t max, pid_t **out, size_t *n)
{
	char path[64];
	struct dirent *de;
	size_t cap = 0;
	pid_t *v = NULL, *e;
	DIR *d;
	int err = 0;

	*out = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return vanished(-errno);
	if (BASE_ARRAY_RESERVE(v, cap, 16)) {
		closedir(d);
		return -ENOMEM;
	}
	while ((de = readdir(d))) {
		char *end;
		long t;

		errno = 0;
		t = strtol(de->d_name, &end, 10);
		if (errno || *end || end == de->d_name || t <= 0 || t > INT_MAX)
			continue;
		if (*n == max) {
			err = -E2BIG;
			break;
		}
		if (!(e = BASE_ARRAY_PUSH(v, *n, cap))) {
			err = -ENOMEM;
			break;
		}
		*e = (pid_t)t;
	}
	closedir(d);
	if (err == -ENOMEM) {
		base_free(v);
		*n = 0;
		return err;
	}
	*out = v;
	return err;
}

/* "Rss:                 123 kB" -> bytes into the field of its key, if it
 * is one we keep. Other lines (VmFlags, THPeligible, ...) are skipped. */
static void smaps_field(const char *line, struct pt_smap *e)
{
	static const struct { const char *key; size_t off; } keys[] = {
		{ "Rss:", offsetof(struct pt_smap, rss) },
		{ "Pss:", offsetof(struct pt_smap, pss) },
		{ "Private_Dirty:", offsetof(struct pt_smap, private_dirty) },
		{ "Swap:", offsetof(struct pt_smap, swap) },
	};
	const char *s;
	uint64_t kb;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		size_t kl = strlen(keys[i].key);

		if (strncmp(line, keys[i].key, kl))
			continue;
		s = line + kl;
		while (*s == ' ')
			s++;
		if (!next_u64(&s, &kb) && kb < (UINT64_MAX >> 10))
			*(uint64_t *)(void *)((char *)e + keys[i].off) = kb << 10;
		return;
	}
}

int pt_proc_parse_smaps(const char *text, size_t len, struct pt_smaps **out)
{
	struct pt_smaps *m;
	size_t cap = 0;
	char *line, *next;
	int err = 0;

	*out = NULL;
	if (!(m = base_calloc(1, sizeof(*m))))
		return -ENOMEM;
	m->text = base_malloc(len + 1);
	if (!m->text || BASE_ARRAY_RESERVE(m->v, cap, 64)) {
		err = -ENOMEM;
		goto out;
	}
	memcpy(m->text, text, len);
	m->text[len] = '\0';
	next = m->text;
	while ((line = next_line(&next))) {
		struct pt_smap *e;

		/* A field line starts with a capital letter; a mapping's header
		 * with its hex start address. */
		if (isupper((unsigned char)line[0])) {
			if (m->n)
				smaps_field(line, &m->v[m->n - 1]);
			continue;
		}
		if (m->n == PT_PROC_MAX_MAPS) {
			err = -E2BIG;
			break;
		}
		if (!(e = BASE_ARRAY_PUSH(m->v, m->n, cap))) {
			err = -ENOMEM;
			goto out;
		}
		if (parse_map_line(line, &e->map)) {
			err = -EBADMSG;
			goto out;
		}
	}
	*out = m;
	m = NULL;
out:
	pt_smaps_free(m);
	return err;
}

int pt_proc_read_smaps(pid_t pid, struct pt_smaps **out)
{
	char path[64], *text;
	size_t len;
	int err;

	*out = NULL;
	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	err = pt_proc_slurp_alloc(path, 256u << 20, &text, &len);
	if (err)
		return err;
	err = pt_proc_parse_smaps(text, len, out);
	base_free(text);
	return err == -E2BIG && *out ? 0 : err;
}

void pt_smaps_free(struct pt_smaps *m)
{
	if (!m)
		return;
	base_free(m->v);
	base_free(m->text);
	base_free(m);
}
