/* Reading the allocation agent's records (see agentrec.h, agent/area.h). */
#include "ptrace/allocs/agentrec.h"

#include <errno.h>
#include <string.h>

#include "agent/area.h"
#include "base/mem.h"

#define CHUNK (1u << 20)   /* stack records read per call */

static int bad(const char **why, const char *what)
{
	*why = what;
	return -EPROTO;
}

/* Checks the area's header. Returns 0 or -EPROTO. */
static int check_area(const struct ppa_area *a, uint64_t area_size, const char **why)
{
	if (memcmp(a->magic, PPA_AREA_MAGIC, 8))
		return bad(why, "the agent's record area has no magic");
	if (a->version != PPA_VERSION)
		return bad(why, "the agent's records are of another version than this podprof reads");
	if (a->area_header_size < sizeof(*a) || a->stacks_off < a->area_header_size ||
	    a->stacks_off > CHUNK)
		return bad(why, "the agent's record area header has impossible sizes");
	if (!a->max_frames || a->max_frames > PT_AGENTREC_MAX_FRAMES ||
	    a->stack_size != sizeof(struct ppa_stack) + (uint64_t)a->max_frames * 8)
		return bad(why, "the agent's stack records have an impossible size");
	if (a->max_stacks > PT_AGENTREC_MAX_STACKS)
		return bad(why, "the agent declares room for more stacks than podprof reads");
	if (a->nstacks > a->max_stacks)
		return bad(why, "the agent publishes more stacks than it has room for");
	if (a->stacks_off > area_size ||
	    a->nstacks > (area_size - a->stacks_off) / a->stack_size)
		return bad(why, "the agent's stacks lie past its record area");
	return 0;
}

static uint64_t clamp(uint64_t v)
{
	return v < (uint64_t)PT_ALLOCS_MAX_VALUE ? v : (uint64_t)PT_ALLOCS_MAX_VALUE;
}

/* Adds one record (as read) to out. */
static int add(struct pt_allocs *out, const struct ppa_stack *s, uint32_t max_frames)
{
	uint64_t f[PT_ALLOCS_MAX_FRAMES];
	uint32_t n = 0, have = s->nframes < max_frames ? s->nframes : max_frames;
	struct pt_alloc_stack c = { 0 };

	if (!s->alloc_objects && !s->free_objects)
		return 0;
	for (uint32_t i = 0; i < have && n < PT_ALLOCS_MAX_FRAMES; i++) {
		if (!s->frames[i])
			break;
		f[n++] = s->frames[i] - 1;   /* return address -> call site */
	}
	/* The agent's estimates (each sample weighed by its size), bounded. */
	c.alloc_objects = clamp(s->est_alloc_objects);
	c.alloc_bytes = clamp(s->est_alloc_bytes);
	c.free_objects = clamp(s->est_free_objects);
	c.free_bytes = clamp(s->est_free_bytes);
	return pt_allocs_add(out, f, n, &c);
}

int pt_agentrec_read(pt_allocs_read_fn rd, void *arg, uint64_t header_addr,
		     struct pt_allocs *out, const char **why)
{
	struct ppa_header h;
	struct ppa_area a;
	unsigned char *buf = NULL;
	uint64_t done = 0, per;
	int err;

	*why = NULL;
	memset(out, 0, sizeof(*out));
	out->source = "agent";
	if ((err = rd(arg, header_addr, &h, sizeof(h))))
		return err;
	if (memcmp(h.magic, PPA_HEADER_MAGIC, 8))
		return bad(why, "the agent's header has no magic");
	if (h.version != PPA_VERSION || h.header_size < sizeof(h))
		return bad(why, "the agent is of another version than this podprof reads");
	if (!h.area) {
		*why = "the agent is loaded but has no records yet (nothing sampled so far)";
		return -ENOENT;
	}
	if (h.area_size < sizeof(a) || h.area_size > PT_AGENTREC_MAX_AREA)
		return h.area_size > PT_AGENTREC_MAX_AREA ? -E2BIG :
			bad(why, "the agent's record area is too small");
	if ((err = rd(arg, h.area, &a, sizeof(a))))
		return err;
	if ((err = check_area(&a, h.area_size, why)))
		return err;
	out->rate = a.rate;
	out->scaled = 1;
	out->samples = a.samples;
	out->dropped = a.dropped_samples;
	out->lost_frees = a.lost_frees;
	out->full = !!(a.flags & (PPA_F_STACKS_FULL | PPA_F_LIVE_FULL));
	out->forked = !!(a.flags & PPA_F_FORKED);
	out->stopped = !!(a.flags & PPA_F_STOPPED);
	out->start_ns = a.start_ns;
	per = CHUNK / a.stack_size;
	if (a.nstacks && !(buf = base_malloc(per * a.stack_size)))
		return -ENOMEM;
	while (!err && done < a.nstacks) {
		uint64_t k = a.nstacks - done < per ? a.nstacks - done : per;

		err = rd(arg, h.area + a.stacks_off + done * a.stack_size, buf, k * a.stack_size);
		for (uint64_t i = 0; !err && i < k; i++)
			err = add(out, (const struct ppa_stack *)(void *)(buf + i * a.stack_size),
				  a.max_frames);
		done += k;
	}
	base_free(buf);
	if (err)
		pt_allocs_clear(out);
	return err;
}
