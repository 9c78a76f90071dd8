/* A Go program's runtime read from outside (see gort.h). The facts it
 * relies on, per release, are in goruntime_tables.inc (generated from each
 * release's DWARF and runtime sources by scripts/gooffsets.sh) and
 * docs/runtimes.md. Sampler thread only. */
#include "ptrace/runtimes/go/gort.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/user.h>

#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/runtimes/go/gomem.h"
#include "ptrace/runtimes/go/goruntime_tables.inc"
#include "ptrace/space/gopclntab.h"
#include "ptrace/space/mem.h"
#include "ptrace/space/space.h"

/* A g's saved context (gobuf): sp, pc, then g itself, since Go 1.0. */
#define GOBUF_G 16
/* At most this many g's read per system call. */
#define READ_BATCH 64

struct pt_go {
	struct pt_space *as;
	int state;                      /* 0 not found (yet), 1 active */
	char version[40];               /* "go1.26.10" */
	const struct go_rt_layout *L;
	uint64_t mod_lo, mod_hi;        /* the Go module's runtime addresses */
	uint64_t allglen, allgptr;      /* runtime addresses of the globals */
	const char *found_by;           /* "symbols", "runtime.forEachGRace" */
	/* startpc -> 1 system, 0 user, a small cache (goroutines of one
	 * function are many) */
	struct { uint64_t pc; int system; } sys[64];
	unsigned int nsys;
};

int pt_go_new(struct pt_go **out, struct pt_space *as)
{
	struct pt_go *go = base_calloc(1, sizeof(*go));

	*out = NULL;
	if (!go)
		return -ENOMEM;
	go->as = as;
	*out = go;
	return 0;
}

void pt_go_free(struct pt_go *go)
{
	base_free(go);
}

void pt_go_reset(struct pt_go *go)
{
	struct pt_space *as = go->as;

	memset(go, 0, sizeof(*go));
	go->as = as;
}

const char *pt_go_version(const struct pt_go *go)
{
	return go->version;
}

static int rd(struct pt_go *go, uint64_t addr, void *buf, size_t len)
{
	return pt_space_read(go->as, addr, buf, len);
}

static uint64_t field(const uint8_t *rec, int off, int size)
{
	uint64_t v = 0;

	if (off < 0)
		return 0;
	memcpy(&v, rec + off, size > 0 && size < 8 ? (size_t)size : 8);
	return v;
}

/* The release from the module's build info (.go.buildinfo: the magic, the
 * pointer size, flags, then since Go 1.18 the version as a varint-prefixed
 * string at byte 32) into go->version. Returns 0 or -ENOENT. */
static int read_version(struct pt_go *go)
{
	static const char magic[] = "\xff Go buildinf:";
	const char *const names[1] = { PT_SPACE_SECTION(".go.buildinfo") };
	uint64_t addr = 0, size = 0;
	uint8_t b[32 + 10 + sizeof(go->version)];
	uint64_t n = 0;
	int shift = 0, i = 32;

	if (pt_space_lookup(go->as, go->mod_lo, names, &addr, &size, 1) != 1 ||
	    rd(go, addr, b, sizeof(b)) || memcmp(b, magic, sizeof(magic) - 1) || b[14] != 8 ||
	    !(b[15] & 2))
		return -ENOENT;
	for (; i < 42 && shift < 63; i++, shift += 7) {
		n |= (uint64_t)(b[i] & 0x7f) << shift;
		if (!(b[i] & 0x80))
			break;
	}
	i++;
	if (n < 4 || n >= sizeof(go->version) || memcmp(b + i, "go1.", 4))
		return -ENOENT;
	memcpy(go->version, b + i, n);
	go->version[n] = '\0';
	return 0;
}

/* The row for release go1.<minor>, or NULL. */
static const struct go_rt_layout *layout_of(const char *version, int *minor)
{
	char *end;
	long m = strtol(version + 4, &end, 10);

	*minor = (int)m;
	if (end == version + 4 || m <= 0 || m > 99)
		return NULL;
	for (size_t i = 0; i < sizeof(go_rt_layouts) / sizeof(go_rt_layouts[0]); i++)
		if (go_rt_layouts[i].release == GO_RT_RELEASE(1, (int)m))
			return &go_rt_layouts[i];
	return NULL;
}

/* The runtime addresses of allglen and allgptr from the two loads
 * runtime.forEachGRace makes first (its inlined atomicAllG: allglen, then
 * allgptr), each a MOVQ of a RIP-relative quadword (REX.W 8B /r with
 * mod 00, r/m 101: 48|4c 8b xx disp32), the same from Go 1.19 to 1.27.
 * Returns 0 or -ENOENT. */
static int globals_from_code(struct pt_go *go)
{
	uint64_t entry, end, got[2];
	uint8_t code[512];
	size_t len;
	int n = 0;

	if (pt_space_go_func(go->as, go->mod_lo, "runtime.forEachGRace", &entry, &end))
		return -ENOENT;
	len = end - entry < sizeof(code) ? (size_t)(end - entry) : sizeof(code);
	if (len < 7 || rd(go, entry, code, len))
		return -ENOENT;
	for (size_t i = 0; i + 7 <= len && n < 2; i++) {
		int32_t disp;

		if ((code[i] != 0x48 && code[i] != 0x4c) || code[i + 1] != 0x8b ||
		    (code[i + 2] & 0xc7) != 0x05)
			continue;
		memcpy(&disp, code + i + 3, 4);
		got[n++] = entry + i + 7 + (uint64_t)(int64_t)disp;
		i += 6;
	}
	if (n < 2)
		return -ENOENT;
	go->allglen = got[0];
	go->allgptr = got[1];
	go->found_by = "runtime.forEachGRace";
	return 0;
}

/* The runtime addresses of the first `max` RIP-relative loads (MOV reg,
 * [rip+disp32]) of function fname, each of 8 bytes (REX.W 8B) or, with
 * wide 0, of 4 (8B without REX.W). Returns how many were found. */
static int rip_loads(struct pt_go *go, const char *fname, int wide, uint64_t *out, int max)
{
	uint64_t entry, end;
	uint8_t code[2048];
	size_t len;
	int n = 0;

	if (pt_space_go_func(go->as, go->mod_lo, fname, &entry, &end))
		return 0;
	len = end - entry < sizeof(code) ? (size_t)(end - entry) : sizeof(code);
	if (len < 7 || rd(go, entry, code, len))
		return 0;
	for (size_t i = 0; i + 6 <= len && n < max; i++) {
		size_t at = i;
		int32_t disp;

		if (code[at] >= 0x40 && code[at] <= 0x4f) {
			if (!!(code[at] & 0x08) != wide)
				continue;
			at++;
		} else if (wide) {
			continue;
		}
		if (at + 6 > len || code[at] != 0x8b || (code[at + 1] & 0xc7) != 0x05)
			continue;
		memcpy(&disp, code + at + 2, 4);
		out[n++] = entry + at + 6 + (uint64_t)(int64_t)disp;
		i = at + 5;
	}
	return n;
}

int pt_go_heap_syms(struct pt_go *go, struct pt_gomem_syms *out, const char **why)
{
	uint64_t addrs[PT_GOMEM_NSYMS] = { 0 }, sizes[PT_GOMEM_NSYMS];
	int minor = 0;

	memset(out, 0, sizeof(*out));
	if (!go->version[0]) {
		*why = "a Go program whose release cannot be read (no build info)";
		return -ENOENT;
	}
	/* The record's layout changed once, in 1.27; a release without a row
	 * of its own is read by its symbols alone. */
	if (go->L)
		out->counts_only = go->L->memcycle_alloc_bytes < 0;
	else
		out->counts_only = !layout_of(go->version, &minor) && minor >= 27;
	if (pt_space_lookup(go->as, go->mod_lo, pt_gomem_symbol_names, addrs, sizes, PT_GOMEM_NSYMS) > 0 &&
	    addrs[0]) {
		out->mbuckets = addrs[0];
		out->mprofcycle = addrs[1];
		out->mprof = addrs[2];
		out->memprofilerate = addrs[3];
		out->disable = addrs[4];
		return 0;
	}
	/* Stripped: from the code that reads them, where the release is one
	 * podprof knows. */
	if (!go->L || rip_loads(go, "runtime.mProf_FlushLocked", 1, &out->mbuckets, 1) != 1 ||
	    rip_loads(go, "runtime.mProf_Free", 0, &out->mprofcycle, 1) != 1) {
		*why = "a stripped Go program whose memory-profile records were not found (runtime.mbuckets)";
		return -ENOENT;
	}
	out->rate_assumed = 1;
	return 0;
}

/* 1 if allglen and allgptr hold a list of g's whose first one knows
 * itself (g.sched.g == g). */
static int globals_ok(struct pt_go *go)
{
	uint64_t len, arr, g, self;

	if (rd(go, go->allglen, &len, 8) || rd(go, go->allgptr, &arr, 8) ||
	    len == 0 || len > PT_GO_MAX_GOROUTINES || !arr || (arr & 7) || rd(go, arr, &g, 8) || !g ||
	    (g & 7) || rd(go, g + (uint64_t)go->L->g_sched + GOBUF_G, &self, 8))
		return 0;
	return self == g;
}

int pt_go_detect(struct pt_go *go, char *note, size_t len)
{
	const char *const syms[2] = { "runtime.allglen", "runtime.allgptr" };
	uint64_t addrs[2], sizes[2];
	int minor;

	note[0] = '\0';
	if (go->state == 1)
		return 1;
	if (pt_space_go_module(go->as, &go->mod_lo, &go->mod_hi))
		return 0;   /* no Go code: not a Go program */
	if (read_version(go)) {
		snprintf(note, len, "go: a Go program whose release cannot be read (no build info): its "
			 "goroutines are not listed, its threads are");
		return 0;
	}
	if (!(go->L = layout_of(go->version, &minor))) {
		snprintf(note, len, "go: %s: podprof has no layout for Go 1.%d (it knows %s): its "
			 "goroutines are not listed, its threads are", go->version, minor,
			 "1.19, 1.26, 1.27");
		return 0;
	}
	if (pt_space_lookup(go->as, go->mod_lo, syms, addrs, sizes, 2) == 2) {
		go->allglen = addrs[0];
		go->allgptr = addrs[1];
		go->found_by = "symbols";
	}
	if ((!go->found_by || !globals_ok(go)) && (globals_from_code(go) || !globals_ok(go))) {
		snprintf(note, len, "go: %s: its list of goroutines was not found (runtime.allgs): its "
			 "goroutines are not listed, its threads are", go->version);
		go->found_by = NULL;
		return 0;
	}
	go->state = 1;
	snprintf(note, len, "go: %s, goroutines found by %s", go->version, go->found_by);
	return 1;
}

/* Go's isSystemGoroutine, by the name of the goroutine's function: the
 * runtime's own, but for runtime.main and those that run user code (a
 * finalizer or cleanup goroutine counts as the user's only while it runs
 * one: here, while it is not parked). */
static int is_system(struct pt_go *go, uint64_t startpc, uint32_t status)
{
	struct pt_goline gl[PT_GOTAB_MAX_INLINE + 1];
	const char *name;
	int n, sys;

	for (unsigned int i = 0; i < go->nsys && i < 64; i++)
		if (go->sys[i].pc == startpc)
			return go->sys[i].system;
	n = pt_space_go_lines(go->as, startpc, gl, PT_GOTAB_MAX_INLINE + 1);
	name = n > 0 ? gl[n - 1].name : NULL;
	if (!name || strncmp(name, "runtime.", 8))
		sys = 0;
	else if (!strcmp(name, "runtime.main") || !strcmp(name, "runtime.handleAsyncEvent") ||
		 !strcmp(name, "runtime.corostart"))
		sys = 0;
	else if (!strcmp(name, "runtime.runfinq") || !strcmp(name, "runtime.runFinalizers") ||
		 !strcmp(name, "runtime.runCleanups"))
		return status == (uint32_t)go->L->gstatus_waiting;   /* not cached: it depends */
	else
		sys = 1;
	go->sys[go->nsys++ % 64] = (typeof(go->sys[0])){ startpc, sys };
	return sys;
}

/* What Go prints for a goroutine's state: its wait reason when it waits
 * for one, else its status's name. */
static const char *state_of(const struct go_rt_layout *L, uint32_t status, uint64_t reason)
{
	if ((status == (uint32_t)L->gstatus_waiting || (int)status == L->gstatus_leaked) && reason &&
	    reason < (uint64_t)L->n_wait_reasons && L->wait_reasons[reason][0])
		return L->wait_reasons[reason];
	if (status < (uint32_t)L->n_gstatus && L->gstatus[status][0])
		return L->gstatus[status];
	return "???";
}

/* Fills gr from the g record rec (L's layout) of the g at addr. Returns 0,
 * or 1 to leave it out (dead), -EAGAIN (torn: not itself). */
static int parse_g(struct pt_go *go, uint64_t addr, const uint8_t *rec, uint64_t now,
		   struct pt_go_g *gr)
{
	const struct go_rt_layout *L = go->L;
	uint64_t raw = field(rec, L->g_atomicstatus, L->g_atomicstatus_size), reason, since, m;
	uint64_t sched = (uint64_t)L->g_sched, syscallsp;
	uint32_t status = (uint32_t)(raw & ~(uint64_t)L->gscan);

	if (status == (uint32_t)L->gstatus_dead || (int)status == L->gstatus_deadextra || status == 0)
		return 1;
	if (field(rec, (int)sched + GOBUF_G, 8) != addr)
		return -EAGAIN;
	memset(gr, 0, sizeof(*gr));
	gr->g = addr;
	gr->status = status;
	gr->scan = (raw & (uint64_t)L->gscan) != 0;
	gr->waiting = status == (uint32_t)L->gstatus_waiting;
	gr->goid = field(rec, L->g_goid, L->g_goid_size);
	gr->stack_lo = field(rec, L->g_stack_lo, 8);
	gr->stack_hi = field(rec, L->g_stack_hi, 8);
	gr->parent_goid = field(rec, L->g_parent_goid, 8);
	reason = field(rec, L->g_waitreason, L->g_waitreason_size);
	gr->state = state_of(L, status, reason);
	since = field(rec, L->g_waitsince, 8);
	if ((status == (uint32_t)L->gstatus_waiting || status == (uint32_t)L->gstatus_syscall) && since &&
	    since < now)
		gr->wait_ns = now - since;
	gr->seq = (uint8_t)field(rec, L->g_tracking_seq, 1);
	gr->locked = field(rec, L->g_lockedm, 8) != 0;
	gr->gopc = field(rec, L->g_gopc, 8);
	gr->startpc = field(rec, L->g_startpc, 8);
	gr->labels = field(rec, L->g_labels, 8);
	syscallsp = field(rec, L->g_syscallsp, 8);
	m = field(rec, L->g_m, 8);
	if (status == (uint32_t)L->gstatus_running && m) {
		uint64_t tid = 0;

		if (!rd(go, m + (uint64_t)L->m_procid, &tid, 8) && tid && tid < (1u << 30))
			gr->nstid = (pid_t)tid;
	} else if (syscallsp) {
		gr->sp = syscallsp;
		gr->pc = field(rec, L->g_syscallpc, 8);
		gr->bp = field(rec, L->g_syscallbp, 8);
		gr->pc_is_ret = 1;
	} else {
		gr->sp = field(rec, (int)sched + L->gobuf_sp, 8);
		gr->pc = field(rec, (int)sched + L->gobuf_pc, 8);
		gr->bp = field(rec, (int)sched + L->gobuf_bp, 8);
		/* A goroutine that never ran starts at its function's entry. */
		gr->pc_is_ret = gr->pc != gr->startpc;
	}
	gr->system = is_system(go, gr->startpc, status);
	return 0;
}

size_t pt_go_count(struct pt_go *go)
{
	uint64_t len;

	if (go->state != 1 || rd(go, go->allglen, &len, 8))
		return 0;
	return len < PT_GO_MAX_GOROUTINES ? (size_t)len : PT_GO_MAX_GOROUTINES;
}

int pt_go_reread(struct pt_go *go, struct pt_go_g *gr)
{
	size_t gsz = (size_t)go->L->g_size;
	uint8_t *rec = base_malloc(gsz);
	int rc;

	if (!rec)
		return -ENOMEM;
	rc = rd(go, gr->g, rec, gsz);
	if (!rc) {
		struct pt_go_g now;

		rc = parse_g(go, gr->g, rec, pt__now_ns(), &now);
		if (rc == 1)
			rc = -ENOENT;
		else if (!rc)
			*gr = now;
	}
	base_free(rec);
	return rc;
}

int pt_go_goroutines(struct pt_go *go, struct pt_go_g *out, size_t max, size_t *torn,
		     void (*between)(void *arg), void *arg)
{
	const size_t gsz = (size_t)go->L->g_size;
	uint64_t len, arr, now = pt__now_ns(), *ptrs = NULL;
	uint8_t *recs = NULL;
	size_t n = 0;
	int err = 0;

	*torn = 0;
	if (go->state != 1)
		return -ENOENT;
	/* As Go's atomicAllG: the length first, then the array, which then
	 * holds at least that many. */
	if (rd(go, go->allglen, &len, 8) || rd(go, go->allgptr, &arr, 8))
		return -EFAULT;
	if (len > PT_GO_MAX_GOROUTINES || (len && (!arr || (arr & 7))))
		return -EFAULT;
	if (!len)
		return 0;
	if (!(ptrs = base_malloc(len * 8)) || !(recs = base_malloc(READ_BATCH * gsz))) {
		err = -ENOMEM;
		goto out;
	}
	if (rd(go, arr, ptrs, len * 8)) {
		err = -EFAULT;
		goto out;
	}
	for (size_t j = 0; j < len && n < max;) {
		struct pt_mem_region r[READ_BATCH];
		size_t k = 0;

		if (j && between)
			between(arg);
		/* the next READ_BATCH pointers that can be g's (each taken once) */
		for (; j < len && k < READ_BATCH; j++)
			if (ptrs[j] && !(ptrs[j] & 7)) {
				r[k] = (struct pt_mem_region){ ptrs[j], recs + k * gsz, gsz, 0 };
				k++;
			}
		if (pt_space_read_regions(go->as, r, k) == -ESRCH) {
			err = -ESRCH;
			goto out;
		}
		for (size_t q = 0; q < k && n < max; q++) {
			int rc;

			if (r[q].err) {
				(*torn)++;
				continue;
			}
			rc = parse_g(go, r[q].addr, r[q].buf, now, &out[n]);
			if (rc < 0)
				(*torn)++;
			else if (rc == 0)
				n++;
		}
	}
out:
	base_free(ptrs);
	base_free(recs);
	return err ? err : (int)n;
}

/* The part of a g that tells whether it moved (status, id, saved and
 * system call SP and PC): from byte *lo, *len bytes, a quarter of the
 * whole record a dump would read twice otherwise. */
static void recheck_span(const struct go_rt_layout *L, int *lo, size_t *len)
{
	const int off[] = { L->g_atomicstatus, L->g_goid, L->g_syscallsp, L->g_syscallpc,
			    L->g_sched + L->gobuf_sp, L->g_sched + L->gobuf_pc };
	int a = L->g_size, b = 0;

	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
		a = off[i] < a ? off[i] : a;
		b = off[i] + 8 > b ? off[i] + 8 : b;
	}
	*lo = a;
	*len = (size_t)(b - a);
}

/* 1 if rec (the span of gr's g from byte lo, read anew) is still gr in the
 * same place. */
static int same_g(const struct go_rt_layout *L, const uint8_t *rec, int lo, const struct pt_go_g *gr)
{
	uint64_t raw = field(rec, L->g_atomicstatus - lo, L->g_atomicstatus_size) & ~(uint64_t)L->gscan;

	if ((uint32_t)raw != gr->status || field(rec, L->g_goid - lo, L->g_goid_size) != gr->goid)
		return 0;
	if (gr->nstid)
		return 1;   /* running: its thread's stack was taken, not its saved one */
	if (field(rec, L->g_syscallsp - lo, 8))
		return field(rec, L->g_syscallsp - lo, 8) == gr->sp && field(rec, L->g_syscallpc - lo, 8) == gr->pc;
	return field(rec, L->g_sched + L->gobuf_sp - lo, 8) == gr->sp &&
	       field(rec, L->g_sched + L->gobuf_pc - lo, 8) == gr->pc;
}

int pt_go_recheck(struct pt_go *go, const struct pt_go_g *gr)
{
	uint8_t rec[512];
	size_t len;
	int lo;

	recheck_span(go->L, &lo, &len);
	if (len > sizeof(rec) || rd(go, gr->g + (uint64_t)lo, rec, len))
		return 0;
	return same_g(go->L, rec, lo, gr);
}

int pt_go_recheck_many(struct pt_go *go, const struct pt_go_g *const *gs, size_t n, uint8_t *ok)
{
	uint8_t *recs;
	size_t len;
	int lo;

	recheck_span(go->L, &lo, &len);
	if (!(recs = base_malloc(READ_BATCH * len)))
		return -ENOMEM;
	for (size_t i = 0; i < n; i += READ_BATCH) {
		struct pt_mem_region r[READ_BATCH];
		size_t k = n - i < READ_BATCH ? n - i : READ_BATCH;

		for (size_t j = 0; j < k; j++)
			r[j] = (struct pt_mem_region){ gs[i + j]->g + (uint64_t)lo, recs + j * len, len, 0 };
		if (pt_space_read_regions(go->as, r, k) == -ESRCH) {
			base_free(recs);
			return -ESRCH;
		}
		for (size_t j = 0; j < k; j++)
			ok[i + j] = !r[j].err && same_g(go->L, r[j].buf, lo, gs[i + j]);
	}
	base_free(recs);
	return 0;
}

/* ---- pprof labels ------------------------------------------------------ */

int pt_go_is_scheduler_root(struct pt_go *go, uint64_t pc)
{
	struct pt_goline gl[PT_GOTAB_MAX_INLINE + 1];
	int n;

	if (go->state != 1 || pc < go->mod_lo || pc >= go->mod_hi)
		return 0;
	if ((n = pt_space_go_lines(go->as, pc, gl, PT_GOTAB_MAX_INLINE + 1)) <= 0)
		return 0;
	return !strncmp(gl[n - 1].name, "runtime.mstart", 14) || !strcmp(gl[n - 1].name, "runtime.rt0_go") ||
	       !strcmp(gl[n - 1].name, "runtime.mcall");
}

int pt_go_is_lock_wait(struct pt_go *go, const struct pt_go_g *gr, const uint64_t *frames, int n)
{
	struct pt_goline gl[PT_GOTAB_MAX_INLINE + 1];

	if (go->state != 1 || !gr->waiting)
		return 0;
	if (!strcmp(gr->state, "sync.Mutex.Lock") || !strcmp(gr->state, "sync.RWMutex.Lock") ||
	    !strcmp(gr->state, "sync.RWMutex.RLock"))
		return 1;
	if (strcmp(gr->state, "semacquire"))
		return 0;
	/* Before 1.20 the semaphore's callers tell: runtime.semacquire1,
	 * sync.runtime_SemacquireMutex, then sync.(*Mutex).lockSlow or
	 * sync.(*RWMutex).RLock/Lock, within the first few frames. */
	for (int i = 0; i < n && i < 8; i++) {
		int k = pt_space_go_lines(go->as, frames[i], gl, PT_GOTAB_MAX_INLINE + 1);

		for (int j = 0; j < k; j++)
			if (!strncmp(gl[j].name, "sync.(*Mutex).", 14) ||
			    !strncmp(gl[j].name, "sync.(*RWMutex).", 16))
				return 1;
	}
	return 0;
}

uint64_t pt_go_current_labels(struct pt_go *go, const struct user_regs_struct *regs)
{
	const struct go_rt_layout *L = go->L;
	uint64_t cand[2] = { regs->r14, 0 }, bounds[2], m, curg, labels, goid;

	if (go->state != 1)
		return 0;
	if (regs->fs_base > 8 && rd(go, regs->fs_base - 8, &cand[1], 8))
		cand[1] = 0;
	for (int i = 0; i < 2; i++) {
		uint64_t g = cand[i];

		if (!g || (g & 7) || rd(go, g + (uint64_t)L->g_stack_lo, bounds, sizeof(bounds)) ||
		    regs->rsp < bounds[0] || regs->rsp >= bounds[1] || bounds[1] - bounds[0] > (1ull << 30))
			continue;
		/* A goroutine's own stack held the sample: its labels, whether it
		 * still runs on that m or not (by the time a kernel's sample is
		 * read, its m may run another). A system goroutine (g0, gsignal:
		 * goid 0): its m's current goroutine's, as Go's profiler. */
		goid = 0;
		if (rd(go, g + (uint64_t)L->g_goid, &goid, (size_t)L->g_goid_size))
			return 0;
		curg = g;
		if (!goid && (rd(go, g + (uint64_t)L->g_m, &m, 8) || !m ||
			      rd(go, m + (uint64_t)L->m_curg, &curg, 8) || !curg))
			return 0;
		if (rd(go, curg + (uint64_t)L->g_labels, &labels, 8))
			return 0;
		return labels;
	}
	/* No candidate's stack holds the sample: the thread is between stacks,
	 * in the kernel's signal delivery or Go's signal handler before it
	 * switches g to gsignal (the stack pointer on the signal stack, g still
	 * the goroutine interrupted). A candidate that is its m's current
	 * goroutine is the one the thread runs for: its labels, as Go's
	 * profiler (m.curg). A stale or foreign R14 does not pass that test. */
	for (int i = 0; i < 2; i++) {
		uint64_t g = cand[i];

		if (!g || (g & 7) || rd(go, g + (uint64_t)L->g_m, &m, 8) || !m || (m & 7) ||
		    rd(go, m + (uint64_t)L->m_curg, &curg, 8) || curg != g ||
		    rd(go, g + (uint64_t)L->g_labels, &labels, 8))
			continue;
		return labels;
	}
	return 0;
}

struct label_buf {
	struct pt_go_label *out;
	int n, max;
	char *buf;
	size_t used, len;
};

/* Copies the string (ptr, n) of the target into b; NULL if it cannot. */
static const char *copy_str(struct pt_go *go, struct label_buf *b, uint64_t ptr, uint64_t n)
{
	char *s;

	if (n > PT_GO_MAX_LABEL_BYTES || b->len - b->used < n + 1 || (n && !ptr))
		return NULL;
	s = b->buf + b->used;
	if (n && rd(go, ptr, s, (size_t)n))
		return NULL;
	s[n] = '\0';
	b->used += (size_t)n + 1;
	return s;
}

/* Adds the pair whose two string headers (ptr, len each) are at w. */
static int add_pair(struct pt_go *go, struct label_buf *b, const uint64_t *w)
{
	const char *k, *v;

	if (b->n >= b->max)
		return -E2BIG;
	if (!(k = copy_str(go, b, w[0], w[1])) || !(v = copy_str(go, b, w[2], w[3])))
		return -E2BIG;
	b->out[b->n++] = (struct pt_go_label){ k, v };
	return 0;
}

/* Go 1.24 on: the set is a slice of {key, value string}, sorted by key. */
static int labels_list(struct pt_go *go, uint64_t set, struct label_buf *b)
{
	uint64_t hdr[3], pairs[4 * PT_GO_MAX_LABELS];
	int err;

	if (rd(go, set + (uint64_t)go->L->labels_list, hdr, sizeof(hdr)))
		return -EFAULT;
	if (hdr[1] > hdr[2] || hdr[1] > (uint64_t)b->max || hdr[1] > PT_GO_MAX_LABELS ||
	    go->L->label_size != 32)
		return hdr[1] > hdr[2] ? -EBADMSG : -E2BIG;
	if (hdr[1] && rd(go, hdr[0], pairs, (size_t)hdr[1] * 32))
		return -EFAULT;
	for (uint64_t i = 0; i < hdr[1]; i++)
		if ((err = add_pair(go, b, pairs + 4 * i)))
			return err;
	return 0;
}

/* Go 1.19 to 1.23: the set points to a map[string]string (runtime/map.go:
 * the hmap's count at 0, flags at 8, B at 9, buckets at 16, oldbuckets at
 * 24; a bucket of 8 cells: tophash[8], 8 keys, 8 values (string headers),
 * the overflow pointer; a cell is live when its tophash is 5 or more). A
 * map left half-grown keeps cells in its old buckets not yet moved. */
#define HMAP_BUCKET 272
static int labels_map(struct pt_go *go, uint64_t set, struct label_buf *b)
{
	uint64_t h, hdr[5];
	uint8_t bk[HMAP_BUCKET];
	int visited = 0, err;

	if (rd(go, set, &h, 8))
		return -EFAULT;
	if (!h)
		return 0;
	if (rd(go, h, hdr, sizeof(hdr)))
		return -EFAULT;
	{
		uint64_t count = hdr[0];
		unsigned int B = (unsigned int)((hdr[1] >> 8) & 0xff), flags = (unsigned int)(hdr[1] & 0xff);
		uint64_t buckets = hdr[2], old = hdr[3];

		if (count > PT_GO_MAX_LABELS || count > (uint64_t)b->max || B > 8)
			return -E2BIG;
		for (int pass = 0; pass < 2; pass++) {
			uint64_t base = pass ? old : buckets;
			uint64_t nb = pass ? ((flags & 8) ? 1ull << B : (B ? 1ull << (B - 1) : 1)) : 1ull << B;

			for (uint64_t i = 0; base && i < nb; i++) {
				uint64_t at = base + i * HMAP_BUCKET;

				for (int chain = 0; at && chain < 16; chain++) {
					if (++visited > 1024 || rd(go, at, bk, sizeof(bk)))
						return -EFAULT;
					/* An old bucket already moved (its first tophash
					 * 2, 3 or 4): its cells are in the new ones. */
					if (pass && chain == 0 && bk[0] >= 2 && bk[0] <= 4)
						break;
					for (int c = 0; c < 8; c++) {
						uint64_t w[4];

						if (bk[c] < 5)
							continue;
						memcpy(w, bk + 8 + 16 * c, 16);
						memcpy(w + 2, bk + 136 + 16 * c, 16);
						if ((err = add_pair(go, b, w)))
							return err;
					}
					memcpy(&at, bk + 264, 8);
				}
			}
		}
	}
	return 0;
}

static int by_key(const void *a, const void *b)
{
	return strcmp(((const struct pt_go_label *)a)->key, ((const struct pt_go_label *)b)->key);
}

int pt_go_labels(struct pt_go *go, uint64_t labels, struct pt_go_label *out, int max, char *buf,
		 size_t len)
{
	struct label_buf b = { out, 0, max, buf, 0, len };
	int err;

	if (go->state != 1 || !labels)
		return 0;
	err = go->L->labels_list >= 0 ? labels_list(go, labels, &b) : labels_map(go, labels, &b);
	if (err)
		return err;
	qsort(out, (size_t)b.n, sizeof(*out), by_key);
	return b.n;
}
