/* The Chrome Trace Event JSON writer (see trace.h): the shape that
 * Perfetto, speedscope and the catapult viewer behind chrome://tracing all
 * read, per ../shared/reference/trace-format.md section 2.2. Times in us. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encoder/gz.h"
#include "encoder/trace.h"
#include "encoder/trace_internal.h"

#define PUT_LIT(ob, lit) enc__ob_put((ob), (lit), sizeof(lit) - 1)

static const char *state_name(uint8_t st)
{
	switch (st) {
	case ENC_TR_RUNNING: return "Running";
	case ENC_TR_RUNNABLE: return "Runnable";
	case ENC_TR_SYNC: return "Sync";
	case ENC_TR_NET: return "Network";
	case ENC_TR_SLEEP: return "Sleep";
	case ENC_TR_SYSCALL: return "Syscall";
	case ENC_TR_STOPPED: return "Stopped";
	default: return "?";
	}
}

static void meta(struct enc__ob *ob, const struct enc_trace *tr, const char *name, int64_t tid,
		 const char *key, const char *str, long num)
{
	enc__ob_printf(ob, "{\"ph\":\"M\",\"cat\":\"__metadata\",\"name\":\"%s\",\"pid\":%lld,"
		       "\"tid\":%lld,\"ts\":0,\"args\":{\"%s\":", name, (long long)tr->pid,
		       (long long)tid, key);
	if (str) {
		enc__ob_byte(ob, '"');
		enc__ob_json_str(ob, str);
		enc__ob_byte(ob, '"');
	} else {
		enc__ob_printf(ob, "%ld", num);
	}
	PUT_LIT(ob, "}},\n");
}

static void names(struct enc__ob *ob, const struct enc_trace *tr)
{
	char proc[128];

	snprintf(proc, sizeof(proc), "%s (pid %lld)", tr->process ? tr->process : "?",
		 (long long)tr->pid);
	meta(ob, tr, "process_name", tr->pid, "name", proc, 0);
	for (size_t i = 0; i < tr->nthreads; i++) {
		const struct enc_trace_thread *th = &tr->threads[i];
		char name[64];

		snprintf(name, sizeof(name), "%s [tid %lld]", th->name && th->name[0] ? th->name : "?",
			 (long long)th->tid);
		meta(ob, tr, "thread_name", th->tid, "name", name, 0);
		meta(ob, tr, "thread_sort_index", th->tid, "sort_index", NULL, (long)i);
	}
}

/* One thread's state slices: each state lasts until the next, its exit or
 * the end; and the process's counters: RSS, and the threads running. */
static void slices(struct enc__ob *ob, const struct enc_trace *tr, const struct enc__buckets *bk)
{
	for (size_t i = 0; i < tr->nthreads; i++) {
		const struct enc_trace_event *cur = NULL;

		for (size_t k = bk->first[i]; k <= bk->first[i + 1]; k++) {
			const struct enc_trace_event *e = k < bk->first[i + 1] ? &tr->events[bk->ev[k]] : NULL;
			uint64_t end = e ? e->t_ns : tr->duration_ns;

			if (e && e->kind != ENC_TR_STATE && e->kind != ENC_TR_EXIT)
				continue;
			if (cur && end >= cur->t_ns) {
				enc__ob_printf(ob, "{\"ph\":\"X\",\"cat\":\"state\",\"name\":\"%s",
					       state_name(cur->state));
				if (cur->syscall) {
					enc__ob_byte(ob, ' ');
					enc__ob_json_str(ob, cur->syscall);
				}
				enc__ob_printf(ob, "\",\"pid\":%lld,\"tid\":%lld,\"ts\":%.3f,\"dur\":%.3f},\n",
					       (long long)tr->pid, (long long)tr->threads[i].tid,
					       (double)cur->t_ns / 1e3, (double)(end - cur->t_ns) / 1e3);
			}
			cur = e && e->kind == ENC_TR_STATE ? e : NULL;
		}
	}
}

static void counters(struct enc__ob *ob, const struct enc_trace *tr)
{
	uint8_t *st = calloc(tr->nthreads + 1, 1);
	long running = 0;

	for (size_t k = 0; k < tr->nevents; k++) {
		const struct enc_trace_event *e = &tr->events[k];

		if (e->kind == ENC_TR_RSS) {
			enc__ob_printf(ob, "{\"ph\":\"C\",\"cat\":\"process\",\"name\":\"RSS\",\"pid\":%lld,"
				       "\"tid\":%lld,\"ts\":%.3f,\"args\":{\"bytes\":%llu}},\n",
				       (long long)tr->pid, (long long)tr->pid, (double)e->t_ns / 1e3,
				       (unsigned long long)e->value);
			continue;
		}
		if (!st || (e->kind != ENC_TR_STATE && e->kind != ENC_TR_EXIT))
			continue;
		running -= st[e->thread] == ENC_TR_RUNNING;
		st[e->thread] = e->kind == ENC_TR_STATE ? e->state : 0;
		running += st[e->thread] == ENC_TR_RUNNING;
		enc__ob_printf(ob, "{\"ph\":\"C\",\"cat\":\"process\",\"name\":\"CPU\",\"pid\":%lld,"
			       "\"tid\":%lld,\"ts\":%.3f,\"args\":{\"threads_running\":%ld}},\n",
			       (long long)tr->pid, (long long)tr->pid, (double)e->t_ns / 1e3, running);
	}
	free(st);
}

/* A thread's call tree for its V8 profile: node 1 is the root; each node a
 * (parent, frame) pair, numbered in order of creation (parents first). */
struct tree {
	struct enc__u64map index;     /* hash of (parent, pc) -> node */
	uint32_t *parent;
	const struct enc_trace_frame **frame;
	size_t n, cap;
};

/* The node under `parent` for frame f (created if new). 0 if memory ran out. */
static uint32_t tree_child(struct tree *t, uint32_t parent, const struct enc_trace_frame *f)
{
	uint64_t key = ((uint64_t)parent * 0x100000001b3ull) ^ (f->pc * 0x9e3779b97f4a7c15ull), v;

	if (enc__u64map_get(&t->index, key, &v) && t->parent[v] == parent && t->frame[v]->pc == f->pc)
		return (uint32_t)v;
	if (t->n >= t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		uint32_t *p = realloc(t->parent, cap * sizeof(*p));
		const struct enc_trace_frame **fr;

		if (!p)
			return 0;
		t->parent = p;
		fr = realloc(t->frame, cap * sizeof(*fr));
		if (!fr)
			return 0;
		t->frame = fr;
		t->cap = cap;
	}
	t->parent[t->n] = parent;
	t->frame[t->n] = f;
	enc__u64map_put(&t->index, key, t->n);
	return (uint32_t)t->n++;
}

static void tree_free(struct tree *t)
{
	enc__u64map_free(&t->index);
	free(t->parent);
	free(t->frame);
}

/* A V8 call frame; its lineNumber is 0-based, -1 where unknown. */
static void callframe(struct enc__ob *ob, const char *fn, const char *url, uint32_t line)
{
	char num[16];

	PUT_LIT(ob, "\"callFrame\":{\"functionName\":\"");
	enc__ob_json_str(ob, fn);
	PUT_LIT(ob, "\",\"url\":\"");
	enc__ob_json_str(ob, url);
	PUT_LIT(ob, "\",\"scriptId\":0,\"lineNumber\":");
	snprintf(num, sizeof(num), "%ld", line ? (long)line - 1 : -1L);
	enc__ob_put(ob, num, strlen(num));
	PUT_LIT(ob, ",\"columnNumber\":-1}");
}

/* The leaf node of stack k in the tree (root-first walk). */
static uint32_t tree_stack(struct tree *t, const struct enc_trace_stack *s)
{
	uint32_t node = 1;

	for (uint32_t i = s->n; i-- > 0 && node;)
		node = tree_child(t, node, &s->frames[i]);
	return node;
}

/* Thread i's samples as one V8 Profile and one ProfileChunk. */
static int profile(struct enc__ob *ob, const struct enc_trace *tr, const struct enc__buckets *bk,
		   size_t i)
{
	struct tree t = { .n = 2 };   /* 0 unused, 1 the root */
	uint64_t prev = 0, first = UINT64_MAX, last = 0;
	const char *sep = "";
	int64_t tid = tr->threads[i].tid, pid = tr->pid;

	for (size_t k = bk->first[i]; k < bk->first[i + 1]; k++) {
		const struct enc_trace_event *e = &tr->events[bk->ev[k]];

		if (e->kind == ENC_TR_SAMPLE && e->stack >= 0) {
			first = first < e->t_ns ? first : e->t_ns;
			last = e->t_ns;
		}
	}
	if (first == UINT64_MAX)
		return 0;
	enc__ob_printf(ob, "{\"ph\":\"P\",\"cat\":\"disabled-by-default-v8.cpu_profiler\",\"name\":"
		       "\"Profile\",\"id\":\"0x%zx\",\"pid\":%lld,\"tid\":%lld,\"ts\":%.3f,\"args\":"
		       "{\"data\":{\"startTime\":%.3f}}},\n", i + 1, (long long)pid, (long long)tid,
		       (double)first / 1e3, (double)first / 1e3);
	enc__ob_printf(ob, "{\"ph\":\"P\",\"cat\":\"disabled-by-default-v8.cpu_profiler\",\"name\":"
		       "\"ProfileChunk\",\"id\":\"0x%zx\",\"pid\":%lld,\"tid\":%lld,\"ts\":%.3f,"
		       "\"args\":{\"data\":{\"cpuProfile\":{\"samples\":[", i + 1, (long long)pid,
		       (long long)tid, (double)last / 1e3);
	for (size_t k = bk->first[i]; k < bk->first[i + 1]; k++) {
		const struct enc_trace_event *e = &tr->events[bk->ev[k]];

		if (e->kind == ENC_TR_SAMPLE && e->stack >= 0) {
			enc__ob_printf(ob, "%s%u", sep, tree_stack(&t, &tr->stacks[e->stack]));
			sep = ",";
		}
	}
	PUT_LIT(ob, "],\"nodes\":[{\"id\":1,");
	callframe(ob, "(root)", "", 0);
	enc__ob_byte(ob, '}');
	for (size_t n = 2; n < t.n; n++) {
		enc__ob_printf(ob, ",{\"id\":%zu,\"parent\":%u,", n, t.parent[n]);
		callframe(ob, t.frame[n]->fn, t.frame[n]->file, t.frame[n]->line);
		enc__ob_byte(ob, '}');
	}
	PUT_LIT(ob, "]},\"timeDeltas\":[");
	sep = "";
	prev = first;
	for (size_t k = bk->first[i]; k < bk->first[i + 1]; k++) {
		const struct enc_trace_event *e = &tr->events[bk->ev[k]];

		if (e->kind == ENC_TR_SAMPLE && e->stack >= 0) {
			enc__ob_printf(ob, "%s%.3f", sep, (double)(e->t_ns - prev) / 1e3);
			prev = e->t_ns;
			sep = ",";
		}
	}
	PUT_LIT(ob, "]}}},\n");
	tree_free(&t);
	return 0;
}

int enc_trace_json(const struct enc_trace *tr, size_t max, int gz, uint8_t **out, size_t *len)
{
	struct enc__ob ob;
	struct enc__buckets bk = { 0 };
	uint8_t *text = NULL;
	size_t tlen = 0;
	int err;

	*out = NULL;
	enc__ob_init(&ob, max);
	if ((err = enc__buckets_by_thread(&bk, tr)))
		goto out;
	PUT_LIT(&ob, "{\"traceEvents\":[\n");
	names(&ob, tr);
	slices(&ob, tr, &bk);
	counters(&ob, tr);
	for (size_t i = 0; i < tr->nthreads; i++)
		profile(&ob, tr, &bk, i);
	/* A last event without a comma after it: the process's name again. */
	meta(&ob, tr, "process_sort_index", tr->pid, "sort_index", NULL, 0);
	if (!ob.err)
		ob.len -= 2;   /* the ",\n" meta() ended with */
	PUT_LIT(&ob, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"podprof\"}}\n");
	if ((err = enc__ob_finish(&ob, &text, &tlen)))
		goto out;
	if (gz) {
		err = enc_gz_compress(text, tlen, max, out, len);
	} else {
		*out = text;
		*len = tlen;
		text = NULL;
	}
out:
	free(text);
	enc__ob_free(&ob);
	enc__buckets_free(&bk);
	return err;
}
