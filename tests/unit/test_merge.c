/* pt_profile_merge: several processes' profiles into one, each sample
 * marked with its process, nothing lost or crossed. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "ptrace/profile/merge.h"
#include "tests/harness.h"

/* A profile of one process: `nmaps` maps, a location per map (named
 * "<tag>fnK"), one sample per location with values (k + 1, 10 * (k + 1)),
 * the second sample two frames deep; with a timeline of `nev` events at
 * t = 10, 20, ... on one thread, each naming its sample. */
static struct pt_profile *make(const char *tag, size_t nmaps, uint64_t time_ns, size_t nev)
{
	struct pt_profile *p = base_calloc(1, sizeof(*p));
	char name[32];

	ASSERT(p);
	p->time_ns = time_ns;
	p->duration_ns = 1000;
	p->hz = 100;
	p->thread_samples = nmaps;
	p->process_cpu_ns = 100 * nmaps;
	p->maps = base_calloc(nmaps, sizeof(*p->maps));
	p->locs = base_calloc(nmaps, sizeof(*p->locs));
	p->samples = base_calloc(nmaps, sizeof(*p->samples));
	p->loc_ids = base_calloc(2 * nmaps, sizeof(*p->loc_ids));
	ASSERT(p->maps && p->locs && p->samples && p->loc_ids);
	for (size_t k = 0; k < nmaps; k++) {
		snprintf(name, sizeof(name), "/%s/lib%zu.so", tag, k);
		p->maps[k] = (struct pt_profile_map){ .start = 0x1000 * (k + 1), .limit = 0x1000 * (k + 2) };
		ASSERT((p->maps[k].path = base_strdup(name)));
		p->nmaps++;
		snprintf(name, sizeof(name), "%sfn%zu", tag, k);
		p->locs[k] = (struct pt_profile_loc){ .addr = 0x1000 * (k + 1) + 0x10, .map = (int)k };
		ASSERT((p->locs[k].name = base_strdup(name)));
		p->nlocs++;
	}
	/* sample k: frames [k] (k = 0) or [k, 0] */
	for (size_t k = 0, at = 0; k < nmaps; k++) {
		struct pt_profile_sample *s = &p->samples[k];

		s->first = (uint32_t)at;
		s->n = k ? 2 : 1;
		p->loc_ids[at++] = (uint32_t)k;
		if (k)
			p->loc_ids[at++] = 0;
		s->value[0] = (int64_t)k + 1;
		s->value[1] = 10 * ((int64_t)k + 1);
		s->tid = 100 + (pid_t)k;
		p->nsamples++;
	}
	if (nev) {
		ASSERT((p->timeline = base_calloc(1, sizeof(*p->timeline))));
		ASSERT((p->timeline->threads = base_calloc(1, sizeof(*p->timeline->threads))));
		ASSERT((p->timeline->events = base_calloc(nev, sizeof(*p->timeline->events))));
		p->timeline->threads[0].tid = 100;
		p->timeline->nthreads = 1;
		for (size_t i = 0; i < nev; i++)
			p->timeline->events[i] = (struct pt_tl_event){ .t_ns = 10 * (i + 1), .thread = 0,
								       .stack = (int32_t)(i % nmaps),
								       .kind = PT_TL_EV_SAMPLE };
		p->timeline->nevents = nev;
	}
	return p;
}

static const char *frame(const struct pt_profile *p, const struct pt_profile_sample *s, uint32_t k)
{
	return p->locs[p->loc_ids[s->first + k]].name;
}

TEST(merge_keeps_each_process_stacks_and_marks_them)
{
	struct pt_profile *parts[3] = { make("a", 2, 5000, 0), NULL, make("b", 3, 4000, 0) };
	struct pt_profile_proc procs[3] = { { .pid = 10, .name = "app" }, { .pid = 11, .name = "gone",
		.err = -ESRCH }, { .pid = 12, .name = "helper" } };
	struct pt_profile *m;

	ASSERT_OK(pt_profile_merge(parts, procs, 3, &m));
	ASSERT(!parts[0] && !parts[2]);   /* taken */
	ASSERT_EQ(m->nprocs, 3);
	ASSERT_EQ(m->procs[1].err, -ESRCH);
	ASSERT_STR_EQ(m->procs[2].name, "helper");
	ASSERT_EQ(m->nmaps, 5);
	ASSERT_EQ(m->nlocs, 5);
	ASSERT_EQ(m->nsamples, 5);
	/* a's samples first, then b's, each with its own frames and maps */
	ASSERT_EQ(m->samples[0].proc, 0);
	ASSERT_STR_EQ(frame(m, &m->samples[0], 0), "afn0");
	ASSERT_STR_EQ(frame(m, &m->samples[1], 0), "afn1");
	ASSERT_STR_EQ(frame(m, &m->samples[1], 1), "afn0");
	for (int k = 2; k < 5; k++)
		ASSERT_EQ(m->samples[k].proc, 2);
	ASSERT_STR_EQ(frame(m, &m->samples[4], 0), "bfn2");
	ASSERT_STR_EQ(frame(m, &m->samples[4], 1), "bfn0");
	ASSERT_EQ(m->samples[4].value[1], 30);
	ASSERT_STR_EQ(m->maps[m->locs[m->loc_ids[m->samples[4].first]].map].path, "/b/lib2.so");
	ASSERT_STR_EQ(m->maps[m->locs[m->loc_ids[m->samples[1].first]].map].path, "/a/lib1.so");
	/* sums, and the window from the first start to the last end */
	ASSERT_EQ(m->thread_samples, 5);
	ASSERT_EQ(m->process_cpu_ns, 500);
	ASSERT_EQ(m->time_ns, 4000);
	ASSERT_EQ(m->duration_ns, 2000);
	pt_profile_free(m);
}

TEST(merge_orders_timelines_by_time_across_processes)
{
	/* b began 15 ns after a: its events at 10, 20 are a's 25, 35 */
	struct pt_profile *parts[2] = { make("a", 2, 1000, 4), make("b", 2, 1015, 2) };
	struct pt_profile_proc procs[2] = { { .pid = 1 }, { .pid = 2 } };
	const uint64_t want[6] = { 10, 20, 25, 30, 35, 40 };
	struct pt_profile *m;

	ASSERT_OK(pt_profile_merge(parts, procs, 2, &m));
	ASSERT(m->timeline);
	ASSERT_EQ(m->timeline->nthreads, 2);
	ASSERT_EQ(m->timeline->nevents, 6);
	for (int i = 0; i < 6; i++)
		ASSERT_U64_EQ(m->timeline->events[i].t_ns, want[i]);
	/* b's events: its thread (index 1) and its samples (after a's two) */
	ASSERT_EQ(m->timeline->events[2].thread, 1);
	ASSERT_EQ(m->timeline->events[2].stack, 2);
	ASSERT_EQ(m->timeline->events[4].stack, 3);
	ASSERT_EQ(m->timeline->events[3].thread, 0);
	pt_profile_free(m);
}

TEST(merge_fails_cleanly_without_memory)
{
	/* Every allocation of the merge failing in turn: an error and nothing
	 * leaked (the parts are freed whatever happens), or a whole profile. */
	for (int at = 1; at < 16; at++) {
		struct pt_profile *parts[2] = { make("a", 2, 0, 3), make("b", 1, 0, 1) };
		struct pt_profile_proc procs[2] = { { .pid = 1 }, { .pid = 2 } };
		struct pt_profile *m = NULL;
		int err;

		base_mem_fail_at(at);
		err = pt_profile_merge(parts, procs, 2, &m);
		base_mem_fail_off();
		ASSERT(!parts[0] && !parts[1]);
		if (err) {
			ASSERT_EQ(err, -ENOMEM);
			ASSERT(!m);
		} else {
			ASSERT_EQ(m->nsamples, 3);
			ASSERT_EQ(m->timeline->nevents, 4);
			pt_profile_free(m);
		}
	}
}

TEST(merge_of_memory_keeps_the_stacks_and_names_who_has_none)
{
	struct pt_profile *parts[3] = { make("a", 2, 1000, 0), make("b", 1, 1000, 0), make("c", 2, 1000, 0) };
	struct pt_profile_proc procs[3] = { { .pid = 10, .name = "agent" }, { .pid = 11, .name = "plain" },
					    { .pid = 12, .name = "go" } };
	struct pt_profile *m;

	parts[0]->alloc = (struct pt_profile_allocs){ .source = "agent", .rate = 65536, .samples = 5,
						      .dropped = 1 };
	parts[1]->alloc = (struct pt_profile_allocs){ .why = "the agent is loaded but has no records yet" };
	parts[2]->alloc = (struct pt_profile_allocs){ .source = "go", .rate = 524288, .samples = 7,
						      .forked = 1 };
	ASSERT_OK(pt_profile_merge(parts, procs, 3, &m));
	/* By mapping and by stack do not add up: the stacks, and who is out. */
	ASSERT_EQ(m->nsamples, 4);
	for (size_t i = 0; i < m->nsamples; i++)
		ASSERT(m->samples[i].proc == 0 || m->samples[i].proc == 2);
	ASSERT(m->procs[0].left_out == NULL && m->procs[2].left_out == NULL);
	ASSERT_STR_EQ(m->procs[1].left_out, "the agent is loaded but has no records yet");
	/* One source: Go's records and the agent's, each its rate. */
	ASSERT_STR_EQ(m->alloc.source, "go+agent");
	ASSERT_EQ(m->alloc.rate, 524288);
	ASSERT_EQ(m->alloc.agent_rate, 65536);
	ASSERT_EQ(m->alloc.samples, 12);
	ASSERT_EQ(m->alloc.dropped, 1);
	ASSERT(m->alloc.forked);
	pt_profile_free(m);
}

TEST(merge_of_memory_by_mapping_keeps_every_process)
{
	struct pt_profile *parts[2] = { make("a", 2, 1000, 0), make("b", 1, 1000, 0) };
	struct pt_profile_proc procs[2] = { { .pid = 10, .name = "x" }, { .pid = 11, .name = "y" } };
	struct pt_profile *m;

	parts[0]->alloc.why = "no allocation agent in the process, and not a Go program";
	/* a view by mapping has no maps at all (NULL) */
	base_free(parts[1]->maps[0].path);
	base_free(parts[1]->maps);
	parts[1]->maps = NULL;
	parts[1]->nmaps = 0;
	parts[1]->locs[0].map = -1;
	ASSERT_OK(pt_profile_merge(parts, procs, 2, &m));
	ASSERT_EQ(m->nsamples, 3);
	ASSERT(m->alloc.source == NULL && m->procs[0].left_out == NULL && m->procs[1].left_out == NULL);
	ASSERT_STR_EQ(m->alloc.why, "no allocation agent in the process, and not a Go program");
	pt_profile_free(m);
}

TEST(merge_sums_the_processes_rss)
{
	struct pt_profile *parts[2] = { make("a", 1, 1000, 0), make("b", 1, 1000, 0) };
	struct pt_profile_proc procs[2] = { { .pid = 10, .name = "x" }, { .pid = 11, .name = "y" } };
	uint64_t want[4] = { 100, 300, 350, 650 };
	struct pt_profile *m;

	for (int i = 0; i < 2; i++) {
		ASSERT((parts[i]->timeline = base_calloc(1, sizeof(*parts[i]->timeline))));
		ASSERT((parts[i]->timeline->threads = base_calloc(1, sizeof(*parts[i]->timeline->threads))));
		ASSERT((parts[i]->timeline->events = base_calloc(2, sizeof(*parts[i]->timeline->events))));
		parts[i]->timeline->threads[0].tid = 100 + i;
		parts[i]->timeline->nthreads = 1;
		parts[i]->timeline->nevents = 2;
	}
	/* a: 100 at t=10, 150 at t=30; b: 200 at t=20, 500 at t=40 */
	parts[0]->timeline->events[0] = (struct pt_tl_event){ .t_ns = 10, .value = 100, .stack = -1, .kind = PT_TL_EV_RSS };
	parts[0]->timeline->events[1] = (struct pt_tl_event){ .t_ns = 30, .value = 150, .stack = -1, .kind = PT_TL_EV_RSS };
	parts[1]->timeline->events[0] = (struct pt_tl_event){ .t_ns = 20, .value = 200, .stack = -1, .kind = PT_TL_EV_RSS };
	parts[1]->timeline->events[1] = (struct pt_tl_event){ .t_ns = 40, .value = 500, .stack = -1, .kind = PT_TL_EV_RSS };
	ASSERT_OK(pt_profile_merge(parts, procs, 2, &m));
	ASSERT_EQ(m->timeline->nevents, 4);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(m->timeline->events[i].value, want[i]);
	ASSERT_EQ(m->timeline->threads[0].pid, 10);
	ASSERT_EQ(m->timeline->threads[1].pid, 11);
	pt_profile_free(m);
}

TEST(merge_drops_an_exited_processes_rss)
{
	struct pt_profile *parts[2] = { make("a", 1, 1000, 0), make("b", 1, 1000, 0) };
	struct pt_profile_proc procs[2] = { { .pid = 10, .name = "x" }, { .pid = 11, .name = "y" } };
	struct pt_profile *m;

	for (int i = 0; i < 2; i++) {
		ASSERT((parts[i]->timeline = base_calloc(1, sizeof(*parts[i]->timeline))));
		ASSERT((parts[i]->timeline->threads = base_calloc(1, sizeof(*parts[i]->timeline->threads))));
		ASSERT((parts[i]->timeline->events = base_calloc(1, sizeof(*parts[i]->timeline->events))));
		parts[i]->timeline->nthreads = 1;
		parts[i]->timeline->nevents = 1;
		parts[i]->timeline->events[0] = (struct pt_tl_event){ .t_ns = 10 + 10 * (uint64_t)i,
								       .value = 100 * (uint64_t)(i + 1),
								       .stack = -1, .kind = PT_TL_EV_RSS };
	}
	/* a (100 at t=10) exits at t=50; b (200 at t=20) runs on */
	parts[0]->cut = "exited";
	parts[0]->cut_ns = 50;
	ASSERT_OK(pt_profile_merge(parts, procs, 2, &m));
	ASSERT_EQ(m->timeline->nevents, 3);
	ASSERT_EQ(m->timeline->events[1].value, 300);
	ASSERT_EQ(m->timeline->events[2].t_ns, 50);
	ASSERT_EQ(m->timeline->events[2].value, 200);
	pt_profile_free(m);
}

/* What each process's profile says it lacks (its note's lines: a runtime
 * it could not read) reaches the merged profile, each line after its
 * process; lines that do not fit are counted, not cut. */
TEST(merge_keeps_what_each_process_lacks)
{
	struct pt_profile *parts[3] = { make("a", 1, 1000, 0), make("b", 1, 1000, 0), make("c", 1, 1000, 0) };
	struct pt_profile_proc procs[3] = { { .pid = 10, .name = "python3.16" }, { .pid = 11, .name = "app" },
		{ .pid = 12, .name = "w" } };
	struct pt_profile *m;

	snprintf(parts[0]->note, sizeof(parts[0]->note), "python: CPython 3.16 is newer than podprof knows");
	snprintf(parts[2]->note, sizeof(parts[2]->note), "go: one\npython: 3 of 90 samples lack frames");
	ASSERT_OK(pt_profile_merge(parts, procs, 3, &m));
	ASSERT_STR_EQ(m->note, "pid 10 (python3.16): python: CPython 3.16 is newer than podprof knows\n"
			       "pid 12 (w): go: one\npid 12 (w): python: 3 of 90 samples lack frames");
	pt_profile_free(m);

	/* Too many lines to hold: the first ones whole, then how many more. */
	for (int i = 0; i < 3; i++) {
		parts[i] = make("x", 1, 1000, 0);
		memset(parts[i]->note, 'n', 400);
		parts[i]->note[400] = '\0';
	}
	ASSERT_OK(pt_profile_merge(parts, procs, 3, &m));
	ASSERT(strlen(m->note) < sizeof(m->note));
	ASSERT(strstr(m->note, "pid 11 (app): nnn"));
	ASSERT(!strstr(m->note, "pid 12"));
	ASSERT(strstr(m->note, "\n1 more lines of the processes' own left out"));
	pt_profile_free(m);
}
