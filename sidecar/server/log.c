/* The logger (see log.h): a line per event, formatted into a buffer of
 * the caller's stack and written with one write(2), so that lines of the
 * loop, sampler and work threads never interleave; stderr made
 * non-blocking when it is a pipe nobody may read, the lines dropped then
 * counted. Any thread; sc_log_init at start-up. */
#include "sidecar/server/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int sc_log_level = SC_LOG_INFO;
int sc_log_json;
static int log_fd = STDERR_FILENO;
static atomic_long dropped;

void sc_log_init(void)
{
	struct stat st;
	int fd;

	/* A pipe nobody drains must not stall the sampler (and with it the
	 * signals it passes on to the target): write to our own non-blocking
	 * description of it and drop lines that do not fit. Only for a pipe:
	 * reopening a file would lose O_APPEND, and a tty never fills. */
	if (fstat(STDERR_FILENO, &st) || !S_ISFIFO(st.st_mode))
		return;
	fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0)
		log_fd = fd;
}

static const char *const level_names[] = { "debug", "info", "warn", "error" };

int sc_log_parse_level(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, level_names[i]))
			return i;
	return -EINVAL;
}

/* The length of the valid UTF-8 sequence at s (n bytes left), or 0 when
 * the bytes there are not one (a stray continuation byte, an overlong
 * form, a surrogate, past U+10FFFF, or cut short). RFC 3629, section 4. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

/* A message vsnprintf cut at `len` bytes may end inside a character: drop
 * that partial character. */
static size_t trim_partial(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t back = 1; back <= 3 && back <= len; back++) {
		unsigned char c = u[len - back];

		if ((c & 0xc0) == 0x80)
			continue;   /* a continuation byte: look further back */
		if (c >= 0xc0 && !utf8_len(u + len - back, back))
			return len - back;
		break;
	}
	return len;
}

/* Appends `s` JSON-escaped into out[*pos..cap): quotes, backslashes and
 * control characters escaped, and bytes that are not UTF-8 (a target's
 * comm, exe or paths may hold any) replaced with U+FFFD, as Go's
 * encoding/json does, so that every line is valid JSON. Stops before a
 * character that does not fit whole. */
static void json_escape(char *out, size_t *pos, size_t cap, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		unsigned char c = u[i];
		size_t len = utf8_len(u + i, n - i);

		if (len == 1 && (c == '"' || c == '\\')) {
			if (*pos + 2 > cap)
				return;
			out[(*pos)++] = '\\';
			out[(*pos)++] = (char)c;
		} else if (len == 1 && (c < 0x20 || c == 0x7f)) {
			if (*pos + 6 > cap)
				return;
			*pos += (size_t)snprintf(out + *pos, cap - *pos, "\\u%04x", c);
		} else if (len) {
			if (*pos + len > cap)
				return;
			memcpy(out + *pos, s + i, len);
			*pos += len;
		} else {
			if (*pos + 3 > cap)
				return;
			memcpy(out + *pos, "\xef\xbf\xbd", 3);   /* U+FFFD */
			*pos += 3;
			len = 1;
		}
		i += len;
	}
}

void sc_log_write(int level, const char *fmt, ...)
{
	char msg[2048], line[4608], ts[40];
	struct timespec now;
	struct tm tm;
	size_t pos;
	va_list ap;
	int saved = errno, n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(msg))
		msg[trim_partial(msg, sizeof(msg) - 1)] = '\0';
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	pos = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + pos, sizeof(ts) - pos, ".%03ldZ", now.tv_nsec / 1000000);

	if (sc_log_json) {
		pos = (size_t)snprintf(line, sizeof(line),
				       "{\"ts\":\"%s\",\"level\":\"%s\",\"pid\":%d,\"msg\":\"",
				       ts, level_names[level], (int)getpid());
		json_escape(line, &pos, sizeof(line) - 3, msg);
		memcpy(line + pos, "\"}\n", 3);
		pos += 3;
	} else {
		n = snprintf(line, sizeof(line), "%s %s %d %s\n", ts,
			     level_names[level], (int)getpid(), msg);
		pos = n < 0 ? 0 : ((size_t)n >= sizeof(line) ? sizeof(line) - 1 : (size_t)n);
		line[pos - 1] = '\n';
	}
	if (atomic_load(&dropped)) {
		char note[160];
		long nd = atomic_exchange(&dropped, 0);
		int k = snprintf(note, sizeof(note), sc_log_json ?
				 "{\"ts\":\"%s\",\"level\":\"warn\",\"pid\":%d,\"msg\":\"log: %ld lines "
				 "dropped (stderr full)\"}\n" :
				 "%s warn %d log: %ld lines dropped (stderr full)\n", ts, (int)getpid(), nd);

		if (write(log_fd, note, (size_t)k) < 0)
			atomic_fetch_add(&dropped, nd);
	}
	if (write(log_fd, line, pos) < 0)
		atomic_fetch_add(&dropped, 1);   /* EAGAIN: nobody reads; else nowhere to say it */
	errno = saved;
}
