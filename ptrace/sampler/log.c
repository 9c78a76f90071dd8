/* The sampler's log lines (see log.h). Sampler thread. */
#include "ptrace/sampler/log.h"

#include <stdarg.h>
#include <stdio.h>

#include "ptrace/sampler/state.h"

void pt__log(struct pt_sampler *s, int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!s->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->log(s->arg, level, msg);
}
