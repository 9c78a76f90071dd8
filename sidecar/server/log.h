/* Logging: one line per event on stderr, text or JSON lines (CONVENTIONS H19).
 * Thread-safe: each line is formatted into a local buffer and written with
 * one write(2). Never log secrets. */
#ifndef SC_LOG_H
#define SC_LOG_H

enum sc_log_level { SC_LOG_DEBUG, SC_LOG_INFO, SC_LOG_WARN, SC_LOG_ERROR };

extern int sc_log_level;      /* set once at start-up */
extern int sc_log_json;       /* 1: JSON lines */

/* Start-up: if stderr is a pipe, log through a non-blocking description of
 * it, dropping (and later counting) lines while nobody reads it. */
void sc_log_init(void);
/* Parses "debug|info|warn|error"; returns the level or -EINVAL. */
int sc_log_parse_level(const char *s);
void sc_log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define SC_LOG(lvl, ...) do { if ((lvl) >= sc_log_level) sc_log_write((lvl), __VA_ARGS__); } while (0)
#define log_debug(...) SC_LOG(SC_LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  SC_LOG(SC_LOG_INFO, __VA_ARGS__)
#define log_warn(...)  SC_LOG(SC_LOG_WARN, __VA_ARGS__)
#define log_error(...) SC_LOG(SC_LOG_ERROR, __VA_ARGS__)

#endif
