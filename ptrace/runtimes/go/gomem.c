/* A Go program's memory-profile buckets, read from outside (see gomem.h).
 *
 * What runtime.MemProfile(p, true) does (runtime/mprof.go, 1.18 to 1.26),
 * and what this file does in its place:
 *   - it flushes future[cycle % 3] into active (the counts of the cycle
 *     whose sweep is done but which mProf_Flush has not yet published);
 *     here rec = active + future[cycle % 3], the target left untouched;
 *   - if after that every bucket has allocs == 0 and frees == 0 (no GC has
 *     published anything yet), it adds all three futures to active, "to
 *     allow profiling when garbage collection is disabled from the
 *     beginning of execution"; here rec = active + future[0..2];
 *   - it returns every bucket of the mbuckets list. A bucket whose
 *     combined counts are all zero says nothing and is left out.
 *
 * Buckets are persistentalloc'ed and never freed, their headers and the
 * allnext links never change once published, and new buckets are
 * prepended to mbuckets: a walk without the runtime's locks is safe for
 * the runtime, though a counter may be mid-update. For us every byte is
 * the target's and may be anything: the walk is bounded, a loop in allnext
 * is found (Brent's method: no extra reads), and the sizes it gives are
 * checked before they size a read. */
#include "ptrace/runtimes/go/gomem.h"

#include <errno.h>
#include <string.h>

#include "base/array.h"
#include "base/mem.h"

const char *const pt_gomem_symbol_names[PT_GOMEM_NSYMS] = {
	"runtime.mbuckets",
	"runtime.mProfCycle",
	"runtime.mProf",
	"runtime.MemProfileRate",
	"runtime.disableMemoryProfiling",
};

/* runtime.bucket on 64-bit: the header, then stk[nstk], then memRecord. */
#define BUCKET_HDR 48u
#define BUCKET_TYP_MEM 1u    /* memProfile (bucketType, 1-based since Go 1) */
#define NFUTURE 3u           /* len(memRecord{}.future) */

struct bucket_hdr {
	uint64_t next, allnext, typ, hash, size, nstk;
};

struct mem_cycle {           /* memRecordCycle */
	uint64_t allocs, frees, alloc_bytes, free_bytes;
};

struct mem_record {          /* memRecord */
	struct mem_cycle active, future[NFUTURE];
};

_Static_assert(sizeof(struct bucket_hdr) == BUCKET_HDR, "bucket header");
_Static_assert(sizeof(struct mem_record) == 128, "memRecord");

static void cycle_add(struct mem_cycle *to, const struct mem_cycle *c)
{
	to->allocs += c->allocs;
	to->frees += c->frees;
	to->alloc_bytes += c->alloc_bytes;
	to->free_bytes += c->free_bytes;
}

static int cycle_empty(const struct mem_cycle *c)
{
	return !c->allocs && !c->frees;
}

static void to_counts(struct pt_alloc_stack *s, const struct mem_cycle *c)
{
	memset(s, 0, sizeof(*s));
	s->alloc_objects = c->allocs;
	s->alloc_bytes = c->alloc_bytes;
	s->free_objects = c->frees;
	s->free_bytes = c->free_bytes;
}

/* The index of the future the runtime publishes next, from the cycle
 * state: mProfCycle (1.19 on) holds cycle << 1 | flushed in a uint32;
 * mProf (1.18) is struct { cycle uint32; flushed bool }. */
static int read_cycle(pt_allocs_read_fn rd, void *arg, const struct pt_gomem_syms *syms,
		      unsigned int *idx, const char **why)
{
	uint32_t v;
	int err;

	if (syms->mprofcycle) {
		if ((err = rd(arg, syms->mprofcycle, &v, sizeof(v)))) {
			*why = "runtime.mProfCycle could not be read";
			return err;
		}
		v >>= 1;
	} else if (syms->mprof) {
		if ((err = rd(arg, syms->mprof, &v, sizeof(v)))) {
			*why = "runtime.mProf could not be read";
			return err;
		}
	} else {
		*why = "neither runtime.mProfCycle nor runtime.mProf is in the symbol table";
		return -ENOENT;
	}
	*idx = v % NFUTURE;
	return 0;
}

/* Whether the program records anything, and at what rate. */
static int read_rate(pt_allocs_read_fn rd, void *arg, const struct pt_gomem_syms *syms,
		     uint64_t *rate, const char **why)
{
	uint8_t disabled = 0;
	int64_t r;
	int err;

	if (!syms->mbuckets) {
		*why = "runtime.mbuckets is not in the symbol table (no .symtab: a stripped "
		       "binary?)";
		return -ENOENT;
	}
	/* Set by the linker when nothing can call runtime.MemProfile (no
	 * runtime/pprof, no net/http/pprof): the runtime then keeps no
	 * records at all. */
	if (syms->disable && (err = rd(arg, syms->disable, &disabled, 1))) {
		*why = "runtime.disableMemoryProfiling could not be read";
		return err;
	}
	if (disabled) {
		*why = "the Go linker disabled memory profiling (the program does not use "
		       "runtime.MemProfile: no runtime/pprof or net/http/pprof)";
		return -ENOENT;
	}
	if (syms->rate_assumed) {
		*rate = 512 * 1024;   /* Go's default */
		return 0;
	}
	if (!syms->memprofilerate) {
		*why = "runtime.MemProfileRate is not in the symbol table";
		return -ENOENT;
	}
	if ((err = rd(arg, syms->memprofilerate, &r, sizeof(r)))) {
		*why = "runtime.MemProfileRate could not be read";
		return err;
	}
	/* mallocgc samples only while MemProfileRate > 0. */
	if (r <= 0) {
		*why = "runtime.MemProfileRate is 0: the program turned memory profiling off";
		return -ENOENT;
	}
	*rate = (uint64_t)r;
	return 0;
}

/* The walk's state: what was added to out (from base on), and each added
 * stack's counts in the other reading (active + future[idx]). */
struct walk {
	struct pt_allocs *out;
	size_t base_stacks, base_frames;
	struct mem_cycle *alt;       /* per added stack: active + future[idx] */
	size_t nalt, alt_cap;
	int published;               /* some bucket has active + future[idx] counts */
	uint8_t *buf;                /* stk[PT_GOMEM_MAX_STACK] + memRecord */
	uint64_t frames[PT_GOMEM_MAX_STACK];
};

/* A Go 1.27 record: memRecordCycle is {allocs, frees} (8 words in all);
 * the bytes are the counts times the bucket's size. */
static void widen(struct mem_record *rec, const uint8_t *raw, uint64_t size)
{
	uint64_t w[8];

	memcpy(w, raw, sizeof(w));
	for (unsigned int i = 0; i <= NFUTURE; i++) {
		struct mem_cycle *c = i ? &rec->future[i - 1] : &rec->active;

		c->allocs = w[2 * i];
		c->frees = w[2 * i + 1];
		c->alloc_bytes = c->allocs * size;
		c->free_bytes = c->frees * size;
	}
}

/* One bucket whose header is h, at addr. Returns 0, 1 when out is full,
 * or a negative errno. */
static int take_bucket(struct walk *w, pt_allocs_read_fn rd, void *arg, uint64_t addr,
		       const struct bucket_hdr *h, unsigned int idx, int counts_only, const char **why)
{
	size_t stk = (size_t)h->nstk * 8, reclen = counts_only ? 64 : sizeof(struct mem_record);
	struct mem_cycle now, all;
	struct mem_record rec;
	struct pt_alloc_stack counts;
	uint32_t n = 0;
	int err;

	/* The stack and the record in one read. */
	if ((err = rd(arg, addr + BUCKET_HDR, w->buf, stk + reclen))) {
		*why = "a bucket's stack and record could not be read";
		return err;
	}
	if (counts_only)
		widen(&rec, w->buf + stk, h->size);
	else
		memcpy(&rec, w->buf + stk, sizeof(rec));
	now = rec.active;
	cycle_add(&now, &rec.future[idx]);
	all = rec.active;
	for (unsigned int i = 0; i < NFUTURE; i++)
		cycle_add(&all, &rec.future[i]);
	if (!cycle_empty(&now))
		w->published = 1;
	/* What either reading could report is in all (counters only add). */
	if (cycle_empty(&all))
		return 0;
	/* Return addresses, leaf first: kept as call sites (the pc inside the
	 * call instruction), as pt_unwind gives callers. */
	for (uint64_t i = 0; i < h->nstk; i++) {
		uint64_t pc;

		memcpy(&pc, w->buf + i * 8, 8);
		if (pc)
			w->frames[n++] = pc - 1;
	}
	to_counts(&counts, &all);
	counts.size = h->size;
	err = pt_allocs_add(w->out, w->frames, n, &counts);
	if (err == -E2BIG) {
		w->out->full = 1;
		return 1;
	}
	if (err)
		return err;
	if (!BASE_ARRAY_PUSH(w->alt, w->nalt, w->alt_cap))
		return -ENOMEM;
	w->alt[w->nalt - 1] = now;
	return 0;
}

/* Once a GC has published counts, MemProfile reports active + the
 * current future alone: each added stack takes those counts, and the
 * stacks left with none are dropped (their frames moved down). */
static void use_published(struct walk *w)
{
	struct pt_allocs *a = w->out;
	size_t ns = w->base_stacks, nf = w->base_frames;

	for (size_t i = 0; i < w->nalt; i++) {
		struct pt_alloc_stack *s = &a->stacks[w->base_stacks + i];
		uint32_t first = s->first, n = s->n;
		uint64_t size = s->size;

		if (cycle_empty(&w->alt[i]))
			continue;
		if (n)   /* (frames is NULL while no stack has any) */
			memmove(a->frames + nf, a->frames + first, n * sizeof(*a->frames));
		to_counts(&a->stacks[ns], &w->alt[i]);
		a->stacks[ns].size = size;
		a->stacks[ns].first = (uint32_t)nf;
		a->stacks[ns].n = n;
		nf += n;
		ns++;
	}
	a->nstacks = ns;
	a->nframes = nf;
}

int pt_gomem_read(pt_allocs_read_fn rd, void *arg, const struct pt_gomem_syms *syms,
		  struct pt_allocs *out, const char **why)
{
	struct walk *w = NULL;
	uint64_t rate = 0, addr, saved;
	unsigned int idx = 0;
	size_t steps = 0, lap = 1;
	int err;

	*why = NULL;
	if ((err = read_rate(rd, arg, syms, &rate, why)) ||
	    (err = read_cycle(rd, arg, syms, &idx, why)))
		return err;
	/* mbuckets: *bucket (1.18) or atomic.UnsafePointer (1.19 on), whose
	 * pointer is its first word. */
	if ((err = rd(arg, syms->mbuckets, &addr, sizeof(addr)))) {
		*why = "runtime.mbuckets could not be read";
		return err;
	}
	w = base_calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->out = out;
	w->base_stacks = out->nstacks;
	w->base_frames = out->nframes;
	w->buf = base_malloc(PT_GOMEM_MAX_STACK * 8 + sizeof(struct mem_record));
	if (!w->buf) {
		err = -ENOMEM;
		goto out;
	}
	out->source = "go";
	out->rate = rate;
	out->rate_assumed = syms->rate_assumed;
	/* Brent's loop finding: saved is the bucket met at the last power of
	 * two of steps; coming back to it means allnext loops. Any loop is
	 * found within twice its length past its start. */
	saved = addr;
	for (size_t nb = 0; addr; nb++) {
		struct bucket_hdr h;

		if (nb >= PT_GOMEM_MAX_BUCKETS) {
			*why = "more buckets than PT_GOMEM_MAX_BUCKETS";
			err = -EPROTO;
			goto out;
		}
		if (addr & 7) {
			*why = "a bucket address is not 8-aligned";
			err = -EPROTO;
			goto out;
		}
		if ((err = rd(arg, addr, &h, sizeof(h)))) {
			*why = "a bucket's header could not be read";
			goto out;
		}
		if (h.typ == BUCKET_TYP_MEM) {
			if (h.nstk > PT_GOMEM_MAX_STACK) {
				*why = "a bucket's nstk is over PT_GOMEM_MAX_STACK";
				err = -EPROTO;
				goto out;
			}
			err = take_bucket(w, rd, arg, addr, &h, idx, syms->counts_only, why);
			if (err < 0)
				goto out;
			if (err > 0)
				break;
		}
		addr = h.allnext;
		if (addr == saved) {
			*why = "the buckets' allnext links loop";
			err = -EPROTO;
			goto out;
		}
		if (++steps == lap) {
			saved = addr;
			lap *= 2;
			steps = 0;
		}
	}
	err = 0;
	if (w->published)
		use_published(w);
out:
	if (err < 0) {
		/* out as it was: what this call added is dropped. */
		out->nstacks = w->base_stacks;
		out->nframes = w->base_frames;
	}
	base_free(w->alt);
	base_free(w->buf);
	base_free(w);
	return err < 0 ? err : 0;
}
