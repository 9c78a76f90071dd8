/* The Go 1.19 execution trace writer (see trace.h). docs/trace-format.md
 * has the format (section 2, "The Go 1.19 execution trace"), the threads as
 * Ps, Ms and goroutines (section 3) and what Go 1.19's parser and viewer
 * and Go 1.23+'s converter check (section 4, "What go tool trace checks");
 * the numbers below are Go's (src/internal/trace/parser.go,
 * EventDescriptions). Each call owns its writer: the output buffer, the
 * string table and the maps of the stacks and pseudo frames it made up.
 * Any thread; no shared state. */
#include "encoder/trace.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/map.h"
#include "base/mem.h"
#include "encoder/trace_util.h"

enum {
	EV_BATCH = 1, EV_FREQUENCY = 2, EV_STACK = 3, EV_GOMAXPROCS = 4, EV_PROC_START = 5,
	EV_PROC_STOP = 6, EV_GO_CREATE = 13, EV_GO_START = 14, EV_GO_END = 15,
	EV_GO_PREEMPT = 18, EV_GO_SLEEP = 19, EV_GO_BLOCK = 20, EV_GO_UNBLOCK = 21,
	EV_GO_BLOCK_SYNC = 25, EV_GO_BLOCK_NET = 27, EV_GO_SYSCALL = 28, EV_GO_SYSEXIT = 29,
	EV_GO_SYSBLOCK = 30, EV_HEAP_ALLOC = 33, EV_STRING = 37, EV_CPU_SAMPLE = 49,
};

/* Times: the initial snapshot (threads there at the start) at T_SNAP, the
 * EvGomaxprocs that closes it at T_SNAP + 1 (Go 1.23+ treats goroutines
 * created before it as existing at the start), everything else from
 * T_BODY on, in ns (EvFrequency 1e9). */
#define T_SNAP 1000ull
#define T_BODY 2000ull
#define MAX_PAYLOAD 2048u     /* Go 1.23+: "length-prefixed argument too big" */
#define FAKE_PC_BASE 0x1000u  /* pseudo frames: below any mapping (mmap_min_addr) */

enum gstate { G_RUNNABLE = 1, G_RUNNING, G_WAITING, G_SYSCALL, G_DEAD };

/* The maps' keys are string ids (and stack indices) + 1: a string id is 0
 * when the string table ran out of memory, and 0 is no key of a base_map. */
struct gw {                   /* the writer */
	struct base_buf ob;
	const struct enc_trace *tr;
	struct enc__strtab strs;
	struct base_map derived;      /* ((stack + 1) << 20 | syscall string id) + 1 -> stack id */
	struct base_map names;        /* thread name string id + 1 -> stack id */
	struct base_map fake;         /* pseudo frame string id + 1 -> pc */
	uint32_t next_stack, next_fake;
	uint64_t last;                /* the current batch's time */
	int err;                      /* the maps' first failure (the buffer and the
	                               * string table keep their own) */
};

struct gth {                  /* one thread as a goroutine on its P */
	uint64_t g, seq;
	uint64_t wait_stk;            /* the stack it blocked with, for its unblock */
	uint32_t p;
	enum gstate st;
};

/* One record: header byte, then the values as varints; four or more values
 * are length-prefixed (Go's rule: the header's two top bits say how many
 * values follow, 3 meaning "a length, then the values"). */
static void record(struct gw *w, int typ, const uint64_t *v, int n)
{
	uint8_t tmp[16 * 10];
	size_t len = 0;

	if (n < 4) {
		base_buf_byte(&w->ob, (uint8_t)(typ | (n - 1) << 6));
		for (int i = 0; i < n; i++)
			enc__ob_uvarint(&w->ob, v[i]);
		return;
	}
	for (int i = 0; i < n; i++)
		len += enc__uvarint(tmp + len, v[i]);
	base_buf_byte(&w->ob, (uint8_t)(0xc0 | typ));
	enc__ob_uvarint(&w->ob, len);
	base_buf_put(&w->ob, tmp, len);
}

/* A timed event at time t of the current batch (t never goes back). */
static void timed(struct gw *w, int typ, uint64_t t, const uint64_t *args, int n)
{
	uint64_t v[8];

	if (t < w->last)
		t = w->last;
	v[0] = t - w->last;
	if (n)
		memcpy(v + 1, args, (size_t)n * sizeof(*v));
	w->last = t;
	record(w, typ, v, n + 1);
}

static void batch(struct gw *w, uint32_t p, uint64_t t)
{
	uint64_t v[2] = { p, t };

	record(w, EV_BATCH, v, 2);
	w->last = t;
}

/* The string's id (0 for "" or NULL), written at first use. */
static uint64_t string_id(struct gw *w, const char *s)
{
	int fresh;
	uint64_t id = enc__strtab_id(&w->strs, s, &fresh);
	size_t len;

	if (!id || !fresh)
		return id;
	len = strlen(s) > 1000000 ? 1000000 : strlen(s);
	base_buf_byte(&w->ob, EV_STRING);
	enc__ob_uvarint(&w->ob, id);
	enc__ob_uvarint(&w->ob, len);
	base_buf_put(&w->ob, s, len);
	return id;
}

/* Stores val under key in m; a failure is kept in w->err (the trace then
 * fails: without the entry, the same stack would be written again). */
static void remember(struct gw *w, struct base_map *m, uint64_t key, uint64_t val)
{
	int err = base_map_put(m, key, val);

	if (err && !w->err)
		w->err = err;
}

/* Writes stack `id`: a pseudo leaf (pseudo_fn at pseudo_pc) if given, then
 * as many of the n frames as fit one record (the outermost ones go). */
static void stack_record(struct gw *w, uint64_t id, const char *pseudo_fn, uint64_t pseudo_pc,
			 const struct enc_trace_frame *f, uint32_t n)
{
	uint8_t frames[MAX_PAYLOAD], head[20];
	size_t flen = 0, hlen;
	uint64_t count = 0;

	for (uint32_t k = 0; k < n + (pseudo_fn != NULL) && count < 1000; k++) {
		const struct enc_trace_frame *fr = pseudo_fn ? (k ? &f[k - 1] : NULL) : &f[k];
		uint64_t pc = fr ? fr->pc : pseudo_pc;
		uint64_t fn = string_id(w, fr ? fr->fn : pseudo_fn);
		uint64_t file = fr ? string_id(w, fr->file) : 0;
		uint8_t one[40];
		size_t l = enc__uvarint(one, pc);

		l += enc__uvarint(one + l, fn);
		l += enc__uvarint(one + l, file);
		l += enc__uvarint(one + l, fr ? fr->line : 0);   /* line */
		if (flen + l + 20 > MAX_PAYLOAD)
			break;
		memcpy(frames + flen, one, l);
		flen += l;
		count++;
	}
	hlen = enc__uvarint(head, id);
	hlen += enc__uvarint(head + hlen, count);
	base_buf_byte(&w->ob, 0xc0 | EV_STACK);
	enc__ob_uvarint(&w->ob, hlen + flen);
	base_buf_put(&w->ob, head, hlen);
	base_buf_put(&w->ob, frames, flen);
}

/* The pc of a pseudo frame named fn: one per name, below any real code. */
static uint64_t fake_pc(struct gw *w, uint64_t fn_id)
{
	uint64_t *known = base_map_get(&w->fake, fn_id + 1), pc;

	if (known)
		return *known;
	pc = FAKE_PC_BASE + 16 * (uint64_t)w->next_fake++;
	remember(w, &w->fake, fn_id + 1, pc);
	return pc;
}

/* The stack id of a thread's name: one frame, one per name (the goroutine
 * analysis groups goroutines by it). */
static uint64_t name_stack(struct gw *w, const struct enc_trace_thread *th)
{
	char buf[160];
	uint64_t sid, id, *known;

	/* Threads of several processes: the process too, so that the
	 * goroutine analysis keeps each process's threads apart. */
	if (th->pid)
		snprintf(buf, sizeof(buf), "thread %s of %s", th->name && th->name[0] ? th->name : "?",
			 th->process ? th->process : "?");
	else
		snprintf(buf, sizeof(buf), "thread %s", th->name && th->name[0] ? th->name : "?");
	sid = string_id(w, buf);
	if ((known = base_map_get(&w->names, sid + 1)))
		return *known;
	id = w->next_stack++;
	stack_record(w, id, buf, fake_pc(w, sid), NULL, 0);
	remember(w, &w->names, sid + 1, id);
	return id;
}

/* The id of stack k (-1: none, 0), or of stack k under a pseudo leaf
 * naming the system call (`syscall read`), written at first use. */
static uint64_t stack_id(struct gw *w, int32_t k, const char *syscall)
{
	char buf[64];
	uint64_t sid, key, id, *known;
	const struct enc_trace_stack *s;

	if (k < 0 && !syscall)
		return 0;
	if (!syscall)
		return (uint64_t)k + 1;
	snprintf(buf, sizeof(buf), "syscall %s", syscall);
	sid = string_id(w, buf);
	key = (((uint64_t)(k + 1) << 20) | sid) + 1;
	if ((known = base_map_get(&w->derived, key)))
		return *known;
	id = w->next_stack++;
	s = k >= 0 ? &w->tr->stacks[k] : NULL;
	stack_record(w, id, buf, fake_pc(w, sid), s ? s->frames : NULL, s ? s->n : 0);
	remember(w, &w->derived, key, id);
	return id;
}

/* ---- one thread's goroutine ---------------------------------------- */

static uint64_t bump(struct gw *w, uint64_t t)
{
	return t > w->last ? t : w->last + 1;
}

static void go_start(struct gw *w, struct gth *g, uint64_t t)
{
	uint64_t a[2] = { g->g, g->seq++ };

	timed(w, EV_GO_START, bump(w, t), a, 2);
	g->st = G_RUNNING;
}

/* Makes the goroutine runnable: unblocked, back from its system call, or
 * preempted. */
static void go_runnable(struct gw *w, struct gth *g, uint64_t t)
{
	/* An unblock carries the stack of the wait it ends (the runtime's
	 * carries the waker's, which we cannot know): -pprof=sched then
	 * names where threads waited for a core after waking. */
	uint64_t a[3] = { g->g, g->seq, g->st == G_WAITING ? g->wait_stk : 0 };

	if (g->st == G_WAITING) {
		timed(w, EV_GO_UNBLOCK, bump(w, t), a, 3);
		g->seq++;
	} else if (g->st == G_SYSCALL) {
		timed(w, EV_GO_SYSEXIT, bump(w, t), a, 3);   /* ts 0: docs/trace-format.md 4.1 */
		g->seq++;
	} else if (g->st == G_RUNNING) {
		timed(w, EV_GO_PREEMPT, bump(w, t), a + 2, 1);
	}
	g->st = G_RUNNABLE;
}

static void go_running(struct gw *w, struct gth *g, uint64_t t)
{
	if (g->st == G_WAITING || g->st == G_SYSCALL)
		go_runnable(w, g, t);
	if (g->st == G_RUNNABLE)
		go_start(w, g, t);
}

static void go_block(struct gw *w, struct gth *g, uint64_t t, const struct enc_trace_event *e)
{
	uint64_t stk;

	go_running(w, g, t);
	stk = stack_id(w, e->stack, e->state == ENC_TR_SYSCALL ? (e->syscall ? e->syscall : "?") :
								    NULL);
	switch (e->state) {
	case ENC_TR_SYNC: timed(w, EV_GO_BLOCK_SYNC, bump(w, t), &stk, 1); break;
	case ENC_TR_NET: timed(w, EV_GO_BLOCK_NET, bump(w, t), &stk, 1); break;
	case ENC_TR_SLEEP: timed(w, EV_GO_SLEEP, bump(w, t), &stk, 1); break;
	case ENC_TR_STOPPED: timed(w, EV_GO_BLOCK, bump(w, t), &stk, 1); break;
	default:
		timed(w, EV_GO_SYSCALL, bump(w, t), &stk, 1);
		timed(w, EV_GO_SYSBLOCK, bump(w, t), NULL, 0);
		g->st = G_SYSCALL;
		return;
	}
	g->wait_stk = stk;
	g->st = G_WAITING;
}

static void go_event(struct gw *w, struct gth *g, const struct enc_trace_event *e)
{
	uint64_t t = e->t_ns + T_BODY;

	if (e->kind == ENC_TR_RSS) {
		timed(w, EV_HEAP_ALLOC, bump(w, t), &e->value, 1);
		return;
	}
	if (g->st == G_DEAD)
		return;
	switch (e->kind) {
	case ENC_TR_STATE:
		if (e->state == ENC_TR_RUNNING)
			go_running(w, g, t);
		else if (e->state == ENC_TR_RUNNABLE)
			go_runnable(w, g, t);
		else
			go_block(w, g, t, e);
		break;
	case ENC_TR_SAMPLE: {
		/* Placed by its own time (realts), after the fact. */
		uint64_t a[4] = { t, g->p, g->g, stack_id(w, e->stack, NULL) };

		timed(w, EV_CPU_SAMPLE, w->last, a, 4);
		break;
	}
	case ENC_TR_EXIT:
		go_running(w, g, t);
		timed(w, EV_GO_END, bump(w, t), NULL, 0);
		timed(w, EV_PROC_STOP, bump(w, t), NULL, 0);
		g->st = G_DEAD;
		break;
	}
}

/* A thread's appearance: its P starts and its goroutine is created (at the
 * snapshot if it was there at the start). */
static void go_create(struct gw *w, struct gth *g, const struct enc_trace_thread *th, uint64_t t)
{
	uint64_t stk = name_stack(w, th);
	uint64_t ps[1] = { (uint64_t)th->tid }, cr[3] = { g->g, stk, 0 };

	timed(w, EV_PROC_START, t, ps, 1);
	timed(w, EV_GO_CREATE, t, cr, 3);
	g->seq = 1;
	g->st = G_RUNNABLE;
}

/* ---- the whole trace ------------------------------------------------ */

/* The goroutine id of each thread: its tid, or, for a tid seen before in
 * the trace (reused), the tid with the reuse count above bit 32. */
static int assign_gids(const struct enc_trace *tr, struct gth *gs)
{
	struct base_map seen = { 0 };   /* tid + 1 (a tid may be 0) -> times seen */
	int err = 0;

	for (size_t i = 0; i < tr->nthreads && !err; i++) {
		uint64_t tid = (uint64_t)tr->threads[i].tid & 0xffffffffu;
		uint64_t *times = base_map_get(&seen, tid + 1), n = times ? *times : 0;

		gs[i] = (struct gth){ .g = tid | n << 32, .p = (uint32_t)i };
		if (!gs[i].g)
			gs[i].g = 1ull << 32;   /* G 0 is the runtime's */
		err = base_map_put(&seen, tid + 1, n + 1);
	}
	base_map_free(&seen);
	return err;
}

/* Writes P p's batch: the thread's creation, then its events (and, on P 0,
 * the RSS counter), then its goroutine stopped if still running at the end. */
static void write_p(struct gw *w, struct gth *g, size_t p, const uint32_t *ev, size_t nev)
{
	const struct enc_trace *tr = w->tr;
	const struct enc_trace_thread *th = p < tr->nthreads ? &tr->threads[p] : NULL;
	uint64_t t0 = th && th->created ? th->start_ns + T_BODY : T_SNAP;
	uint64_t procs[2] = { tr->nthreads ? tr->nthreads : 1, 0 };

	batch(w, (uint32_t)p, p == 0 ? T_SNAP : t0);
	if (th && !th->created)
		go_create(w, g, th, t0);
	if (p == 0)   /* closes the snapshot: every Ps' creations at T_SNAP come first */
		timed(w, EV_GOMAXPROCS, T_SNAP + 1, procs, 2);
	if (th && th->created)
		go_create(w, g, th, t0);
	for (size_t i = 0; i < nev; i++) {
		const struct enc_trace_event *e = &tr->events[ev[i]];

		if (e->kind == ENC_TR_RSS || th)
			go_event(w, g, e);
	}
	/* No goroutine may be running at the end (the viewer needs each
	 * start matched by a stop), and a wait still going on ends with the
	 * trace: the views count only waits that ended (an unblock links them). */
	if (th && (g->st == G_RUNNING || g->st == G_WAITING || g->st == G_SYSCALL))
		go_runnable(w, g, tr->duration_ns + T_BODY);
}

int enc_trace_go(const struct enc_trace *tr, size_t max, uint8_t **out, size_t *len)
{
	static const char header[16] = "go 1.19 trace\0\0";
	struct gw w = { .tr = tr, .next_stack = (uint32_t)tr->nstacks + 1 };
	struct enc__buckets bk = { 0 };
	struct gth *gs = base_calloc(tr->nthreads + 1, sizeof(*gs));
	uint64_t freq = 1000000000u;
	char *bytes;
	int err = -ENOMEM;

	*out = NULL;
	base_buf_init(&w.ob, max);
	if (!gs || (err = assign_gids(tr, gs)) || (err = enc__buckets_by_thread(&bk, tr)))
		goto out;
	base_buf_put(&w.ob, header, sizeof(header));
	batch(&w, 0, 0);   /* the first record must be a batch (Go 1.23+) */
	record(&w, EV_FREQUENCY, &freq, 1);
	for (size_t k = 0; k < tr->nstacks; k++)
		stack_record(&w, k + 1, NULL, 0, tr->stacks[k].frames, tr->stacks[k].n);
	for (size_t p = 0; p < (tr->nthreads ? tr->nthreads : 1); p++)
		write_p(&w, &gs[p], p, bk.ev + bk.first[p], bk.first[p + 1] - bk.first[p]);
	err = w.strs.err ? w.strs.err : w.err;
	if (!err && !(err = base_buf_take(&w.ob, &bytes, len)))
		*out = (uint8_t *)bytes;
out:
	enc__buckets_free(&bk);
	enc__strtab_free(&w.strs);
	base_map_free(&w.derived);
	base_map_free(&w.names);
	base_map_free(&w.fake);
	base_buf_free(&w.ob);
	base_free(gs);
	return err;
}
