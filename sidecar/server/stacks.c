/* The sampler's stacks in the encoders' terms (see stacks.h): the arrays
 * made here (pprof ids of mappings and locations, the text view) live for
 * one call. Any thread (a work thread, in practice). */
#include "sidecar/server/stacks.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "encoder/gotext.h"
#include "encoder/pprof.h"
#include "encoder/text.h"
#include "ptrace/proc/proc.h"
#include "ptrace/sampler/sampler.h"
#include "sidecar/server/util.h"

static const char *state_name(char state)
{
	switch (state) {
	case 'R': return "running";
	case 'S': return "sleeping";
	case 'D': return "uninterruptible";
	case 'T': return "stopped";
	case 't': return "traced";
	case 'Z': return "zombie";
	default: return "unknown";
	}
}

/* The one place that knows how the sampler lays out a sample's values. */
static int64_t column(const struct pt_profile_sample *s, enum sc_stack_column c)
{
	return s->value[c];
}

/* A name for the system call a sample was taken in: NULL when it was not
 * in one, "?" when the number has no name here. */
static const char *syscall_of(const struct pt_profile_sample *s)
{
	const char *sc;

	if (s->syscall < 0)
		return NULL;
	sc = pt_syscall_name(s->syscall);
	return sc ? sc : "?";
}

void sc_stacks_info(const struct pt_profile *pr, struct sc_stacks_info *out)
{
	out->time_ns = pr->time_ns;
	out->duration_ns = pr->duration_ns;
	out->hz = pr->hz;
	out->nsamples = pr->nsamples;
	out->thread_samples = pr->thread_samples;
	out->dropped_stacks = pr->dropped_stacks;
	out->threads_stopped = pr->threads_stopped;
	out->alloc = pr->alloc;
}


int sc_stacks_types(struct enc_pprof *e, const struct sc_stack_spec *spec)
{
	int err;

	for (size_t i = 0; i < spec->nvalues; i++)
		if ((err = enc_pprof_sample_type(e, spec->values[i].type, spec->values[i].unit)))
			return err;
	return 0;
}

/* Functions named at one location at most (the inlined ones and the one
 * holding the code, or the Python frames of one eval call). */
#define MAX_LINES 128

/* Mappings, then locations (each with its function); loc_ids[i] gets the
 * pprof ID of pr->locs[i]. */
static int add_locations(struct enc_pprof *e, const struct pt_profile *pr, uint64_t *loc_ids)
{
	int64_t *map_ids = base_calloc(pr->nmaps + 1, sizeof(*map_ids));
	int err = 0;

	if (!map_ids)
		return -ENOMEM;
	for (size_t i = 0; i < pr->nmaps && !err; i++) {
		const struct pt_profile_map *m = &pr->maps[i];

		/* Every location of ours carries a function name (a symbol or
		 * an honest "lib.so+0x..."), so clients never re-symbolize from
		 * their own, possibly different, copy of the file. */
		map_ids[i] = enc_pprof_mapping(e, m->start, m->limit, m->offset, m->path, m->build_id, 1);
		if (map_ids[i] < 0)
			err = (int)map_ids[i];
	}
	for (size_t i = 0; i < pr->nlocs && !err; i++) {
		const struct pt_profile_loc *l = &pr->locs[i];
		uint64_t fns[1 + MAX_LINES];
		int64_t lines[1 + MAX_LINES];
		size_t nl = 0;
		int64_t id;

		/* One Line per function where code was inlined (Go's own
		 * profiles do so), or per Python frame of an eval call, the
		 * innermost first; Python's with their files and lines; a
		 * Java method's with its signature as its system name. */
		for (uint32_t k = 0; k <= l->nouter && k <= MAX_LINES && !err; k++) {
			const char *name = k ? l->outer[k - 1] : l->name;
			/* Code in a mapped file (Go's) is compiled; Python's
			 * frames have no mapping. */
			int64_t fn = l->system && l->system[k] ?
					     enc_pprof_function_sys(e, name, l->system[k], l->file[k],
								    l->start[k]) :
				     l->file ? enc_pprof_function_src(e, name, l->file[k], l->start[k],
								      l->map >= 0) :
					       enc_pprof_function(e, name);

			if (fn < 0) {
				err = (int)fn;
			} else {
				lines[nl] = l->line ? l->line[k] : 0;
				fns[nl++] = (uint64_t)fn;
			}
		}
		if (err)
			break;
		id = enc_pprof_location_src(e, l->map >= 0 ? (uint64_t)map_ids[l->map] : 0, l->addr,
					    fns, lines, nl);
		if (id < 0)
			err = (int)id;
		else
			loc_ids[i] = (uint64_t)id;
	}
	base_free(map_ids);
	return err;
}

/* The labels spec asks for, in SC_LABEL_* order, after the process's in
 * a profile of several (pid, process: pprof -tagfocus=process=nginx);
 * returns how many. */
static size_t labels_of(const struct pt_profile *pr, const struct pt_profile_sample *s, unsigned want,
			struct enc_label *lab)
{
	const char *sc = syscall_of(s);
	size_t n = 0;

	if (pr->nprocs && s->proc < pr->nprocs) {
		lab[n++] = (struct enc_label){ .key = "pid", .num = pr->procs[s->proc].pid };
		lab[n++] = (struct enc_label){ .key = "process", .str = pr->procs[s->proc].name };
	}

	/* Which thread: pprof -tagfocus=thread=NAME or -tagfocus=tid=N (not for
	 * samples of no thread: stacks summed over threads). */
	if ((want & SC_LABEL_THREAD) && s->tid)
		lab[n++] = (struct enc_label){ .key = "thread", .str = s->thread[0] ? s->thread : "?" };
	if ((want & SC_LABEL_TID) && s->tid)
		lab[n++] = (struct enc_label){ .key = "tid", .num = s->tid };
	if (want & SC_LABEL_STATE)
		lab[n++] = (struct enc_label){ .key = "state", .str = state_name(s->state) };
	if ((want & SC_LABEL_SYSCALL) && sc)
		lab[n++] = (struct enc_label){ .key = "syscall", .str = sc };
	if ((want & SC_LABEL_CREATION) && (s->flags & PT_SAMPLE_F_UNSEEN))
		lab[n++] = (struct enc_label){ .key = "creation", .str = "not seen" };
	if ((want & SC_LABEL_BYTES) && s->value[0] > 0)
		lab[n++] = (struct enc_label){ .key = "bytes", .num = s->value[1] / s->value[0] };
	if (want & SC_LABEL_GO) {
		for (uint32_t k = 0; k < s->nlabels && n < SC_MAX_LABELS; k++) {
			size_t at = 2 * ((size_t)s->labels + k);

			if (at + 1 < pr->nlabel_kv)
				lab[n++] = (struct enc_label){ .key = pr->label_kv[at], .str = pr->label_kv[at + 1] };
		}
	}
	return n;
}

#define SYSCALL_LEAF_BASE 0x1000u   /* below any mapping (mmap_min_addr) */
#define MAX_SYSCALL_NR 1024

/* The location of the pseudo frame naming system call s's, added at first
 * use into sys[] (MAX_SYSCALL_NR + 1 slots: the last for unnamed ones).
 * Returns its pprof id, or a negative errno. */
static int64_t syscall_leaf(struct enc_pprof *e, const struct pt_profile_sample *s, int64_t *sys)
{
	int nr = s->syscall >= 0 && s->syscall < MAX_SYSCALL_NR ? s->syscall : MAX_SYSCALL_NR;
	char name[64];
	int64_t fn;

	if (sys[nr])
		return sys[nr];
	snprintf(name, sizeof(name), "syscall %s", syscall_of(s));
	if ((fn = enc_pprof_function(e, name)) < 0)
		return fn;
	return sys[nr] = enc_pprof_location(e, 0, SYSCALL_LEAF_BASE + 16u * (uint64_t)nr,
					    (uint64_t)fn);
}

int sc_stacks_pprof(struct enc_pprof *e, const struct pt_profile *pr,
		    const struct sc_stack_spec *spec)
{
	uint64_t *loc_ids = base_calloc(pr->nlocs + 1, sizeof(*loc_ids)), *stack = NULL;
	int64_t *v = base_calloc(spec->nvalues + 1, sizeof(*v));
	int64_t *sys = (spec->labels & SC_LEAF_SYSCALL) ? base_calloc(MAX_SYSCALL_NR + 1, sizeof(*sys)) : NULL;
	size_t maxn = 0;
	int err = -ENOMEM;

	for (size_t i = 0; i < pr->nsamples; i++)
		if (pr->samples[i].n > maxn)
			maxn = pr->samples[i].n;
	stack = base_calloc(maxn + 2, sizeof(*stack));
	if (!loc_ids || !stack || !v || ((spec->labels & SC_LEAF_SYSCALL) && !sys) ||
	    (err = add_locations(e, pr, loc_ids)))
		goto out;
	for (size_t i = 0; i < pr->nsamples && !err; i++) {
		const struct pt_profile_sample *s = &pr->samples[i];
		struct enc_label lab[SC_MAX_LABELS];
		size_t nl = labels_of(pr, s, spec->labels, lab), n = 0;

		for (size_t k = 0; k < spec->nvalues; k++)
			v[k] = column(s, spec->values[k].column);
		if (sys && syscall_of(s)) {
			int64_t id = syscall_leaf(e, s, sys);

			if (id < 0) {
				err = (int)id;
				break;
			}
			stack[n++] = (uint64_t)id;
		}
		for (uint32_t k = 0; k < s->n; k++)
			stack[n++] = loc_ids[pr->loc_ids[s->first + k]];
		err = enc_pprof_sample_labels(e, stack, n, v, spec->nvalues, lab, nl);
	}
out:
	base_free(sys);
	base_free(loc_ids);
	base_free(stack);
	base_free(v);
	return err;
}

/* The neutral description encoder/text.h prints. A location where code
 * was inlined becomes a frame per function, at the same address, the
 * innermost first (as Go's tracebacks print them). */
struct text_view {
	struct enc_text_profile tp;
	struct enc_text_loc *locs;
	struct enc_text_stack *stacks;
	uint32_t *ids;       /* every stack's frames: indices into locs */
	uint32_t *first;     /* pr->locs[i]'s first frame in locs */
};

static void text_view_free(struct text_view *v)
{
	base_free(v->locs);
	base_free(v->stacks);
	base_free(v->ids);
	base_free(v->first);
}

static int text_view_new(const struct pt_profile *pr, const char *name, struct text_view *v)
{
	size_t nl = 0, nf = 0;

	memset(v, 0, sizeof(*v));
	for (size_t i = 0; i < pr->nlocs; i++)
		nl += 1 + (size_t)pr->locs[i].nouter;
	for (size_t i = 0; i < pr->nsamples; i++)
		for (uint32_t k = 0; k < pr->samples[i].n; k++)
			nf += 1 + (size_t)pr->locs[pr->loc_ids[pr->samples[i].first + k]].nouter;
	v->locs = base_calloc(nl + 1, sizeof(*v->locs));
	v->stacks = base_calloc(pr->nsamples + 1, sizeof(*v->stacks));
	v->ids = base_calloc(nf + 1, sizeof(*v->ids));
	v->first = base_calloc(pr->nlocs + 1, sizeof(*v->first));
	if (!v->locs || !v->stacks || !v->ids || !v->first) {
		text_view_free(v);
		return -ENOMEM;
	}
	nl = 0;
	for (size_t i = 0; i < pr->nlocs; i++) {
		const struct pt_profile_loc *l = &pr->locs[i];
		const struct pt_profile_map *m = l->map >= 0 ? &pr->maps[l->map] : NULL;

		v->first[i] = (uint32_t)nl;
		for (uint32_t k = 0; k <= l->nouter; k++) {
			struct enc_text_loc *t = &v->locs[nl++];

			*t = (struct enc_text_loc){ .addr = l->addr, .name = k ? l->outer[k - 1] : l->name };
			if (l->file) {
				t->file = l->file[k];
				t->line = l->line[k];
			} else if (m) {
				t->file = m->path;
				t->file_off = l->addr - m->start + m->offset;
			}
		}
	}
	nf = 0;
	for (size_t i = 0; i < pr->nsamples; i++) {
		const struct pt_profile_sample *s = &pr->samples[i];
		size_t start = nf;

		for (uint32_t k = 0; k < s->n; k++) {
			uint32_t li = pr->loc_ids[s->first + k];

			for (uint32_t j = 0; j <= pr->locs[li].nouter; j++)
				v->ids[nf++] = v->first[li] + j;
		}
		v->stacks[i] = (struct enc_text_stack){
			.locs = v->ids + start, .n = (uint32_t)(nf - start), .count = s->value[SC_COL_COUNT],
			.id = s->tid, .thread = s->thread, .state = state_name(s->state),
			.syscall = syscall_of(s),
		};
		if (pr->nprocs && s->proc < pr->nprocs) {
			v->stacks[i].pid = pr->procs[s->proc].pid;
			v->stacks[i].process = pr->procs[s->proc].name;
		}
	}
	v->tp = (struct enc_text_profile){ .name = name, .locs = v->locs, .nlocs = nl,
					   .stacks = v->stacks, .nstacks = pr->nsamples,
					   .note = pr->note[0] ? pr->note : NULL };
	return 0;
}

int sc_stacks_text(const struct pt_profile *pr, const char *name, int debug, size_t max,
		   char **out, size_t *len)
{
	struct text_view v;
	int err;

	*out = NULL;
	if ((err = text_view_new(pr, name, &v)))
		return err;
	if (debug >= 2)
		err = enc_text_dump_encode(&v.tp, max, out, len);
	else
		err = enc_text_count_encode(&v.tp, max, out, len);
	text_view_free(&v);
	return err;
}

int sc_stacks_contention_text(const struct pt_profile *pr, const char *kind,
			      enum sc_stack_column count, enum sc_stack_column delay, size_t max,
			      char **out, size_t *len)
{
	struct text_view v;
	int err;

	*out = NULL;
	if ((err = text_view_new(pr, kind, &v)))
		return err;
	for (size_t i = 0; i < pr->nsamples; i++) {
		v.stacks[i].count = column(&pr->samples[i], count);
		v.stacks[i].weight = column(&pr->samples[i], delay);
	}
	err = enc_text_contention_encode(&v.tp, kind, max, out, len);
	text_view_free(&v);
	return err;
}

int sc_stacks_heap_text(const struct pt_profile *pr, size_t max, char **out, size_t *len)
{
	struct text_view v;
	int err;

	*out = NULL;
	if ((err = text_view_new(pr, "heap", &v)))
		return err;
	for (size_t i = 0; i < pr->nsamples; i++) {
		const int64_t *x = pr->samples[i].value;

		v.stacks[i].heap[0] = x[2];
		v.stacks[i].heap[1] = x[3];
		v.stacks[i].heap[2] = x[0];
		v.stacks[i].heap[3] = x[1];
	}
	err = enc_text_heap_encode(&v.tp, 1, max, out, len);   /* estimates already */
	text_view_free(&v);
	return err;
}

/* A profile of several processes: which, one comment each (pprof shows
 * every comment on a line of its own). */
static int note_procs(struct enc_pprof *e, const struct pt_profile *pr)
{
	char note[512];
	int err;

	snprintf(note, sizeof(note), "podprof: %zu processes, each sample labelled with its pid and process "
		 "(pprof -tagfocus=process=NAME, -tags)", pr->nprocs);
	if ((err = enc_pprof_comment(e, note)))
		return err;
	for (size_t i = 0; i < pr->nprocs; i++) {
		const struct pt_profile_proc *p = &pr->procs[i];

		if (p->err)
			snprintf(note, sizeof(note), "podprof: pid %d (%s): not profiled: %s", (int)p->pid, p->name,
				 sc_strerror(p->err));
		else if (p->left_out)
			snprintf(note, sizeof(note), "podprof: pid %d (%s): not in this profile: %s (view=mappings "
				 "shows its memory)", (int)p->pid, p->name, p->left_out);
		else if (p->note)
			snprintf(note, sizeof(note), "podprof: pid %d (%s) %s during the window: its part is what "
				 "was gathered until then", (int)p->pid, p->name, p->note);
		else
			continue;
		if ((err = enc_pprof_comment(e, note)))
			return err;
	}
	if (!pr->procs_left)
		return 0;
	snprintf(note, sizeof(note), "podprof: %zu more processes left out: --max-processes %zu reached (it "
		 "counts every process of the profile, a tree's root and the pod's first one included; "
		 "at most 256)", pr->procs_left, pr->nprocs);
	return enc_pprof_comment(e, note);
}

const char *sc_stacks_whose(const struct pt_profile *pr, pid_t pid, char *buf, size_t len)
{
	if (pr->nprocs)
		snprintf(buf, len, "%zu processes", pr->nprocs);
	else
		snprintf(buf, len, "pid %d", (int)pid);
	return buf;
}

/* The lines of pr's note (what a runtime's frames lack, and why), one
 * comment each. */
static int note_lines(struct enc_pprof *e, const struct pt_profile *pr)
{
	char line[sizeof(pr->note) + 16];
	int err;

	for (const char *at = pr->note; *at;) {
		const char *end = strchr(at, '\n');
		int n = end ? (int)(end - at) : (int)strlen(at);

		snprintf(line, sizeof(line), "podprof: %.*s", n, at);
		if ((err = enc_pprof_comment(e, line)))
			return err;
		at += n + !!end;
	}
	return 0;
}

int sc_stacks_note_cut(struct enc_pprof *e, const struct pt_profile *pr)
{
	char note[160];
	int err;

	if ((err = note_lines(e, pr)))
		return err;
	if (pr->nprocs)
		return note_procs(e, pr);
	if (!pr->cut)
		return 0;
	snprintf(note, sizeof(note), "podprof: the target %s %.3f s into the window: this is what "
		 "was gathered until then", pr->cut, (double)pr->cut_ns / 1e9);
	return enc_pprof_comment(e, note);
}

/* ---- a Go program's goroutines ------------------------------------------- */

/* The release's minor number of "go1.26.10" (0: unknown). */
static int go_minor(const char *version)
{
	const char *at = version + 4;
	uint64_t m;

	return !strncmp(version, "go1.", 4) && !sc_parse_u64(&at, 10, 99, &m) ? (int)m : 0;
}

int sc_stacks_go_text(const struct pt_profile *pr, int debug, size_t max, char **out, size_t *len)
{
	struct enc_go_frame *frames = NULL;
	struct enc_go_goroutine *gs = NULL;
	uint32_t *first = NULL, *ids = NULL;
	char **labels = NULL;
	size_t nf = 0, nids = 0;
	struct enc_go_dump d;
	int err = -ENOMEM;

	*out = NULL;
	for (size_t i = 0; i < pr->nlocs; i++)
		nf += 1 + (size_t)pr->locs[i].nouter;
	for (size_t i = 0; i < pr->nsamples; i++)
		for (uint32_t k = 0; k < pr->samples[i].n; k++)
			nids += 1 + (size_t)pr->locs[pr->loc_ids[pr->samples[i].first + k]].nouter;
	frames = base_calloc(nf + 1, sizeof(*frames));
	first = base_calloc(pr->nlocs + 1, sizeof(*first));
	ids = base_calloc(nids + 1, sizeof(*ids));
	gs = base_calloc(pr->nsamples + 1, sizeof(*gs));
	labels = base_calloc(pr->nsamples + 1, sizeof(*labels));
	if (!frames || !first || !ids || !gs || !labels)
		goto out;
	/* A location is a frame per function, the inlined ones first, each
	 * at the location's return address (its address is the call's). */
	nf = 0;
	for (size_t i = 0; i < pr->nlocs; i++) {
		const struct pt_profile_loc *l = &pr->locs[i];

		first[i] = (uint32_t)nf;
		for (uint32_t k = 0; k <= l->nouter; k++)
			frames[nf++] = (struct enc_go_frame){
				.func = k ? l->outer[k - 1] : l->name, .file = l->file ? l->file[k] : NULL,
				.line = l->line ? l->line[k] : 0, .pc = l->addr + 1, .entry = l->entry,
				.inlined = k < l->nouter,
			};
	}
	nids = 0;
	for (size_t i = 0; i < pr->nsamples; i++) {
		const struct pt_profile_sample *s = &pr->samples[i];
		const struct pt_profile_goroutine *g = &pr->goroutines[i];
		struct enc_go_goroutine *o = &gs[i];

		*o = (struct enc_go_goroutine){ .id = g->goid, .state = g->state,
						.wait_minutes = (int64_t)(g->wait_ns / 60000000000ull),
						.locked = !!(g->flags & PT_GOROUTINE_F_LOCKED),
						.scan = !!(g->flags & PT_GOROUTINE_F_SCAN), .frames = ids + nids,
						.created_by = -1, .parent = g->parent_goid };
		for (uint32_t k = 0; k < s->n; k++) {
			uint32_t li = pr->loc_ids[s->first + k];

			for (uint32_t j = 0; j <= pr->locs[li].nouter; j++)
				ids[nids++] = first[li] + j;
		}
		o->n = (uint32_t)(ids + nids - o->frames);
		if (g->created_by && g->created_by - 1 < pr->nlocs) {
			const struct pt_profile_loc *l = &pr->locs[g->created_by - 1];

			o->created_by = first[g->created_by - 1];
			o->created_by_func = l->nouter ? l->outer[l->nouter - 1] : l->name;
		}
		if (s->nlabels && 2 * ((size_t)s->labels + s->nlabels) <= pr->nlabel_kv) {
			char buf[4096];

			enc_gotext_labels((const char *const *)pr->label_kv + 2 * s->labels, s->nlabels, buf,
					  sizeof(buf));
			if (!(labels[i] = base_strdup(buf)))
				goto out;
			o->labels = labels[i];
		}
	}
	d = (struct enc_go_dump){ .frames = frames, .nframes = nf, .goroutines = gs, .n = pr->nsamples,
				  .go_minor = go_minor(pr->go_version) };
	err = debug >= 2 ? enc_gotext_dump_encode(&d, max, out, len) : enc_gotext_count_encode(&d, max, out, len);
out:
	for (size_t i = 0; labels && i < pr->nsamples; i++)
		base_free(labels[i]);
	base_free(labels);
	base_free(frames);
	base_free(first);
	base_free(ids);
	base_free(gs);
	return err;
}
