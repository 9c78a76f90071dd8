/* The Go 1.19 execution trace writer (encoder/trace.h): the exact bytes of
 * a small trace, worked out by hand from the format (Go's
 * src/internal/trace/parser.go: record header byte, LEB128 varints,
 * length-prefixed records of four values or more, strings and stacks
 * written before their first use); and a larger trace read back by a
 * decoder written here, which applies the rules Go's parser and viewer
 * check (values per event, strings, stacks, the goroutines' sequence
 * numbers and states, one goroutine per P, none running at the end) and
 * gives back each thread's states, samples and stacks, and the RSS; a
 * stack too deep for one record keeps its leaf frames; an event naming no
 * thread or stack, and output over its bound, are refused. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "encoder/trace.h"
#include "tests/harness.h"

enum {
	EV_BATCH = 1, EV_FREQUENCY = 2, EV_STACK = 3, EV_GOMAXPROCS = 4, EV_PROC_START = 5,
	EV_PROC_STOP = 6, EV_GO_CREATE = 13, EV_GO_START = 14, EV_GO_END = 15,
	EV_GO_PREEMPT = 18, EV_GO_SLEEP = 19, EV_GO_BLOCK = 20, EV_GO_UNBLOCK = 21,
	EV_GO_BLOCK_SYNC = 25, EV_GO_BLOCK_NET = 27, EV_GO_SYSCALL = 28, EV_GO_SYSEXIT = 29,
	EV_GO_SYSBLOCK = 30, EV_HEAP_ALLOC = 33, EV_STRING = 37, EV_CPU_SAMPLE = 49,
};

/* ---- the small trace, byte by byte ----------------------------------- */

static const struct enc_trace_frame small_frames[2] = {
	{ 0x401000, "do_io", "io.c", 7 },
	{ 0x402000, "main", "main.c", 0 },
};
static const struct enc_trace_stack small_stacks[1] = { { small_frames, 2 } };
static const struct enc_trace_thread small_threads[1] = {
	{ .tid = 100, .process = "demo (100)", .name = "main" },
};
static const struct enc_trace_event small_events[] = {
	{ .t_ns = 0, .kind = ENC_TR_STATE, .state = ENC_TR_RUNNING, .stack = -1 },
	{ .t_ns = 1000, .kind = ENC_TR_STATE, .state = ENC_TR_SYSCALL, .stack = 0,
	  .syscall = "read" },
	{ .t_ns = 5000000, .kind = ENC_TR_STATE, .state = ENC_TR_RUNNING, .stack = -1 },
	{ .t_ns = 5000100, .kind = ENC_TR_SAMPLE, .stack = 0 },
	{ .t_ns = 6000000, .kind = ENC_TR_RSS, .value = 4096, .stack = -1 },
};

/* (Each hex escape ends its literal: "\x05" "do_io" is 5, then "do_io".) */
static const char small_want[] =
	"go 1.19 trace\0\0\0"
	"\x41\x00\x00"                          /* Batch p 0 ticks 0 */
	"\x02\x80\x94\xeb\xdc\x03"              /* Frequency 1e9 */
	"\x25\x01\x05" "do_io"                  /* String 1 */
	"\x25\x02\x04" "io.c"
	"\x25\x03\x04" "main"
	"\x25\x04\x06" "main.c"
	"\xc3\x10\x01\x02"                      /* Stack 1 of 2 frames, in 16 bytes: */
	"\x80\xa0\x80\x02\x01\x02\x07"          /*   0x401000 do_io io.c:7 */
	"\x80\xc0\x80\x02\x03\x04\x00"          /*   0x402000 main main.c */
	"\x41\x00\xe8\x07"                      /* Batch p 0 ticks 1000: the snapshot */
	"\x25\x05\x0b" "thread main"
	"\xc3\x07\x02\x01\x80\x20\x05\x00\x00"  /* Stack 2: "thread main" at 0x1000 */
	"\x45\x00\x64"                          /* ProcStart dt 0 thread 100 */
	"\xcd\x04\x00\x64\x02\x00"              /* GoCreate dt 0 g 100 newstk 2 stk 0 */
	"\x84\x01\x01\x00"                      /* Gomaxprocs dt 1 procs 1 stk 0 */
	"\x8e\xe7\x07\x64\x01"                  /* GoStart dt 999 g 100 seq 1 (t 2000) */
	"\x25\x06\x0c" "syscall read"
	"\xc3\x15\x03\x03"                      /* Stack 3 of 3 frames, in 21 bytes: */
	"\x90\x20\x06\x00\x00"                  /*   0x1010 "syscall read" */
	"\x80\xa0\x80\x02\x01\x02\x07"
	"\x80\xc0\x80\x02\x03\x04\x00"
	"\x5c\xe8\x07\x03"                      /* GoSysCall dt 1000 stk 3 */
	"\x1e\x01"                              /* GoSysBlock dt 1 */
	"\xdd\x07\xd7\x8e\xb1\x02\x64\x02\x00"  /* GoSysExit dt 4998999 g 100 seq 2 realts 0 */
	"\x8e\x01\x64\x03"                      /* GoStart dt 1 g 100 seq 3 */
	"\xf1\x08\x00\xf4\xa6\xb1\x02\x00\x64\x01"   /* CPUSample dt 0 realts 5002100
	                                               * p 0 g 100 stk 1 */
	"\x61\xbf\x84\x3d\x80\x20"              /* HeapAlloc dt 999999 bytes 4096 */
	"\x52\x80\x92\xf4\x01\x00";             /* GoPreempt dt 4000000 stk 0: none left running */

TEST(trace_go_writes_the_bytes_of_a_small_trace)
{
	const struct enc_trace tr = {
		.pid = 100, .process = "demo", .duration_ns = 10000000,
		.threads = small_threads, .nthreads = 1,
		.events = small_events, .nevents = sizeof(small_events) / sizeof(small_events[0]),
		.stacks = small_stacks, .nstacks = 1,
	};
	uint8_t *out = NULL;
	size_t len = 0;

	ASSERT_OK(enc_trace_go(&tr, 1 << 20, &out, &len));
	for (size_t i = 0; i < len && i < sizeof(small_want) - 1; i++)
		if (out[i] != (uint8_t)small_want[i])
			FAIL_AT("byte %zu is %#x, want %#x", i, out[i], (uint8_t)small_want[i]);
	ASSERT_EQ(len, sizeof(small_want) - 1);
	base_free(out);
}

/* ---- a decoder ------------------------------------------------------- */

#define DEC_STRS 512
#define DEC_STACKS 32
#define DEC_FRAMES 400
#define DEC_EVENTS 256

struct dec_frame {
	uint64_t pc, line;
	const char *fn, *file;
};
struct dec_stack {
	uint64_t id;
	int n;
	struct dec_frame f[DEC_FRAMES];
};
struct dec_ev {
	int typ, p;
	uint64_t t;
	uint64_t a[5];        /* the values after the time's */
};
struct dec {
	char strs[DEC_STRS][64];
	int have_str[DEC_STRS];
	struct dec_stack stk[DEC_STACKS];
	int nstk;
	struct dec_ev ev[DEC_EVENTS];
	int nev;
	uint64_t freq;
	int nfreq, nbatch;
	size_t max_payload;
};

static uint64_t uv(const uint8_t *b, size_t len, size_t *pos)
{
	uint64_t v = 0;

	for (int shift = 0; shift < 70; shift += 7) {
		uint8_t c;

		if (*pos >= len)
			FAIL_AT("varint past the end at %zu", *pos);
		c = b[(*pos)++];
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
	FAIL_AT("varint of more than 10 bytes at %zu", *pos);
}

/* Values per event, the time's included (Go 1.19's argNum), -1: a stack. */
static int values_of(int typ)
{
	switch (typ) {
	case EV_BATCH: return 2;
	case EV_FREQUENCY: return 1;
	case EV_STACK: return -1;
	case EV_GOMAXPROCS: return 3;
	case EV_PROC_START: return 2;
	case EV_PROC_STOP: return 1;
	case EV_GO_CREATE: return 4;
	case EV_GO_START: return 3;
	case EV_GO_END: return 1;
	case EV_GO_PREEMPT: case EV_GO_SLEEP: case EV_GO_BLOCK: return 2;
	case EV_GO_UNBLOCK: return 4;
	case EV_GO_BLOCK_SYNC: case EV_GO_BLOCK_NET: case EV_GO_SYSCALL: return 2;
	case EV_GO_SYSEXIT: return 4;
	case EV_GO_SYSBLOCK: return 1;
	case EV_HEAP_ALLOC: return 2;
	case EV_CPU_SAMPLE: return 5;
	}
	FAIL_AT("event type %d is none the writer may use", typ);
}

static const char *str_of(const struct dec *d, uint64_t id)
{
	if (!id)
		return "";
	ASSERT(id < DEC_STRS && d->have_str[id]);
	return d->strs[id];
}

/* Reads the records of a trace into d, as Go's readTrace does. */
static void decode(struct dec *d, const uint8_t *b, size_t len)
{
	size_t pos = 16;
	uint64_t t = 0;
	int p = -1;

	memset(d, 0, sizeof(*d));
	ASSERT(len >= 16 && !memcmp(b, "go 1.19 trace\0\0\0", 16));
	ASSERT(len > 16 && b[16] == (EV_BATCH | 1 << 6));   /* the first record is a batch */
	while (pos < len) {
		uint8_t h = b[pos++];
		int typ = h & 0x3f, narg = (h >> 6) + 1, n = 0;
		uint64_t v[DEC_FRAMES * 4 + 2];
		size_t end;

		if (typ == EV_STRING) {
			uint64_t id = uv(b, len, &pos), sl = uv(b, len, &pos);

			ASSERT(id > 0 && id < DEC_STRS && !d->have_str[id]);   /* nonzero, unique */
			ASSERT(sl > 0 && sl < 64 && pos + sl <= len);          /* no empty string */
			memcpy(d->strs[id], b + pos, sl);
			d->have_str[id] = 1;
			pos += sl;
			continue;
		}
		if (narg < 4) {
			for (; n < narg; n++)
				v[n] = uv(b, len, &pos);
		} else {
			uint64_t pl = uv(b, len, &pos);

			ASSERT(pl <= 2048);   /* Go 1.23+'s bound */
			if (pl > d->max_payload)
				d->max_payload = pl;
			end = pos + pl;
			ASSERT(end <= len);
			while (pos < end && n < (int)(sizeof(v) / sizeof(v[0])))
				v[n++] = uv(b, len, &pos);
			ASSERT_EQ(pos, end);
		}
		if (values_of(typ) >= 0)
			ASSERT_EQ(n, values_of(typ));
		switch (typ) {
		case EV_BATCH:
			p = (int)v[0];
			t = v[1];
			d->nbatch++;
			continue;
		case EV_FREQUENCY:
			d->freq = v[0];
			d->nfreq++;
			continue;
		case EV_STACK: {
			struct dec_stack *s = &d->stk[d->nstk++];

			ASSERT(d->nstk <= DEC_STACKS);
			ASSERT(n >= 2 && v[0] > 0 && v[1] >= 1 && v[1] <= DEC_FRAMES);
			ASSERT_EQ(n, 2 + 4 * (int)v[1]);
			s->id = v[0];
			s->n = (int)v[1];
			for (int i = 0; i < s->n; i++) {
				const uint64_t *fv = v + 2 + 4 * i;

				s->f[i].pc = fv[0];
				s->f[i].fn = str_of(d, fv[1]);
				s->f[i].file = str_of(d, fv[2]);
				s->f[i].line = fv[3];
			}
			continue;
		}
		}
		ASSERT(p >= 0);   /* a timed event comes in a batch */
		ASSERT(d->nev < DEC_EVENTS);
		t += v[0];
		d->ev[d->nev] = (struct dec_ev){ .typ = typ, .p = p, .t = t };
		memcpy(d->ev[d->nev].a, v + 1, (size_t)(n - 1) * sizeof(v[0]));
		d->nev++;
	}
	ASSERT_EQ(pos, len);
	ASSERT_EQ(d->nfreq, 1);
}

static const struct dec_stack *stack_of(const struct dec *d, uint64_t id)
{
	for (int i = 0; i < d->nstk; i++)
		if (d->stk[i].id == id)
			return &d->stk[i];
	FAIL_AT("stack %llu is not defined", (unsigned long long)id);
}

/* The goroutines' states, as Go's parser (order1007, postProcessTrace)
 * and viewer hold them. */
enum gst { G_NONE, G_RUNNABLE, G_RUNNING, G_WAITING, G_SYSCALL, G_DEAD };
struct gstate {
	uint64_t g, seq;
	enum gst st;
	int p;
};

static struct gstate *g_of(struct gstate *gs, int *ngs, uint64_t g, int create)
{
	for (int i = 0; i < *ngs; i++)
		if (gs[i].g == g)
			return &gs[i];
	if (!create)
		FAIL_AT("goroutine %#llx does not exist", (unsigned long long)g);
	gs[*ngs] = (struct gstate){ .g = g };
	return &gs[(*ngs)++];
}

/* Checks d's events against Go's rules for goroutines and Ps: every
 * transition from a state it may come from, sequence numbers in order, one
 * goroutine per P, each P's time never going back, none running at the end.
 * Every stack an event names is defined. */
static void check_rules(const struct dec *d, int nprocs)
{
	struct gstate gs[32];
	uint64_t running[32] = { 0 }, last_t[32] = { 0 };
	int ngs = 0, started[32] = { 0 };

	for (int i = 0; i < d->nev; i++) {
		const struct dec_ev *e = &d->ev[i];
		uint64_t cur = running[e->p];
		struct gstate *g;

		ASSERT(e->p >= 0 && e->p < nprocs);
		ASSERT(e->t >= last_t[e->p]);
		last_t[e->p] = e->t;
		switch (e->typ) {
		case EV_GOMAXPROCS:
			ASSERT_EQ(e->a[0], nprocs);
			break;
		case EV_PROC_START:
			ASSERT(!started[e->p]);
			started[e->p] = 1;
			break;
		case EV_PROC_STOP:
			ASSERT(started[e->p] && !cur);
			started[e->p] = 0;
			break;
		case EV_GO_CREATE:
			ASSERT(started[e->p]);
			g = g_of(gs, &ngs, e->a[0], 1);
			ASSERT(e->a[0] != 0 && g->st == G_NONE);   /* "g N already exists" */
			ASSERT(stack_of(d, e->a[1])->n >= 1 && stack_of(d, e->a[1])->f[0].pc);
			*g = (struct gstate){ .g = e->a[0], .seq = 1, .st = G_RUNNABLE, .p = e->p };
			break;
		case EV_GO_START:
			g = g_of(gs, &ngs, e->a[0], 0);
			ASSERT(!cur && g->st == G_RUNNABLE && g->p == e->p);
			ASSERT_EQ(e->a[1], g->seq);
			g->seq++;
			g->st = G_RUNNING;
			running[e->p] = g->g;
			break;
		case EV_GO_UNBLOCK:
		case EV_GO_SYSEXIT:
			g = g_of(gs, &ngs, e->a[0], 0);
			ASSERT(g->st == (e->typ == EV_GO_UNBLOCK ? G_WAITING : G_SYSCALL));
			ASSERT_EQ(e->a[1], g->seq);
			if (e->typ == EV_GO_SYSEXIT)
				ASSERT_EQ(e->a[2], 0);   /* realts 0 */
			else if (e->a[2])
				(void)stack_of(d, e->a[2]);
			g->seq++;
			g->st = G_RUNNABLE;
			break;
		case EV_GO_SYSCALL:
			ASSERT(cur);
			(void)stack_of(d, e->a[0]);
			break;
		case EV_GO_PREEMPT: case EV_GO_SLEEP: case EV_GO_BLOCK: case EV_GO_BLOCK_SYNC:
		case EV_GO_BLOCK_NET: case EV_GO_SYSBLOCK: case EV_GO_END:
			ASSERT(cur);   /* the goroutine running on this P */
			g = g_of(gs, &ngs, cur, 0);
			g->st = e->typ == EV_GO_PREEMPT ? G_RUNNABLE :
				e->typ == EV_GO_END ? G_DEAD :
				e->typ == EV_GO_SYSBLOCK ? G_SYSCALL : G_WAITING;
			if (e->typ != EV_GO_SYSBLOCK && e->typ != EV_GO_END && e->a[0])
				(void)stack_of(d, e->a[0]);
			running[e->p] = 0;
			break;
		case EV_CPU_SAMPLE:
			g = g_of(gs, &ngs, e->a[2], 0);
			ASSERT(g->st != G_DEAD && (int)e->a[1] == g->p);
			(void)stack_of(d, e->a[3]);
			break;
		case EV_HEAP_ALLOC:
			break;
		default:
			FAIL_AT("event type %d", e->typ);
		}
	}
	for (int p = 0; p < nprocs; p++)
		ASSERT_EQ(running[p], 0);   /* the viewer needs every start stopped */
	/* One pc, one function (the views key locations by pc). */
	for (int i = 0; i < d->nstk; i++)
		for (int f = 0; f < d->stk[i].n; f++)
			for (int j = 0; j < d->nstk; j++)
				for (int h = 0; h < d->stk[j].n; h++)
					if (d->stk[i].f[f].pc == d->stk[j].f[h].pc)
						ASSERT_STR_EQ(d->stk[i].f[f].fn, d->stk[j].f[h].fn);
}

/* ---- the round trip -------------------------------------------------- */

static const struct enc_trace_frame rt_a[3] = {
	{ 0x401100, "lock_wait", "lock.c", 12 }, { 0x401200, "worker_loop", "worker.c", 40 },
	{ 0x401300, "start_thread", "", 0 },
};
static const struct enc_trace_frame rt_b[2] = {
	{ 0x402100, "epoll_wait", "", 0 }, { 0x402200, "serve", "server.py", 7 },
};
static const struct enc_trace_stack rt_stacks[2] = { { rt_a, 3 }, { rt_b, 2 } };
static const struct enc_trace_thread rt_threads[3] = {
	{ .tid = 10, .name = "main" },
	{ .tid = 11, .pid = 77, .process = "other (77)", .name = "worker", .start_ns = 2000,
	  .created = 1 },
	/* tid 11 again: a new thread of the same tid */
	{ .tid = 11, .pid = 77, .process = "other (77)", .name = "worker", .start_ns = 5000,
	  .created = 1 },
};
#define ST(t_, th_, s_, k_, sc_)                                                    \
	{ .t_ns = t_, .thread = th_, .kind = ENC_TR_STATE, .state = s_, .stack = k_, \
	  .syscall = sc_ }
#define SAMPLE(t_, th_, k_) { .t_ns = t_, .thread = th_, .kind = ENC_TR_SAMPLE, .stack = k_ }
static const struct enc_trace_event rt_events[] = {
	ST(0, 0, ENC_TR_RUNNING, -1, NULL),
	SAMPLE(100, 0, 0),
	ST(1000, 0, ENC_TR_SYNC, 0, NULL),
	{ .t_ns = 1500, .kind = ENC_TR_RSS, .value = 1ull << 40, .stack = -1 },
	ST(2000, 1, ENC_TR_RUNNING, -1, NULL),
	ST(2500, 1, ENC_TR_SYSCALL, 1, "write"),
	ST(2600, 1, ENC_TR_RUNNING, -1, NULL),
	ST(2700, 1, ENC_TR_STOPPED, 0, NULL),
	ST(2900, 1, ENC_TR_RUNNING, -1, NULL),
	SAMPLE(2950, 1, 1),
	{ .t_ns = 3000, .thread = 1, .kind = ENC_TR_EXIT, .stack = -1 },
	ST(3000, 0, ENC_TR_RUNNABLE, -1, NULL),
	ST(3500, 0, ENC_TR_RUNNING, -1, NULL),
	ST(4000, 0, ENC_TR_NET, 1, NULL),
	ST(5000, 2, ENC_TR_RUNNING, -1, NULL),
	ST(5100, 2, ENC_TR_SYSCALL, -1, "read"),
	ST(6000, 0, ENC_TR_RUNNING, -1, NULL),
	ST(7000, 0, ENC_TR_SLEEP, -1, NULL),
	ST(8000, 0, ENC_TR_RUNNING, -1, NULL),
	SAMPLE(8500, 0, 1),
	{ .t_ns = 9000, .kind = ENC_TR_RSS, .value = UINT64_MAX, .stack = -1 },
};
#define RT_END 10000u

/* What P p's goroutine is doing at time t (after the events at t): an
 * enum enc_tr_state, or 0 before its creation and after its end; *stk the
 * stack of its last block. */
static int state_at(const struct dec *d, int p, uint64_t t, uint64_t *stk)
{
	int st = 0;

	*stk = 0;
	for (int i = 0; i < d->nev; i++) {
		const struct dec_ev *e = &d->ev[i];

		if (e->p != p || e->t > t)
			continue;
		switch (e->typ) {
		case EV_GO_CREATE: case EV_GO_PREEMPT: case EV_GO_UNBLOCK: case EV_GO_SYSEXIT:
			st = ENC_TR_RUNNABLE;
			break;
		case EV_GO_START: st = ENC_TR_RUNNING; break;
		case EV_GO_BLOCK_SYNC: st = ENC_TR_SYNC; *stk = e->a[0]; break;
		case EV_GO_BLOCK_NET: st = ENC_TR_NET; *stk = e->a[0]; break;
		case EV_GO_SLEEP: st = ENC_TR_SLEEP; *stk = e->a[0]; break;
		case EV_GO_BLOCK: st = ENC_TR_STOPPED; *stk = e->a[0]; break;
		case EV_GO_SYSCALL: st = ENC_TR_SYSCALL; *stk = e->a[0]; break;
		case EV_GO_END: st = 0; break;
		}
	}
	return st;
}

/* Stack id holds `pseudo` (if not NULL) over the input's stack k (if >= 0). */
static void assert_stack(const struct dec *d, uint64_t id, const char *pseudo, int32_t k)
{
	const struct enc_trace_stack *in = k >= 0 ? &rt_stacks[k] : NULL;
	const struct dec_stack *s;
	int skip = pseudo != NULL;

	if (!pseudo && k < 0) {
		ASSERT_EQ(id, 0);
		return;
	}
	s = stack_of(d, id);
	ASSERT_EQ(s->n, skip + (in ? (int)in->n : 0));
	if (pseudo) {
		ASSERT_STR_EQ(s->f[0].fn, pseudo);
		ASSERT(s->f[0].pc != 0);
	}
	for (int f = 0; in && f < (int)in->n; f++) {
		ASSERT_U64_EQ(s->f[skip + f].pc, in->frames[f].pc);
		ASSERT_STR_EQ(s->f[skip + f].fn, in->frames[f].fn);
		ASSERT_STR_EQ(s->f[skip + f].file, in->frames[f].file);
		ASSERT_EQ(s->f[skip + f].line, in->frames[f].line);
	}
}

static const struct dec_ev *find_ev(const struct dec *d, int typ, int p, int nth)
{
	for (int i = 0; i < d->nev; i++)
		if (d->ev[i].typ == typ && (p < 0 || d->ev[i].p == p) && nth-- == 0)
			return &d->ev[i];
	return NULL;
}

static struct dec dec;

TEST(trace_go_round_trips_through_a_decoder)
{
	const struct enc_trace tr = {
		.pid = 0, .process = "two", .duration_ns = RT_END,
		.threads = rt_threads, .nthreads = 3,
		.events = rt_events, .nevents = sizeof(rt_events) / sizeof(rt_events[0]),
		.stacks = rt_stacks, .nstacks = 2,
	};
	static const char *const names[3] = { "thread main", "thread worker of other (77)",
					      "thread worker of other (77)" };
	const uint64_t gids[3] = { 10, 11, 11 | 1ull << 32 };
	const struct dec_ev *e, *maxprocs;
	uint8_t *out = NULL;
	size_t len = 0;
	uint64_t off, stk;
	int nrss = 0;

	ASSERT_OK(enc_trace_go(&tr, 1 << 20, &out, &len));
	decode(&dec, out, len);
	base_free(out);
	check_rules(&dec, 3);
	ASSERT_U64_EQ(dec.freq, 1000000000u);
	/* Each thread a P, started with its tid, its goroutine named after it;
	 * those there at the start created before Gomaxprocs closes the
	 * snapshot, the others when they were first seen. */
	ASSERT((maxprocs = find_ev(&dec, EV_GOMAXPROCS, -1, 0)) != NULL);
	ASSERT((e = find_ev(&dec, EV_GO_START, 0, 0)) != NULL);
	off = e->t;   /* thread 0's first RUNNING, at 0: the body's origin */
	for (int i = 0; i < 3; i++) {
		ASSERT((e = find_ev(&dec, EV_PROC_START, i, 0)) != NULL);
		ASSERT_EQ(e->a[0], rt_threads[i].tid);
		ASSERT((e = find_ev(&dec, EV_GO_CREATE, i, 0)) != NULL);
		ASSERT_U64_EQ(e->a[0], gids[i]);
		ASSERT_STR_EQ(stack_of(&dec, e->a[1])->f[0].fn, names[i]);
		if (rt_threads[i].created)
			ASSERT_U64_EQ(e->t, rt_threads[i].start_ns + off);
		else
			ASSERT(e->t < maxprocs->t && maxprocs->t < off);
	}
	/* Each state where it began (a start after a wait comes 1 ns after
	 * the wait's end), with its stack; each sample at its time, with its
	 * stack; the RSS in order. */
	for (size_t i = 0; i < tr.nevents; i++) {
		const struct enc_trace_event *in = &rt_events[i];
		uint64_t t = in->t_ns + off;
		int p = (int)in->thread, k = 0;

		switch (in->kind) {
		case ENC_TR_STATE:
			ASSERT(state_at(&dec, p, t - 1, &stk) != in->state);
			ASSERT_EQ(state_at(&dec, p, t + 1, &stk), in->state);
			if (in->state == ENC_TR_SYSCALL) {
				char want[64];

				snprintf(want, sizeof(want), "syscall %s", in->syscall);
				assert_stack(&dec, stk, want, in->stack);
			} else if (in->state != ENC_TR_RUNNING && in->state != ENC_TR_RUNNABLE) {
				assert_stack(&dec, stk, NULL, in->stack);
			}
			break;
		case ENC_TR_SAMPLE:
			while ((e = find_ev(&dec, EV_CPU_SAMPLE, p, k)) && e->a[0] != t)
				k++;
			ASSERT(e != NULL);
			ASSERT_EQ(e->a[1], p);
			ASSERT_U64_EQ(e->a[2], gids[p]);
			assert_stack(&dec, e->a[3], NULL, in->stack);
			break;
		case ENC_TR_EXIT:
			ASSERT((e = find_ev(&dec, EV_GO_END, p, 0)) != NULL);
			ASSERT(e->t >= t && e->t <= t + 2);
			ASSERT((e = find_ev(&dec, EV_PROC_STOP, p, 0)) != NULL && e->t >= t);
			ASSERT_EQ(state_at(&dec, p, t + 2, &stk), 0);
			break;
		case ENC_TR_RSS:
			ASSERT((e = find_ev(&dec, EV_HEAP_ALLOC, 0, nrss++)) != NULL);
			ASSERT_U64_EQ(e->t, t);
			ASSERT_U64_EQ(e->a[0], in->value);
			break;
		}
	}
	ASSERT(find_ev(&dec, EV_HEAP_ALLOC, -1, nrss) == NULL);
	/* At the end nothing runs and no wait goes on: thread 0 (running) and
	 * thread 2 (in read) are made runnable when the trace ends. */
	ASSERT_EQ(state_at(&dec, 0, RT_END + off + 2, &stk), ENC_TR_RUNNABLE);
	ASSERT_EQ(state_at(&dec, 2, RT_END + off + 2, &stk), ENC_TR_RUNNABLE);
	ASSERT_EQ(state_at(&dec, 2, RT_END + off - 1, &stk), ENC_TR_SYSCALL);
}

TEST(trace_go_keeps_a_deep_stacks_leaf_frames_within_one_record)
{
	static struct enc_trace_frame deep[300];
	static char fn[300][48];
	const struct enc_trace_stack stack = { deep, 300 };
	const struct enc_trace_thread th = { .tid = 1, .name = "deep" };
	const struct enc_trace_event ev[2] = {
		ST(0, 0, ENC_TR_RUNNING, -1, NULL), SAMPLE(10, 0, 0),
	};
	const struct enc_trace tr = { .pid = 1, .process = "deep", .duration_ns = 100,
				      .threads = &th, .nthreads = 1, .events = ev, .nevents = 2,
				      .stacks = &stack, .nstacks = 1 };
	const struct dec_stack *s;
	const struct dec_ev *e;
	uint8_t *out = NULL;
	size_t len = 0;

	for (int i = 0; i < 300; i++) {
		snprintf(fn[i], sizeof(fn[i]), "function_%03d_of_a_rather_deep_stack", i);
		deep[i] = (struct enc_trace_frame){ 0x500000 + 16u * (uint64_t)i, fn[i], "deep.c",
						    (uint32_t)i + 1 };
	}
	ASSERT_OK(enc_trace_go(&tr, 1 << 20, &out, &len));
	decode(&dec, out, len);
	base_free(out);
	check_rules(&dec, 1);
	ASSERT((e = find_ev(&dec, EV_CPU_SAMPLE, 0, 0)) != NULL);
	s = stack_of(&dec, e->a[3]);
	/* As many frames as one record of 2048 bytes holds, the leaf's first. */
	ASSERT(s->n >= 200 && s->n < 300);
	ASSERT(dec.max_payload > 2048 - 64);
	for (int f = 0; f < s->n; f++) {
		ASSERT_U64_EQ(s->f[f].pc, deep[f].pc);
		ASSERT_STR_EQ(s->f[f].fn, deep[f].fn);
		ASSERT_EQ(s->f[f].line, deep[f].line);
	}
}

TEST(trace_go_refuses_an_unknown_thread_or_stack_and_output_over_its_bound)
{
	struct enc_trace_event bad = small_events[1];
	struct enc_trace tr = {
		.pid = 100, .process = "demo", .duration_ns = 10000000,
		.threads = small_threads, .nthreads = 1,
		.events = &bad, .nevents = 1, .stacks = small_stacks, .nstacks = 1,
	};
	uint8_t *out = (uint8_t *)&tr;
	size_t len = 0, want = sizeof(small_want) - 1;

	bad.thread = 1;
	ASSERT_EQ(enc_trace_go(&tr, 1 << 20, &out, &len), -EINVAL);
	ASSERT(out == NULL);
	bad.thread = 0;
	bad.stack = 1;
	ASSERT_EQ(enc_trace_go(&tr, 1 << 20, &out, &len), -EINVAL);
	ASSERT(out == NULL);
	/* The small trace in exactly its size, and not in a byte less. */
	tr.events = small_events;
	tr.nevents = sizeof(small_events) / sizeof(small_events[0]);
	ASSERT_EQ(enc_trace_go(&tr, want - 1, &out, &len), -E2BIG);
	ASSERT(out == NULL);
	ASSERT_OK(enc_trace_go(&tr, want, &out, &len));
	ASSERT_EQ(len, want);
	base_free(out);
}
