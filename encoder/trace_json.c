/* The Chrome Trace Event JSON writer (see trace.h): the shape that
 * Perfetto, speedscope and the catapult viewer behind chrome://tracing all
 * read, per docs/trace-format.md section 5 ("Chrome Trace Event JSON").
 * Times in us. Each call owns its text buffer and, per thread, the call
 * tree of its V8 profile. Any thread; no shared state. */
#include "encoder/trace_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/buf.h"
#include "base/map.h"
#include "base/mem.h"
#include "encoder/gz.h"
#include "encoder/trace_util.h"

#define PUT_LIT(ob, lit) base_buf_put((ob), (lit), sizeof(lit) - 1)

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

/* The process a thread's events go under: its own in a trace of several. */
static int64_t pid_of(const struct enc_trace *tr, size_t i)
{
	return tr->threads[i].pid ? tr->threads[i].pid : tr->pid;
}

static void meta(struct base_buf *ob, int64_t pid, const char *name, int64_t tid,
		 const char *key, const char *str, long num)
{
	base_buf_printf(ob, "{\"ph\":\"M\",\"cat\":\"__metadata\",\"name\":\"%s\",\"pid\":%lld,"
			"\"tid\":%lld,\"ts\":0,\"args\":{\"%s\":", name, (long long)pid,
			(long long)tid, key);
	if (str) {
		base_buf_byte(ob, '"');
		enc__ob_json_str(ob, str);
		base_buf_byte(ob, '"');
	} else {
		base_buf_printf(ob, "%ld", num);
	}
	PUT_LIT(ob, "}},\n");
}

static void names(struct base_buf *ob, const struct enc_trace *tr)
{
	char proc[128];

	/* Several processes: pid 0 holds what they add up to (RSS, threads
	 * running), each thread is under its own process. */
	if (tr->pid)
		snprintf(proc, sizeof(proc), "%s (pid %lld)", tr->process ? tr->process : "?",
			 (long long)tr->pid);
	else
		snprintf(proc, sizeof(proc), "%s", tr->process ? tr->process : "?");
	meta(ob, tr->pid, "process_name", tr->pid, "name", proc, 0);
	for (size_t i = 0; i < tr->nthreads; i++) {
		const struct enc_trace_thread *th = &tr->threads[i];
		int64_t pid = pid_of(tr, i);
		char name[64];

		/* Several processes: each its own, named once (a process's
		 * threads come together). */
		if (th->pid && (i == 0 || pid_of(tr, i - 1) != pid)) {
			snprintf(proc, sizeof(proc), "%s", th->process ? th->process : "?");
			meta(ob, pid, "process_name", pid, "name", proc, 0);
			meta(ob, pid, "process_sort_index", pid, "sort_index", NULL, (long)i + 1);
		}
		snprintf(name, sizeof(name), "%s [tid %lld]", th->name && th->name[0] ? th->name : "?",
			 (long long)th->tid);
		meta(ob, pid, "thread_name", th->tid, "name", name, 0);
		meta(ob, pid, "thread_sort_index", th->tid, "sort_index", NULL, (long)i);
	}
}

/* One thread's state slices: each state lasts until the next, its exit or
 * the end; and the process's counters: RSS, and the threads running. */
static void slices(struct base_buf *ob, const struct enc_trace *tr, const struct enc__buckets *bk)
{
	for (size_t i = 0; i < tr->nthreads; i++) {
		const struct enc_trace_event *cur = NULL;

		for (size_t k = bk->first[i]; k <= bk->first[i + 1]; k++) {
			const struct enc_trace_event *e = k < bk->first[i + 1] ? &tr->events[bk->ev[k]] : NULL;
			uint64_t end = e ? e->t_ns : tr->duration_ns;

			if (e && e->kind != ENC_TR_STATE && e->kind != ENC_TR_EXIT)
				continue;
			if (cur && end >= cur->t_ns) {
				base_buf_printf(ob, "{\"ph\":\"X\",\"cat\":\"state\",\"name\":\"%s",
						state_name(cur->state));
				if (cur->syscall) {
					base_buf_byte(ob, ' ');
					enc__ob_json_str(ob, cur->syscall);
				}
				base_buf_printf(ob, "\",\"pid\":%lld,\"tid\":%lld,\"ts\":%.3f,\"dur\":%.3f},\n",
						(long long)pid_of(tr, i), (long long)tr->threads[i].tid,
						(double)cur->t_ns / 1e3, (double)(end - cur->t_ns) / 1e3);
			}
			cur = e && e->kind == ENC_TR_STATE ? e : NULL;
		}
	}
}

static int by_time(const void *a, const void *b, void *arg)
{
	const struct enc_trace *tr = arg;
	uint32_t i = *(const uint32_t *)a, k = *(const uint32_t *)b;
	uint64_t ti = tr->events[i].t_ns, tk = tr->events[k].t_ns;

	return ti != tk ? (ti < tk ? -1 : 1) : (i < k ? -1 : i > k);
}

/* Returns 0 or -ENOMEM (the buffer's own failures stick in it). The events
 * in time order: a thread's run is drawn after the fact, back in time
 * (ptrace/sessions/trace.c draw_run), so the order they came in is not it. */
static int counters(struct base_buf *ob, const struct enc_trace *tr)
{
	uint8_t *st = base_calloc(tr->nthreads + 1, 1);
	uint32_t *order = base_calloc(tr->nevents + 1, sizeof(*order));
	long running = 0;

	if (!st || !order) {
		base_free(st);
		base_free(order);
		return -ENOMEM;
	}
	for (size_t k = 0; k < tr->nevents; k++)
		order[k] = (uint32_t)k;
	qsort_r(order, tr->nevents, sizeof(*order), by_time, (void *)tr);
	for (size_t j = 0; j < tr->nevents; j++) {
		const struct enc_trace_event *e = &tr->events[order[j]];

		if (e->kind == ENC_TR_RSS) {
			base_buf_printf(ob, "{\"ph\":\"C\",\"cat\":\"process\",\"name\":\"RSS\",\"pid\":%lld,"
					"\"tid\":%lld,\"ts\":%.3f,\"args\":{\"bytes\":%llu}},\n",
					(long long)tr->pid, (long long)tr->pid, (double)e->t_ns / 1e3,
					(unsigned long long)e->value);
			continue;
		}
		if (e->kind != ENC_TR_STATE && e->kind != ENC_TR_EXIT)
			continue;
		running -= st[e->thread] == ENC_TR_RUNNING;
		st[e->thread] = e->kind == ENC_TR_STATE ? e->state : 0;
		running += st[e->thread] == ENC_TR_RUNNING;
		base_buf_printf(ob, "{\"ph\":\"C\",\"cat\":\"process\",\"name\":\"CPU\",\"pid\":%lld,"
				"\"tid\":%lld,\"ts\":%.3f,\"args\":{\"threads_running\":%ld}},\n",
				(long long)tr->pid, (long long)tr->pid, (double)e->t_ns / 1e3, running);
	}
	base_free(st);
	base_free(order);
	return 0;
}

/* A thread's call tree for its V8 profile: node 1 is the root; each node a
 * (parent, frame) pair, numbered in order of creation (parents first). */
struct tree_node {
	uint32_t parent;
	const struct enc_trace_frame *frame;
};

struct tree {
	struct tree_node *nodes;      /* 0 unused, 1 the root */
	size_t n, cap;
	struct base_map index;        /* hash of (parent, pc) -> node */
	int err;                      /* the first failure, or 0 */
};

/* What the index's equality callback compares with. */
struct tree_key {
	const struct tree *t;
	uint32_t parent;
	uint64_t pc;
};

static int tree_eq(const void *arg, uint64_t v)
{
	const struct tree_key *k = arg;

	return k->t->nodes[v].parent == k->parent && k->t->nodes[v].frame->pc == k->pc;
}

/* The node under `parent` for frame f (created if new). 0 if memory ran
 * out (t->err says why). */
static uint32_t tree_child(struct tree *t, uint32_t parent, const struct enc_trace_frame *f)
{
	struct tree_key k = { t, parent, f->pc };
	uint64_t h = base_hash_word(base_hash_word(BASE_HASH_SEED, parent), f->pc), *v;
	int err;

	if ((v = base_map_find(&t->index, h, tree_eq, &k)))
		return (uint32_t)*v;
	if ((err = BASE_ARRAY_RESERVE(t->nodes, t->cap, t->n + 1)) ||
	    (err = base_map_add(&t->index, h, t->n))) {
		if (!t->err)
			t->err = err;
		return 0;
	}
	t->nodes[t->n] = (struct tree_node){ parent, f };
	return (uint32_t)t->n++;
}

static void tree_free(struct tree *t)
{
	base_map_free(&t->index);
	base_free(t->nodes);
}

/* A V8 call frame; its lineNumber is 0-based, -1 where unknown. */
static void callframe(struct base_buf *ob, const char *fn, const char *url, uint32_t line)
{
	char num[16];

	PUT_LIT(ob, "\"callFrame\":{\"functionName\":\"");
	enc__ob_json_str(ob, fn);
	PUT_LIT(ob, "\",\"url\":\"");
	enc__ob_json_str(ob, url);
	PUT_LIT(ob, "\",\"scriptId\":0,\"lineNumber\":");
	snprintf(num, sizeof(num), "%ld", line ? (long)line - 1 : -1L);
	base_buf_str(ob, num);
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

/* Thread i's samples as one V8 Profile and one ProfileChunk. Returns 0 or
 * the call tree's failure (-ENOMEM); the buffer's own stick in it. */
static int profile(struct base_buf *ob, const struct enc_trace *tr, const struct enc__buckets *bk,
		   size_t i)
{
	struct tree t = { .n = 2 };   /* 0 unused, 1 the root */
	uint64_t prev = 0, first = UINT64_MAX, last = 0;
	const char *sep = "";
	int64_t tid = tr->threads[i].tid, pid = pid_of(tr, i);

	for (size_t k = bk->first[i]; k < bk->first[i + 1]; k++) {
		const struct enc_trace_event *e = &tr->events[bk->ev[k]];

		if (e->kind == ENC_TR_SAMPLE && e->stack >= 0) {
			first = first < e->t_ns ? first : e->t_ns;
			last = e->t_ns;
		}
	}
	if (first == UINT64_MAX)
		return 0;
	base_buf_printf(ob, "{\"ph\":\"P\",\"cat\":\"disabled-by-default-v8.cpu_profiler\",\"name\":"
			"\"Profile\",\"id\":\"0x%zx\",\"pid\":%lld,\"tid\":%lld,\"ts\":%.3f,\"args\":"
			"{\"data\":{\"startTime\":%.3f}}},\n", i + 1, (long long)pid, (long long)tid,
			(double)first / 1e3, (double)first / 1e3);
	base_buf_printf(ob, "{\"ph\":\"P\",\"cat\":\"disabled-by-default-v8.cpu_profiler\",\"name\":"
			"\"ProfileChunk\",\"id\":\"0x%zx\",\"pid\":%lld,\"tid\":%lld,\"ts\":%.3f,"
			"\"args\":{\"data\":{\"cpuProfile\":{\"samples\":[", i + 1, (long long)pid,
			(long long)tid, (double)last / 1e3);
	for (size_t k = bk->first[i]; k < bk->first[i + 1]; k++) {
		const struct enc_trace_event *e = &tr->events[bk->ev[k]];

		if (e->kind == ENC_TR_SAMPLE && e->stack >= 0) {
			base_buf_printf(ob, "%s%u", sep, tree_stack(&t, &tr->stacks[e->stack]));
			sep = ",";
		}
	}
	PUT_LIT(ob, "],\"nodes\":[{\"id\":1,");
	callframe(ob, "(root)", "", 0);
	base_buf_byte(ob, '}');
	for (size_t n = 2; n < t.n; n++) {
		const struct tree_node *node = &t.nodes[n];

		base_buf_printf(ob, ",{\"id\":%zu,\"parent\":%u,", n, node->parent);
		callframe(ob, node->frame->fn, node->frame->file, node->frame->line);
		base_buf_byte(ob, '}');
	}
	PUT_LIT(ob, "]},\"timeDeltas\":[");
	sep = "";
	prev = first;
	for (size_t k = bk->first[i]; k < bk->first[i + 1]; k++) {
		const struct enc_trace_event *e = &tr->events[bk->ev[k]];

		if (e->kind == ENC_TR_SAMPLE && e->stack >= 0) {
			base_buf_printf(ob, "%s%.3f", sep, (double)(e->t_ns - prev) / 1e3);
			prev = e->t_ns;
			sep = ",";
		}
	}
	PUT_LIT(ob, "]}}},\n");
	tree_free(&t);
	return t.err;
}

int enc_trace_json(const struct enc_trace *tr, size_t max, int gz, uint8_t **out, size_t *len)
{
	struct base_buf ob;
	struct enc__buckets bk = { 0 };
	char *text = NULL;
	size_t tlen = 0;
	int err;

	*out = NULL;
	base_buf_init(&ob, max);
	if ((err = enc__buckets_by_thread(&bk, tr)))
		goto out;
	PUT_LIT(&ob, "{\"traceEvents\":[\n");
	names(&ob, tr);
	slices(&ob, tr, &bk);
	if ((err = counters(&ob, tr)))
		goto out;
	for (size_t i = 0; i < tr->nthreads && !err; i++)
		err = profile(&ob, tr, &bk, i);
	if (err)
		goto out;
	/* A last event without a comma after it: the process's name again. */
	meta(&ob, tr->pid, "process_sort_index", tr->pid, "sort_index", NULL, 0);
	if (!ob.err)
		ob.len -= 2;   /* the ",\n" meta() ended with: the next append overwrites it */
	PUT_LIT(&ob, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"podprof\"}}\n");
	if ((err = base_buf_take(&ob, &text, &tlen)))
		goto out;
	if (gz) {
		err = enc_gz_compress((const uint8_t *)text, tlen, max, out, len);
	} else {
		*out = (uint8_t *)text;
		*len = tlen;
		text = NULL;
	}
out:
	base_free(text);
	base_buf_free(&ob);
	enc__buckets_free(&bk);
	return err;
}
