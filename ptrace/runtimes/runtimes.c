/* The table of language runtimes and a process's set of them (see
 * runtimes.h). A new runtime is a folder of ptrace/runtimes/ and a row
 * here. Sampler thread only. */
#include "ptrace/runtimes/runtimes.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "ptrace/runtimes/go/go.h"
#include "ptrace/runtimes/jvm/jvm.h"
#include "ptrace/runtimes/python/python.h"

/* The table: a runtime's row numbers its tokens (ptrace/core/runtime.h),
 * its bit in `enabled` is 1 << row. */
static const struct pt_runtime_ops *const table[] = {
	&pt_runtime_python,   /* PT_RUNTIME_PYTHON */
	&pt_runtime_go,       /* PT_RUNTIME_GO */
	&pt_runtime_jvm,      /* PT_RUNTIME_JVM */
};
#define NRT (sizeof(table) / sizeof(table[0]))
_Static_assert(NRT <= PT_RUNTIMES_MAX, "PT_RUNTIMES_MAX counts a row each");

struct pt_runtimes {
	struct pt_space *as;
	unsigned int enabled;
	int nslots;
	struct {
		struct pt_rt *rt;        /* made at the first detection that needs it */
		int active;
		uint8_t *slots;          /* nslots of the runtime's slot_size, once active */
		char note[384];          /* what its last detection found */
	} r[NRT];
	char note[384];
	int noted;                       /* the note was handed out */
};

int pt_runtimes_new(struct pt_runtimes **out, struct pt_space *as, unsigned int enabled, int nslots)
{
	struct pt_runtimes *rts = base_calloc(1, sizeof(*rts));

	*out = NULL;
	if (!rts)
		return -ENOMEM;
	rts->as = as;
	rts->enabled = enabled;
	rts->nslots = nslots;
	*out = rts;
	return 0;
}

void pt_runtimes_free(struct pt_runtimes *rts)
{
	if (!rts)
		return;
	for (size_t i = 0; i < NRT; i++) {
		if (rts->r[i].rt)
			table[i]->free(rts->r[i].rt);
		base_free(rts->r[i].slots);
	}
	base_free(rts);
}

void pt_runtimes_reset(struct pt_runtimes *rts)
{
	for (size_t i = 0; i < NRT; i++) {
		if (rts->r[i].rt)
			table[i]->reset(rts->r[i].rt);
		rts->r[i].active = 0;
	}
}

void pt_runtimes_detect(struct pt_runtimes *rts)
{
	for (size_t i = 0; i < NRT; i++) {
		const struct pt_runtime_ops *ops = table[i];
		char note[sizeof(rts->note)] = "";

		if (!(rts->enabled & (1u << i)) || rts->r[i].active)
			continue;
		if (!rts->r[i].rt && ops->new(&rts->r[i].rt, rts->as, (unsigned int)i))
			continue;   /* no memory: read natively */
		if (ops->detect(rts->r[i].rt, note, sizeof(note))) {
			/* a slot per capture, made once the runtime is found */
			if (ops->slot_size && !rts->r[i].slots &&
			    !(rts->r[i].slots = base_calloc((size_t)rts->nslots, ops->slot_size))) {
				ops->reset(rts->r[i].rt);
				continue;
			}
			rts->r[i].active = 1;
		}
		snprintf(rts->r[i].note, sizeof(rts->r[i].note), "%s", note);
		if (note[0] && strcmp(note, rts->note)) {
			snprintf(rts->note, sizeof(rts->note), "%s", note);
			rts->noted = 0;
		}
	}
}

const char *pt_runtimes_note(struct pt_runtimes *rts)
{
	if (rts->noted || !rts->note[0])
		return NULL;
	rts->noted = 1;
	return rts->note;
}

void pt_runtimes_counts(const struct pt_runtimes *rts, struct pt_runtimes_counts *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < NRT; i++)
		if (rts->r[i].rt && table[i]->counts)
			table[i]->counts(rts->r[i].rt, &out->merged[i], &out->torn[i]);
}

void pt_runtimes_missing(const struct pt_runtimes *rts, const struct pt_runtimes_counts *since,
			 char *out, size_t len)
{
	struct pt_runtimes_counts now;
	size_t k = 0;

	out[0] = '\0';
	pt_runtimes_counts(rts, &now);
	for (size_t i = 0; i < NRT && k < len; i++) {
		uint64_t m0 = since && since->merged[i] <= now.merged[i] ? since->merged[i] : 0;
		uint64_t t0 = since && since->torn[i] <= now.torn[i] ? since->torn[i] : 0;
		uint64_t merged = now.merged[i] - m0, torn = now.torn[i] - t0;
		int w = 0;

		if (!table[i]->frames_in_samples)
			continue;
		/* Found, not read: detection said why. */
		if (!rts->r[i].active && rts->r[i].note[0])
			w = snprintf(out + k, len - k, "%s%s", k ? "\n" : "", rts->r[i].note);
		else if (rts->r[i].active && torn && torn <= merged)
			w = snprintf(out + k, len - k, "%s%s: %llu of %llu samples (%.1f %%) lack some of their "
				     "frames of it: its chain of frames changed while it was read, could not be "
				     "read, or was deeper than podprof reads; where frames are missing, the "
				     "interpreter's native frame stays",
				     k ? "\n" : "", table[i]->name, (unsigned long long)torn,
				     (unsigned long long)merged, 100.0 * (double)torn / (double)merged);
		if (w > 0)
			k += (size_t)w < len - k ? (size_t)w : len - k - 1;
	}
}

int pt_runtimes_read_in_stop(const struct pt_runtimes *rts)
{
	for (size_t i = 0; i < NRT; i++)
		if (rts->r[i].active && table[i]->reads_in_stop)
			return 1;
	return 0;
}

int pt_runtimes_active(const struct pt_runtimes *rts)
{
	for (size_t i = 0; i < NRT; i++)
		if (rts->r[i].active)
			return 1;
	return 0;
}

void pt_runtimes_prepare(struct pt_runtimes *rts, struct pt_rt_thread *const *threads, int n)
{
	for (size_t i = 0; i < NRT; i++)
		if (rts->r[i].active && table[i]->prepare)
			table[i]->prepare(rts->r[i].rt, threads, n);
}

static void *slot_of(const struct pt_runtimes *rts, size_t i, int slot)
{
	return rts->r[i].slots + (size_t)slot * table[i]->slot_size;
}

int pt_runtimes_capture(struct pt_runtimes *rts, int slot, struct pt_rt_thread *th,
			const struct pt_capture *cap)
{
	int any = 0;

	for (size_t i = 0; i < NRT; i++)
		if (rts->r[i].active && table[i]->capture && slot >= 0 && slot < rts->nslots) {
			table[i]->capture(rts->r[i].rt, th, cap, slot_of(rts, i, slot));
			any = 1;
		}
	return any;
}

void pt_runtimes_clear(struct pt_runtimes *rts, int slot)
{
	for (size_t i = 0; i < NRT; i++)
		if (rts->r[i].slots && slot >= 0 && slot < rts->nslots)
			memset(slot_of(rts, i, slot), 0, table[i]->slot_size);
}

int pt_runtimes_merge(struct pt_runtimes *rts, int slot, struct pt_capture *cap, uint64_t *frames,
		      int n, int max)
{
	for (size_t i = 0; i < NRT; i++)
		if (rts->r[i].active && table[i]->merge && slot >= 0 && slot < rts->nslots)
			n = table[i]->merge(rts->r[i].rt, rts->r[i].slots ? slot_of(rts, i, slot) : NULL, cap,
					    frames, n, max);
	return n;
}

int pt_runtimes_labels(struct pt_runtimes *rts, uint64_t token, const char *const **kv, size_t *n)
{
	unsigned int row = pt_rt_token_row(token);

	if (!pt_rt_is_token(token) || row >= NRT || !rts->r[row].rt || !table[row]->labels)
		return 0;
	return table[row]->labels(rts->r[row].rt, token, kv, n);
}

int pt_runtimes_thread_name(struct pt_runtimes *rts, pid_t nstid, char *buf, size_t len)
{
	for (size_t i = 0; i < NRT; i++)
		if (rts->r[i].active && table[i]->thread_name && table[i]->thread_name(rts->r[i].rt, nstid, buf, len))
			return 1;
	return 0;
}

const char *pt_runtimes_note_of(const struct pt_runtimes *rts, const char *name)
{
	for (size_t i = 0; i < NRT; i++)
		if (!strcmp(table[i]->name, name))
			return rts->r[i].note;
	return "";
}

struct pt_rt *pt_runtimes_get(struct pt_runtimes *rts, const char *name)
{
	for (size_t i = 0; i < NRT; i++)
		if (rts->r[i].active && !strcmp(table[i]->name, name))
			return rts->r[i].rt;
	return NULL;
}

struct pt_rt *pt_runtimes_found(struct pt_runtimes *rts, const char *name)
{
	for (size_t i = 0; i < NRT; i++)
		if (!strcmp(table[i]->name, name))
			return rts->r[i].rt;
	return NULL;
}

const char *pt_runtimes_token_name(uint64_t token)
{
	unsigned int row = pt_rt_token_row(token);

	return pt_rt_is_token(token) && row < NRT ? table[row]->name : NULL;
}

int pt_runtimes_lines(struct pt_runtimes *rts, uint64_t token, struct pt_rt_line *out, int max)
{
	unsigned int row = pt_rt_token_row(token);

	if (!pt_rt_is_token(token) || row >= NRT || !rts->r[row].rt)
		return 0;
	return table[row]->lines(rts->r[row].rt, token, out, max);
}
