#include "sidecar/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdarg.h>
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

/* Appends `s` JSON-escaped into out[*pos..cap). */
static void json_escape(char *out, size_t *pos, size_t cap, const char *s)
{
	for (; *s && *pos + 7 < cap; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			out[(*pos)++] = '\\';
			out[(*pos)++] = (char)c;
		} else if (c < 0x20) {
			*pos += (size_t)snprintf(out + *pos, cap - *pos, "\\u%04x", c);
		} else {
			out[(*pos)++] = (char)c;
		}
	}
}

void sc_log_write(int level, const char *fmt, ...)
{
	char msg[2048], line[4608], ts[40];
	struct timespec now;
	struct tm tm;
	size_t pos;
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
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
		int n = snprintf(line, sizeof(line), "%s %s %d %s\n", ts,
				 level_names[level], (int)getpid(), msg);
		pos = n < 0 ? 0 : ((size_t)n >= sizeof(line) ? sizeof(line) - 1 : (size_t)n);
		line[pos - 1] = '\n';
	}
	if (atomic_load(&dropped)) {
		char note[96];
		long n = atomic_exchange(&dropped, 0);
		int k = snprintf(note, sizeof(note), "%s warn %d log: %ld lines dropped (stderr full)\n",
				 ts, (int)getpid(), n);

		if (write(log_fd, note, (size_t)k) < 0)
			atomic_fetch_add(&dropped, n);
	}
	if (write(log_fd, line, pos) < 0)
		atomic_fetch_add(&dropped, 1);   /* EAGAIN: nobody reads; else nowhere to say it */
	errno = saved;
}
