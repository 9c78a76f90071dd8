/* A log line through the sampler's log hook (pt_sampler_new's `log`), for
 * the sampler's files and the session kinds: ptrace/ logs nothing itself,
 * the hook decides what the user sees. Sampler thread. */
#ifndef PT_LOG_H
#define PT_LOG_H

struct pt_sampler;

/* Writes a log line: level 0 debug, 1 info, 2 warning; cut at 511 bytes. */
void pt__log(struct pt_sampler *s, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
