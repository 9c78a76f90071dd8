/* The Knative-style switch: a file (a mounted ConfigMap key such as
 * profiling.enable) that says "true" or "false", read once a second on the
 * loop. Kubernetes updates a mounted ConfigMap by writing a new timestamped
 * directory and swapping the "..data" symlink, so the file is re-opened by
 * path on every look: a poll sees the swap whatever inode the name points
 * to, where an inotify watch of the old file would not. Loop thread only. */
#ifndef SC_SWITCH_H
#define SC_SWITCH_H

#include <uv.h>

struct sc_switch;

/* Called on the loop when the state changes (after the change is logged). */
typedef void (*sc_switch_cb)(struct sc_switch *sw, int enabled, void *arg);

/* Reads `path` now (the start state: the file's, else enabled) and looks
 * again every second. Returns 0, -ENOMEM or a libuv error (negative). */
int sc_switch_new(struct sc_switch **out, uv_loop_t *loop, const char *path, sc_switch_cb cb,
		  void *arg);
/* 1 while profiling is enabled. */
int sc_switch_enabled(const struct sc_switch *sw);
/* Stops looking; the memory goes in the timer's close callback. NULL-safe. */
void sc_switch_free(struct sc_switch *sw);

#endif
