#include "sidecar/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int sc_log_level = SC_LOG_INFO;
int sc_log_json;

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
	if (write(STDERR_FILENO, line, pos) < 0) {
		/* Nowhere left to report it. */
	}
	errno = saved;
}
