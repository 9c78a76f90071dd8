/* /debug/pprof/heap and /debug/pprof/allocs: who allocated the memory the
 * process holds, from its allocation records (the allocation agent's, or a
 * Go runtime's own), as Go's heap profile says it; without records, or with
 * view=mappings, where the memory lives, by mapping, from /proc/<pid>/smaps
 * (ptrace/sessions/memory.c). Requests and the index's count run on the
 * loop thread, the encoding (the profile, or debug=1's text) on a work
 * thread. */
#include "sidecar/profiles/memory.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"
#include "encoder/pprof.h"
#include "ptrace/proc/proc.h"
#include "ptrace/sessions/memory.h"
#include "sidecar/server/http.h"
#include "sidecar/server/params.h"
#include "sidecar/server/job.h"
#include "sidecar/server/reply.h"
#include "sidecar/server/server.h"
#include "sidecar/server/stacks.h"
#include "sidecar/server/util.h"

struct memory_job {
	struct sc_job job;
	int allocs;
	int debug;
	int delta;
	int mappings;   /* view=mappings: asked for the mapping view */
};

static const struct sc_stack_value heap_values[] = {
	{ "inuse_space", "bytes", SC_COL_0 },
	{ "pss", "bytes", SC_COL_1 },
	{ "private_dirty", "bytes", SC_COL_2 },
	{ "swap", "bytes", SC_COL_3 },
};
static const struct sc_stack_spec heap_spec = { heap_values, 4, 0 };

static const struct sc_stack_value allocs_values[] = {
	{ "alloc_objects", "count", SC_COL_0 },
	{ "alloc_space", "bytes", SC_COL_1 },
	{ "inuse_objects", "count", SC_COL_2 },
	{ "inuse_space", "bytes", SC_COL_3 },
};
static const struct sc_stack_spec allocs_spec = { allocs_values, 4, 0 };
/* With allocation stacks, Go's label: the size of the blocks a sample counts. */
static const struct sc_stack_spec stacks_spec = { allocs_values, 4, SC_LABEL_BYTES };

static const char HEAP_NOTE[] =
	"podprof: heap: the target's memory by mapping from /proc/<pid>/smaps, under its class "
	"(heap = brk and malloc arenas, thread stacks, anonymous, code and data of each file, "
	"shared memory, [anon:name], other); inuse_space is resident memory (RSS), then PSS, "
	"private dirty and swap.";
static const char ALLOCS_NOTE[] =
	"podprof: allocs: per mapping, the bytes that became resident (each growth of its RSS "
	"seen, summed: alloc_space) and how many growths (alloc_objects), since podprof first "
	"looked at the target (every heap and allocs request looks); never decreasing. "
	"inuse_* is what each holds now.";

static const char HOW_TO_STACKS[] =
	"For allocation stacks, start the program with LD_PRELOAD=<dir>/libpodprof-alloc.so "
	"(the podprof image holds it; the chart's agent.enabled copies it into the pod); Go "
	"programs need only link runtime/pprof (net/http/pprof does) and keep their symbols.";

/* The comments of a profile with allocation stacks. */
static int stacks_notes(struct enc_pprof *e, const struct memory_job *m,
			const struct sc_stacks_info *in)
{
	char note[768];
	int err;

	const char *src = in->alloc.source;
	int go = !strncmp(src, "go", 2), both = !strcmp(src, "go+agent");
	char every[64], agent[96] = "";

	snprintf(every, sizeof(every), in->alloc.rate > 1 ? "one sample per %llu bytes allocated on "
			 "average" : "every allocation recorded", (unsigned long long)in->alloc.rate);
	if (both)
		snprintf(agent, sizeof(agent), " and podprof's allocation agent (C allocations, one "
			 "sample per %llu bytes)", (unsigned long long)in->alloc.agent_rate);
	snprintf(note, sizeof(note),
		 "podprof: %s: allocation stacks from %s%s, %s; values estimated from the samples as "
		 "Go's heap profile does; inuse = allocated and not yet freed, alloc = since %s. "
		 "%s?view=mappings shows the memory by mapping.",
		 m->allocs ? "allocs" : "heap",
		 go ? "the Go runtime's own records (runtime.MemProfile)" :
		      "podprof's allocation agent in the process",
		 agent, every, go ? "the program started" : "the agent started in the process",
		 m->allocs ? "allocs" : "heap");
	if ((err = enc_pprof_comment(e, note)))
		return err;
	if (in->alloc.dropped || in->alloc.lost_frees || in->alloc.full) {
		snprintf(note, sizeof(note),
			 "podprof: the agent's fixed record area %s: %llu samples not recorded, %llu "
			 "frees of sampled blocks not seen (of %llu samples)",
			 in->alloc.full ? "is full" : "was busy at times",
			 (unsigned long long)in->alloc.dropped,
			 (unsigned long long)in->alloc.lost_frees,
			 (unsigned long long)in->alloc.samples);
		if ((err = enc_pprof_comment(e, note)))
			return err;
	}
	if (in->alloc.forked && m->job.req.profile->nprocs &&
	    (err = enc_pprof_comment(e, "podprof: fork children among these processes: the records "
					"of each began as its parent's at the fork")))
		return err;
	if (in->alloc.forked && !m->job.req.profile->nprocs &&
	    (err = enc_pprof_comment(e, in->alloc.stopped ?
					"podprof: this process is a fork child whose records were "
					"being updated at the fork: they stopped there" :
					"podprof: this process is a fork child: its records began "
					"as its parent's at the fork")))
		return err;
	if (in->alloc.rate_assumed &&
	    (err = enc_pprof_comment(e, "podprof: a stripped Go program: runtime.MemProfileRate "
					"cannot be read, Go's default (524288 bytes) is assumed")))
		return err;
	if (in->alloc.why) {
		snprintf(note, sizeof(note), "podprof: records left out: %s", in->alloc.why);
		if ((err = enc_pprof_comment(e, note)))
			return err;
	}
	if (!in->nsamples && !strcmp(in->alloc.source, "agent") &&
	    (err = enc_pprof_comment(e, "podprof: the agent saw no sampled allocation: a static "
					"binary, or an allocator linked in (jemalloc, tcmalloc) "
					"is not seen by it")))
		return err;
	if (m->delta && (err = enc_pprof_comment(e, "podprof: the change over the window "
						    "(seconds=): negative where memory was freed")))
		return err;
	return 0;
}

/* The mapping view says why it has no stacks, and how to get them. */
static int mapping_why(struct enc_pprof *e, const struct memory_job *m,
		       const struct sc_stacks_info *in)
{
	char note[640];

	if (m->mappings)
		return 0;
	snprintf(note, sizeof(note), "podprof: no allocation stacks: %s%s%s%s. %s",
		 in->alloc.why ? in->alloc.why : "the target keeps no allocation records",
		 in->alloc.err ? " (" : "", in->alloc.err ? strerror(-in->alloc.err) : "",
		 in->alloc.err ? ")" : "", HOW_TO_STACKS);
	return enc_pprof_comment(e, note);
}

static int build_stacks(struct enc_pprof *e, const struct memory_job *m,
			const struct sc_stacks_info *in)
{
	struct pt_profile *pr = m->job.req.profile;
	int err;

	if ((err = sc_stacks_types(e, &stacks_spec)) ||
	    (err = enc_pprof_period(e, "space", "bytes",
				    in->alloc.rate > 1 ? (int64_t)in->alloc.rate : 1)) ||
	    (err = enc_pprof_default_type(e, m->allocs ? "alloc_space" : "inuse_space")))
		return err;
	enc_pprof_time(e, (int64_t)in->time_ns, (int64_t)in->duration_ns);
	if ((err = stacks_notes(e, m, in)) || (err = sc_stacks_note_cut(e, pr)))
		return err;
	return sc_stacks_pprof(e, pr, &stacks_spec);
}

static int build(struct enc_pprof *e, const struct memory_job *m)
{
	const struct pt_profile *pr = m->job.req.profile;
	const struct sc_stack_spec *spec = m->allocs ? &allocs_spec : &heap_spec;
	struct sc_stacks_info in;
	int err;

	sc_stacks_info(pr, &in);
	if (in.alloc.source)
		return build_stacks(e, m, &in);
	if ((err = sc_stacks_types(e, spec)) || (err = enc_pprof_period(e, "space", "bytes", 1)) ||
	    (err = enc_pprof_default_type(e, m->allocs ? "alloc_space" : "inuse_space")))
		return err;
	enc_pprof_time(e, (int64_t)in.time_ns, (int64_t)in.duration_ns);
	if ((err = enc_pprof_comment(e, m->allocs ? ALLOCS_NOTE : HEAP_NOTE)) ||
	    (err = mapping_why(e, m, &in)) ||
	    (m->delta && (err = enc_pprof_comment(e, "podprof: the change over the window "
							"(seconds=): negative where memory was returned"))))
		return err;
	if ((err = sc_stacks_note_cut(e, pr)))
		return err;
	return sc_stacks_pprof(e, pr, spec);
}

static enum sc_job_next memory_done(struct sc_job *j)
{
	return sc_job_check(j, NULL);
}

static int cmp_rows(const void *a, const void *b, void *col)
{
	const struct pt_profile_sample *x = *(const struct pt_profile_sample *const *)a;
	const struct pt_profile_sample *y = *(const struct pt_profile_sample *const *)b;
	int c = *(const int *)col;

	return (x->value[c] < y->value[c]) - (x->value[c] > y->value[c]);
}

/* debug=1: a table, largest first (RSS for heap, alloc_space for allocs),
 * and a totals line; of several processes, each row's pid first. */
static int table(const struct pt_profile *pr, int allocs, char **out, size_t *len)
{
	const struct pt_profile_sample **order = base_calloc(pr->nsamples + 1, sizeof(*order));
	struct base_buf b;
	int64_t tot[4] = { 0 };
	int col = allocs ? 1 : 0;

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < pr->nsamples; i++)
		order[i] = &pr->samples[i];
	qsort_r(order, pr->nsamples, sizeof(*order), cmp_rows, &col);
	base_buf_init(&b, SC_MAX_PROFILE_BYTES);
	if (pr->nprocs)
		base_buf_printf(&b, "%-8s ", "pid");
	base_buf_printf(&b, "%-14s %14s %14s %14s %14s  %s\n", "class",
			allocs ? "alloc_objects" : "rss", allocs ? "alloc_space" : "pss",
			allocs ? "inuse_objects" : "private_dirty", allocs ? "inuse_space" : "swap",
			"mapping");
	for (size_t i = 0; i < pr->nsamples; i++) {
		const struct pt_profile_sample *s = order[i];
		const char *map = s->n > 0 ? pr->locs[pr->loc_ids[s->first]].name : "?";
		const char *cls = s->n > 1 ? pr->locs[pr->loc_ids[s->first + 1]].name : "?";

		if (pr->nprocs)
			base_buf_printf(&b, "%-8d ", s->proc < pr->nprocs ? (int)pr->procs[s->proc].pid : 0);
		base_buf_printf(&b, "%-14s %14" PRId64 " %14" PRId64 " %14" PRId64 " %14" PRId64 "  %s\n",
				cls, s->value[0], s->value[1], s->value[2], s->value[3], map);
		for (int k = 0; k < 4; k++)
			tot[k] += s->value[k];
	}
	if (pr->nprocs)
		base_buf_printf(&b, "%-8s ", "all");
	base_buf_printf(&b, "%-14s %14" PRId64 " %14" PRId64 " %14" PRId64 " %14" PRId64
			"  (%zu rows, bytes)\n", "total", tot[0], tot[1], tot[2], tot[3], pr->nsamples);
	base_free(order);
	return base_buf_take(&b, out, len);
}

static void memory_encode(struct sc_job *j, struct sc_reply *r)
{
	struct memory_job *m = SC_CONTAINER_OF(j, struct memory_job, job);
	const char *name = m->allocs ? (m->delta ? "allocs-delta" : "allocs") :
				       (m->delta ? "heap-delta" : "heap");
	struct enc_pprof *e = NULL;
	struct sc_stacks_info in;
	char *text;
	size_t len;
	int err;

	if (m->debug) {
		sc_stacks_info(j->req.profile, &in);
		if (in.alloc.source)
			err = sc_stacks_heap_text(j->req.profile, SC_MAX_PROFILE_BYTES, &text, &len);
		else
			err = table(j->req.profile, m->allocs, &text, &len);
		if (err)
			sc_reply_error(r, 500, err == -E2BIG ? "profile too large" : "out of memory");
		else
			sc_reply_body(r, 200, SC_TEXT_PLAIN, text, len);
		return;
	}
	if (!(err = enc_pprof_new(&e)))
		err = build(e, m);
	sc_reply_pprof(r, e, err, name);
	enc_pprof_free(e);
}

static const struct sc_job_ops memory_ops = { memory_done, memory_encode, NULL };

static void memory(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
		   struct sc_params *p, int allocs)
{
	struct memory_job *m;
	struct sc_job *j;

	if (!(j = sc_job_new(sc_server_jobs(srv), c, req, p, &memory_ops, sizeof(*m))))
		return;
	m = SC_CONTAINER_OF(j, struct memory_job, job);
	m->allocs = allocs;
	m->debug = p->debug != 0;
	m->delta = p->seconds > 0;
	m->mappings = p->mappings;
	j->req.kind = p->mappings ? (allocs ? &pt_kind_allocs_mappings : &pt_kind_heap_mappings) :
				    (allocs ? &pt_kind_allocs : &pt_kind_heap);
	sc_job_target(j, &p->target);
	j->req.duration_ns = (uint64_t)p->seconds * 1000000000ull;
	j->req.hz = 1;   /* a window has ticks; memory needs none but its ends */
	sc_job_submit(j);
}

void sc_profile_heap(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	memory(srv, c, req, p, 0);
}

void sc_profile_allocs(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	memory(srv, c, req, p, 1);
}

int64_t sc_count_mappings(struct sc_server *srv, pid_t pid)
{
	struct pt_maps *m;
	int64_t n;

	(void)srv;
	if (pt_proc_read_maps(pid, &m))
		return 0;
	n = (int64_t)m->n;
	pt_maps_free(m);
	return n;
}
