/* One profile of several processes' (see merge.h): a group's members each give a profile of their own process,
 * and the group answers with them all, every sample marked with its
 * process. The parts' maps, names and timelines are moved, not copied.
 * Sampler thread (it runs where the group ends), though it touches nothing
 * but its arguments. */
#include "ptrace/profile/merge.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"

/* The length of p's loc_ids: past the last sample's frames. */
static size_t ids_of(const struct pt_profile *p)
{
	size_t n = 0;

	for (size_t i = 0; i < p->nsamples; i++)
		if ((size_t)p->samples[i].first + p->samples[i].n > n)
			n = (size_t)p->samples[i].first + p->samples[i].n;
	return n;
}

struct sizes {
	size_t maps, locs, samples, ids, threads, events, labels;
};

static int add_sizes(struct sizes *z, const struct pt_profile *q)
{
	const struct pt_timeline *tl = q->timeline;

	return base_size_add(z->maps, q->nmaps, &z->maps) || base_size_add(z->locs, q->nlocs, &z->locs) ||
	       base_size_add(z->samples, q->nsamples, &z->samples) ||
	       base_size_add(z->ids, ids_of(q), &z->ids) ||
	       base_size_add(z->labels, q->nlabel_kv, &z->labels) ||
	       (tl && (base_size_add(z->threads, tl->nthreads, &z->threads) ||
		       base_size_add(z->events, tl->nevents, &z->events))) ||
	       z->locs > UINT32_MAX || z->ids > UINT32_MAX || z->threads > UINT32_MAX ||
	       z->samples > INT32_MAX;
}

static int alloc_arrays(struct pt_profile *p, const struct sizes *z, size_t n, int timeline)
{
	p->maps = base_calloc(z->maps + 1, sizeof(*p->maps));
	p->locs = base_calloc(z->locs + 1, sizeof(*p->locs));
	p->samples = base_calloc(z->samples + 1, sizeof(*p->samples));
	p->loc_ids = base_calloc(z->ids + 1, sizeof(*p->loc_ids));
	p->procs = base_calloc(n + 1, sizeof(*p->procs));
	p->label_kv = base_calloc(z->labels + 1, sizeof(*p->label_kv));
	if (!p->maps || !p->locs || !p->samples || !p->loc_ids || !p->procs || !p->label_kv)
		return -ENOMEM;
	if (!timeline)
		return 0;
	if (!(p->timeline = base_calloc(1, sizeof(*p->timeline))))
		return -ENOMEM;
	p->timeline->threads = base_calloc(z->threads + 1, sizeof(*p->timeline->threads));
	/* room for one more per part: its RSS gone when it exited */
	p->timeline->events = base_calloc(z->events + n + 1, sizeof(*p->timeline->events));
	return p->timeline->threads && p->timeline->events ? 0 : -ENOMEM;
}

/* The counts and the CPU accounting, summed. */
/* The lines of q's note, each after "pid N (name): ", added to p's while
 * they fit whole; the last that fits says how many more were left out. */
static void add_note(struct pt_profile *p, const struct pt_profile *q, const struct pt_profile_proc *who,
		     size_t *left)
{
	const char *line = q->note;

	while (*line) {
		const char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line), k = strlen(p->note);
		int w = snprintf(NULL, 0, "%spid %d (%s): %.*s", k ? "\n" : "", (int)who->pid, who->name,
				 (int)n, line);

		if (w > 0 && !*left && k + (size_t)w + 64 < sizeof(p->note))
			snprintf(p->note + k, sizeof(p->note) - k, "%spid %d (%s): %.*s", k ? "\n" : "",
				 (int)who->pid, who->name, (int)n, line);
		else
			++*left;
		line += n + !!end;
	}
}

static void add_counts(struct pt_profile *p, const struct pt_profile *q)
{
	p->thread_samples += q->thread_samples;
	p->dropped_stacks += q->dropped_stacks;
	p->late_stops += q->late_stops;
	p->threads_stopped += q->threads_stopped;
	p->symbolize_ns += q->symbolize_ns;
	p->process_cpu_ns += q->process_cpu_ns;
	p->unsampled_ns += q->unsampled_ns;
	p->pending_ns += q->pending_ns;
	p->pending_stacks += q->pending_stacks;
	p->unsettled_ns += q->unsettled_ns;
	p->exited_threads += q->exited_threads;
	p->exited_stacks += q->exited_stacks;
	p->overdrawn_ns += q->overdrawn_ns;
	p->clock_over_ns += q->clock_over_ns;
	p->samples_lost += q->samples_lost;
	p->open_failures += q->open_failures;
	if (q->open_err)
		p->open_err = q->open_err;
	p->draw_threads += q->draw_threads;
	p->draws += q->draws;
	if (q->draw_err)
		p->draw_err = q->draw_err;
	/* How the samples were taken: the first part's, unless another's
	 * differs (processes a pod allows differently: say so). */
	if (!p->backend) {
		p->backend = q->backend;
		memcpy(p->backend_why, q->backend_why, sizeof(p->backend_why));
	} else if (q->backend && strcmp(p->backend, q->backend)) {
		p->backend = "ptrace and perf_event";
		snprintf(p->backend_why, sizeof(p->backend_why),
			 "each process's own, as the log says");
	}
}

/* Memory with allocation stacks from some processes and by mapping from
 * others: the two do not add up (values of another kind), so the
 * profile is the stacks, and the processes without records are named. */
static void keep_one_memory_view(struct pt_profile **parts, size_t n, const char **dropped)
{
	int stacks = 0;

	for (size_t i = 0; i < n; i++)
		stacks |= parts[i] && parts[i]->alloc.source;
	for (size_t i = 0; i < n && stacks; i++)
		if (parts[i] && !parts[i]->alloc.source) {
			dropped[i] = parts[i]->alloc.why ? parts[i]->alloc.why :
							   "it keeps no allocation records";
			pt_profile_free(parts[i]);
			parts[i] = NULL;
		}
}

/* An allocation records' source as the kinds of records in it. */
enum { REC_GO = 1, REC_AGENT = 2 };
static const char *const rec_source[4] = { NULL, "go", "agent", "go+agent" };

static unsigned rec_kinds(const char *source)
{
	return !source ? 0 : !strcmp(source, "go") ? REC_GO : !strcmp(source, "agent") ? REC_AGENT :
		REC_GO | REC_AGENT;
}

/* The processes' allocation records as one source: their sampling
 * rates (Go's, the agent's) and what the records lost, summed. */
static void add_allocs(struct pt_profile *p, const struct pt_profile *q)
{
	const struct pt_profile_allocs *a = &q->alloc;
	struct pt_profile_allocs *z = &p->alloc;
	unsigned k = rec_kinds(a->source), all = rec_kinds(z->source) | k;

	if (!k) {
		if (!z->why)
			z->why = a->why;
		if (!z->err)
			z->err = a->err;
		return;
	}
	if (k & REC_GO) {
		z->rate = a->rate;
		z->rate_assumed |= a->rate_assumed;
	}
	if (k & REC_AGENT)
		z->agent_rate = k == REC_AGENT ? a->rate : a->agent_rate;
	z->source = rec_source[all];
	if (!(all & REC_GO))
		z->rate = z->agent_rate;
	if (!z->why)
		z->why = a->why;
	z->samples += a->samples;
	z->dropped += a->dropped;
	z->lost_frees += a->lost_frees;
	z->full |= a->full;
	z->forked |= a->forked;
	z->stopped |= a->stopped;
}

/* Moves q's maps, locations, samples, stack ids and labels to the end of
 * p's, the samples marked as process `proc`; q keeps only its arrays. */
static void move_stacks(struct pt_profile *p, struct pt_profile *q, size_t *nids, uint32_t proc)
{
	size_t mo = p->nmaps, lo = p->nlocs, io = *nids, ni = ids_of(q), ko = p->nlabel_kv;

	if (q->nmaps)   /* a view by mapping has none (and maps NULL) */
		memcpy(p->maps + mo, q->maps, q->nmaps * sizeof(*q->maps));
	p->nmaps += q->nmaps;
	q->nmaps = 0;
	for (size_t i = 0; i < q->nlocs; i++) {
		struct pt_profile_loc *l = &p->locs[p->nlocs++];

		*l = q->locs[i];
		if (l->map >= 0)
			l->map += (int)mo;
	}
	q->nlocs = 0;
	for (size_t i = 0; i < ni; i++)
		p->loc_ids[io + i] = q->loc_ids[i] + (uint32_t)lo;
	*nids += ni;
	for (size_t i = 0; i < q->nsamples; i++) {
		struct pt_profile_sample *s = &p->samples[p->nsamples++];

		*s = q->samples[i];
		s->first += (uint32_t)io;
		s->proc = proc;
		if (s->nlabels)
			s->labels += (uint32_t)(ko / 2);
	}
	if (q->nlabel_kv)
		memcpy(p->label_kv + ko, q->label_kv, q->nlabel_kv * sizeof(*q->label_kv));
	p->nlabel_kv += q->nlabel_kv;
	q->nlabel_kv = 0;   /* the strings are p's now */
}

/* Appends q's timeline threads to p's, each marked as process pid's;
 * events are merged afterwards. */
static void move_threads(struct pt_profile *p, const struct pt_profile *q, pid_t pid)
{
	struct pt_timeline *tl = p->timeline;

	if (!q->timeline)
		return;
	if (q->timeline->nthreads)
		memcpy(tl->threads + tl->nthreads, q->timeline->threads,
		       q->timeline->nthreads * sizeof(*tl->threads));
	for (size_t k = 0; k < q->timeline->nthreads; k++)
		tl->threads[tl->nthreads + k].pid = pid;
	tl->nthreads += q->timeline->nthreads;
	tl->truncated |= q->timeline->truncated;
}

/* The parts' events in time order (each part's are), each part's shifted
 * by when it began after the first (its time stamps count from its own
 * start), its thread and stack indices moved past the parts before it.
 * RSS becomes the processes' sum: each part's last value counts until its
 * next, or until the process exited (an event of its own then). */
static void merge_events(struct pt_profile *p, struct pt_profile **parts, size_t n, uint64_t t0)
{
	struct pt_timeline *tl = p->timeline;
	size_t at[PT_MERGE_MAX] = { 0 }, thr[PT_MERGE_MAX], stk[PT_MERGE_MAX], th = 0, sk = 0;
	uint64_t shift[PT_MERGE_MAX], rss[PT_MERGE_MAX] = { 0 }, rss_sum = 0;
	uint8_t gone[PT_MERGE_MAX] = { 0 };
	uint64_t now = 0;   /* the last event's time: none goes back before it */

	for (size_t i = 0; i < n; i++) {
		thr[i] = th;
		stk[i] = sk;
		shift[i] = parts[i] && parts[i]->time_ns > t0 ? parts[i]->time_ns - t0 : 0;
		if (parts[i]) {
			th += parts[i]->timeline ? parts[i]->timeline->nthreads : 0;
			sk += parts[i]->nsamples;
		}
	}
	for (;;) {
		size_t best = n;
		uint64_t bt = UINT64_MAX;
		struct pt_tl_event e;

		for (size_t i = 0; i < n; i++) {
			const struct pt_timeline *q = parts[i] ? parts[i]->timeline : NULL;

			uint64_t t;

			if (q && at[i] < q->nevents && q->events[at[i]].t_ns + shift[i] < bt) {
				bt = q->events[at[i]].t_ns + shift[i];
				best = i;
			} else if (q && at[i] == q->nevents && !gone[i] && rss[i] && parts[i]->cut &&
				   (t = parts[i]->cut_ns + shift[i] > now ? parts[i]->cut_ns + shift[i] : now) < bt) {
				bt = t;
				best = i;
			}
		}
		if (best == n)
			break;
		if (at[best] == parts[best]->timeline->nevents) {
			/* the process exited: its memory is no longer the pod's */
			gone[best] = 1;
			rss_sum -= rss[best];
			rss[best] = 0;
			tl->events[tl->nevents++] = (struct pt_tl_event){
				.t_ns = bt, .value = rss_sum, .stack = -1, .syscall = -1,
				.kind = PT_TL_EV_RSS };
			now = bt;
			continue;
		}
		e = parts[best]->timeline->events[at[best]++];
		now = bt;
		e.t_ns = bt;
		e.thread += (uint32_t)thr[best];
		if (e.kind == PT_TL_EV_RSS) {
			rss_sum += e.value - rss[best];
			rss[best] = e.value;
			e.value = rss_sum;
		}
		if (e.stack >= 0)
			e.stack += (int32_t)stk[best];
		tl->events[tl->nevents++] = e;
	}
}

int pt_profile_merge(struct pt_profile **parts, const struct pt_profile_proc *procs, size_t n,
		     struct pt_profile **out)
{
	const char *dropped[PT_MERGE_MAX] = { 0 };
	struct pt_profile *p = NULL;
	struct sizes z = { 0 };
	uint64_t t0 = UINT64_MAX, end = 0;
	size_t nids = 0, notes_left = 0;
	int timeline = 0, err = -ENOMEM;

	*out = NULL;
	if (n > PT_MERGE_MAX) {
		err = -E2BIG;   /* the caller's cap on processes is lower */
		goto done;
	}
	keep_one_memory_view(parts, n, dropped);
	for (size_t i = 0; i < n; i++) {
		const struct pt_profile *q = parts[i];

		if (!q)
			continue;
		if (add_sizes(&z, q)) {
			err = -E2BIG;
			goto done;
		}
		timeline |= q->timeline != NULL;
		if (q->time_ns < t0)
			t0 = q->time_ns;
		if (q->time_ns + q->duration_ns > end)
			end = q->time_ns + q->duration_ns;
	}
	if (!(p = base_calloc(1, sizeof(*p))) || (err = alloc_arrays(p, &z, n, timeline)))
		goto done;
	p->time_ns = t0 == UINT64_MAX ? 0 : t0;
	p->duration_ns = end > p->time_ns ? end - p->time_ns : 0;
	for (size_t i = 0; i < n; i++) {
		struct pt_profile *q = parts[i];

		p->procs[i] = procs[i];
		p->nprocs++;
		p->procs[i].left_out = dropped[i];
		if (!q)
			continue;
		if (!p->hz)
			p->hz = q->hz;
		if (!p->procs[i].note)
			p->procs[i].note = q->cut;
		add_note(p, q, &procs[i], &notes_left);
		add_counts(p, q);
		add_allocs(p, q);
		move_stacks(p, q, &nids, (uint32_t)i);
		if (timeline)
			move_threads(p, q, procs[i].pid);
	}
	if (notes_left) {
		size_t k = strlen(p->note);

		snprintf(p->note + k, sizeof(p->note) - k, "%s%zu more lines of the processes' own left out",
			 k ? "\n" : "", notes_left);
	}
	if (timeline) {
		merge_events(p, parts, n, p->time_ns);
		p->timeline->duration_ns = p->duration_ns;
	}
	*out = p;
	p = NULL;
	err = 0;
done:
	pt_profile_free(p);
	for (size_t i = 0; i < n; i++) {
		pt_profile_free(parts[i]);
		parts[i] = NULL;
	}
	return err;
}
