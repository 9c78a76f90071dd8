/* The switch file's poll (see switch.h): a timer and the file's path,
 * owned by struct sc_switch, freed once the timer's handle is closed.
 * Loop thread only. */
#include "sidecar/server/switch.h"

#include <errno.h>
#include <string.h>

#include "base/mem.h"
#include "ptrace/proc/proc.h"
#include "sidecar/server/log.h"
#include "sidecar/server/util.h"

#define POLL_MS 1000

struct sc_switch {
	uv_timer_t timer;
	char *path;
	int enabled;
	/* What the last look found ("true", "false", or why it could not
	 * tell): a line is logged only when this changes, not every second. */
	char seen[160];
	sc_switch_cb cb;
	void *arg;
};

/* Reads the file: 1 (true), 0 (false), or -1 with why in `why`. Whitespace
 * around the word is ignored, as a ConfigMap value often ends in "\n". */
static int look(const char *path, char *why, size_t size)
{
	char buf[256];
	ssize_t n = pt_proc_slurp(path, buf, sizeof(buf));
	char *s = buf, *e;

	if (n < 0) {
		snprintf(why, size, "cannot read it (%s)",
			 n == -ESRCH ? "it is missing" : sc_strerror((int)n));
		return -1;
	}
	if ((size_t)n >= sizeof(buf) - 1) {
		snprintf(why, size, "it holds more than true, false, enabled or disabled");
		return -1;
	}
	s += strspn(s, " \t\r\n");
	e = s + strlen(s);
	while (e > s && strchr(" \t\r\n", e[-1]))
		e--;
	*e = '\0';
	/* Knative's words: profiling.enable "true"/"false" up to 1.18,
	 * runtime-profiling "enabled"/"disabled" from 1.19. */
	if (!strcmp(s, "true") || !strcmp(s, "enabled"))
		return 1;
	if (!strcmp(s, "false") || !strcmp(s, "disabled"))
		return 0;
	/* The file's words may be anything: quote a short, printable part. */
	for (char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f || *p == '\'')
			*p = '?';
	snprintf(why, size, "it says '%.40s%s', not true, false, enabled or disabled", s,
		 strlen(s) > 40 ? "..." : "");
	return -1;
}

/* Looks at the file; logs and calls back on a change. */
static void update(struct sc_switch *sw, int first)
{
	char why[128];
	int v = look(sw->path, why, sizeof(why));
	const char *seen = v == 1 ? "true" : v == 0 ? "false" : why;

	if (!first && !strcmp(seen, sw->seen))
		return;
	snprintf(sw->seen, sizeof(sw->seen), "%s", seen);
	if (v < 0) {
		log_warn("switch: %s: %s; profiling stays %s", sw->path, why,
			 sw->enabled ? "enabled" : "disabled");
		return;
	}
	if (!first && v == sw->enabled)
		return;   /* back to a readable word after a bad look: no change */
	sw->enabled = v;
	log_info("switch: profiling %s by %s", v ? "enabled" : "disabled", sw->path);
	if (!first)
		sw->cb(sw, v, sw->arg);
}

static void on_poll(uv_timer_t *t)
{
	update(SC_CONTAINER_OF(t, struct sc_switch, timer), 0);
}

int sc_switch_new(struct sc_switch **out, uv_loop_t *loop, const char *path, sc_switch_cb cb,
		  void *arg)
{
	struct sc_switch *sw;
	int err;

	*out = NULL;
	sw = base_calloc(1, sizeof(*sw));
	if (!sw || !(sw->path = base_strdup(path))) {
		base_free(sw);
		return -ENOMEM;
	}
	sw->enabled = 1;
	sw->cb = cb;
	sw->arg = arg;
	if ((err = uv_timer_init(loop, &sw->timer))) {
		base_free(sw->path);
		base_free(sw);
		return err;
	}
	update(sw, 1);
	uv_timer_start(&sw->timer, on_poll, POLL_MS, POLL_MS);
	*out = sw;
	return 0;
}

int sc_switch_enabled(const struct sc_switch *sw)
{
	return sw->enabled;
}

static void on_closed(uv_handle_t *h)
{
	struct sc_switch *sw = SC_CONTAINER_OF((uv_timer_t *)h, struct sc_switch, timer);

	base_free(sw->path);
	base_free(sw);
}

void sc_switch_free(struct sc_switch *sw)
{
	if (sw)
		uv_close((uv_handle_t *)&sw->timer, on_closed);
}
