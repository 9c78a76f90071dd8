/* Go as a runtime (see go.h). Sampler thread only. */
#include "ptrace/runtimes/go/go.h"

#include <errno.h>

#include "base/mem.h"
#include "ptrace/runtimes/go/gort.h"

struct go_rt {
	struct pt_rt base;
	struct pt_go *go;
};

struct pt_go *pt_go_of(struct pt_rt *rt)
{
	return ((struct go_rt *)rt)->go;   /* base is its first member */
}

static int go_rt_new(struct pt_rt **out, struct pt_space *as, unsigned int row)
{
	struct go_rt *r = base_calloc(1, sizeof(*r));
	int err;

	(void)row;   /* no tokens: Go's frames are native frames */
	*out = NULL;
	if (!r)
		return -ENOMEM;
	if ((err = pt_go_new(&r->go, as))) {
		base_free(r);
		return err;
	}
	r->base.ops = &pt_runtime_go;
	*out = &r->base;
	return 0;
}

static void go_rt_free(struct pt_rt *rt)
{
	if (!rt)
		return;
	pt_go_free(pt_go_of(rt));
	base_free(rt);
}

static void go_rt_reset(struct pt_rt *rt)
{
	pt_go_reset(pt_go_of(rt));
}

static int go_rt_detect(struct pt_rt *rt, char *note, size_t len)
{
	return pt_go_detect(pt_go_of(rt), note, len);
}

static int go_rt_lines(struct pt_rt *rt, uint64_t token, struct pt_rt_line *out, int max)
{
	(void)rt;
	(void)token;
	(void)out;
	(void)max;
	return 0;   /* no tokens of its own */
}

const struct pt_runtime_ops pt_runtime_go = {
	.name = "go",
	.new = go_rt_new,
	.free = go_rt_free,
	.reset = go_rt_reset,
	.detect = go_rt_detect,
	.lines = go_rt_lines,
};
