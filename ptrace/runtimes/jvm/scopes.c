/* Inlined frames (see scopes.h). Where an nmethod keeps them: up to JDK
 * 22 its PcDescs and its metadata (the Method*s its scopes name) at
 * offsets from the nmethod, its scopes data at a pointer; from 23 its
 * PcDescs and scopes in its immutable data, its metadata in its mutable
 * data after the relocations. A PcDesc is (pc offset from the code's
 * start, decode offset of its scope); a scope is three UNSIGNED5 numbers:
 * its sender's decode offset (0: none, the outermost), the index of its
 * method in the metadata (from 1), its bci + 1. Facts from HotSpot's
 * nmethod.hpp, pcDesc.hpp, scopeDesc.cpp and debugInfo.hpp of 17, 21 and
 * 25. Sampler thread only. */
#include "ptrace/runtimes/jvm/scopes.h"

#include <errno.h>
#include <string.h>

#include "base/array.h"
#include "base/map.h"
#include "base/mem.h"
#include "ptrace/runtimes/jvm/codecache.h"
#include "ptrace/runtimes/jvm/methods.h"
#include "ptrace/runtimes/jvm/state.h"

#define MAX_PCS_BYTES (256u << 10)   /* an nmethod's PcDescs */
#define MAX_DEPTH 32                 /* inlined methods at one pc */
#define MAX_METADATA (1u << 16)
#define MAX_CHAINS 65536u            /* pcs cached; past them the cache starts afresh */

struct pt__jvm_chain {
	uint64_t blob, pc;
	int64_t cid;
	uint32_t first, n;       /* chain_ids[first .. first + n) */
};

void pt__jvm_scopes_reset(struct pt_jvm *j)
{
	base_free(j->chains);
	base_free(j->chain_ids);
	base_free(j->scratch);
	base_map_free(&j->chain_index);
	j->chains = NULL;
	j->chain_ids = NULL;
	j->scratch = NULL;
	j->nchains = j->chains_cap = j->nchain_ids = j->chain_ids_cap = j->scratch_cap = 0;
}

/* Where b keeps its PcDescs [*pcs, *pcs_end), scopes and metadata (*md_n
 * entries at most). Returns 0 or -ENOENT. */
static int tables(const struct pt_jvm *j, const struct pt__jvm_blob *b, uint64_t *pcs, uint64_t *pcs_end,
		  uint64_t *scopes, uint64_t *md, uint64_t *md_n)
{
	int64_t p = pt__jvm_get(j, JF_NM_PCS, b->raw, b->len, 1);

	if (!j->f[JF_NM_PCS].found || !j->f[JF_PD_PC].found || !j->f[JF_PD_SCOPE].found ||
	    j->tsize[JT_PCDESC] < 8 || j->tsize[JT_PCDESC] > 64 || p < 0)
		return -ENOENT;
	if (j->f[JF_NM_IMMUTABLE].found && j->f[JF_NM_SCOPES].found && j->f[JF_CB_MUTABLE].found &&
	    j->f[JF_CB_RELOC_SIZE].found) {
		uint64_t imm = (uint64_t)pt__jvm_get(j, JF_NM_IMMUTABLE, b->raw, b->len, 0);
		int64_t s = pt__jvm_get(j, JF_NM_SCOPES, b->raw, b->len, 1);
		int64_t r = pt__jvm_get(j, JF_CB_RELOC_SIZE, b->raw, b->len, 1);

		if (!imm || s < p || r < 0)
			return -ENOENT;
		*pcs = imm + (uint64_t)p;
		*pcs_end = *scopes = imm + (uint64_t)s;
		*md = (uint64_t)pt__jvm_get(j, JF_CB_MUTABLE, b->raw, b->len, 0) + (uint64_t)r;
		*md_n = MAX_METADATA;
		return 0;
	}
	if (j->f[JF_NM_DEPS].found && j->f[JF_NM_METADATA].found && j->f[JF_NM_SCOPES_BEGIN].found) {
		int64_t d = pt__jvm_get(j, JF_NM_DEPS, b->raw, b->len, 1);
		int64_t m = pt__jvm_get(j, JF_NM_METADATA, b->raw, b->len, 1);

		if (d < p || m < 0)
			return -ENOENT;
		*pcs = b->addr + (uint64_t)p;
		*pcs_end = b->addr + (uint64_t)d;
		*scopes = (uint64_t)pt__jvm_get(j, JF_NM_SCOPES_BEGIN, b->raw, b->len, 0);
		/* the metadata comes right before the scopes data */
		*md = b->addr + (uint64_t)m;
		*md_n = *scopes > *md ? (*scopes - *md) / 8 : 0;
		return 0;
	}
	return -ENOENT;
}

/* The decode offset of the scope at pc: its PcDesc's (the first at or
 * after pc, in pc order), 0 if none. */
static int64_t scope_at(struct pt_jvm *j, const struct pt__jvm_blob *b, uint64_t pc, uint64_t pcs,
			uint64_t pcs_end)
{
	uint64_t sz = j->tsize[JT_PCDESC], n = (pcs_end - pcs) / sz, lo = 0, hi;
	int64_t rel = (int64_t)(pc - b->code_begin);
	const uint8_t *e;

	if (pcs_end <= pcs || pcs_end - pcs > MAX_PCS_BYTES || !n)
		return 0;
	if (BASE_ARRAY_GROW(j->scratch, j->scratch_cap, (size_t)(n * sz)) ||
	    pt__jvm_read(j, pcs, j->scratch, (size_t)(n * sz)))
		return 0;
	/* Sorted by pc offset: the first one not below rel. */
	hi = n;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		e = j->scratch + mid * sz;
		if (pt__jvm_int(e, sz, j->f[JF_PD_PC].v, 4, 1) < rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= n)
		return 0;
	e = j->scratch + lo * sz;
	return pt__jvm_int(e, sz, j->f[JF_PD_SCOPE].v, 4, 1);
}

/* The frames of the scope chain from decode offset off. */
static int decode(struct pt_jvm *j, uint64_t scopes, int64_t off, uint64_t md, uint64_t md_n, uint64_t *ids,
		  int max)
{
	int n = 0;

	for (int depth = 0; off > 0 && depth < MAX_DEPTH && n < max; depth++) {
		uint8_t buf[15];
		size_t i = 0;
		uint32_t sender, midx, bci1;
		uint64_t method;
		long m, id;

		if (pt__jvm_read(j, scopes + (uint64_t)off, buf, sizeof(buf)) ||
		    pt_jvm_u5(buf, sizeof(buf), &i, j->ux, &sender) || pt_jvm_u5(buf, sizeof(buf), &i, j->ux, &midx) ||
		    pt_jvm_u5(buf, sizeof(buf), &i, j->ux, &bci1) || !midx || midx > md_n ||
		    pt__jvm_word(j, md + 8 * ((uint64_t)midx - 1), &method) || (m = pt__jvm_method(j, method)) < 0 ||
		    (id = pt__jvm_frame(j, m, (int)bci1 - 1)) < 0)
			return n;
		ids[n++] = (uint64_t)id;
		/* a sender lies before its callee's scope */
		if (sender >= off)
			break;
		off = sender;
	}
	return n;
}

struct chain_key {
	const struct pt_jvm *j;
	uint64_t blob, pc;
	int64_t cid;
};

static int chain_eq(const void *arg, uint64_t i)
{
	const struct chain_key *k = arg;
	const struct pt__jvm_chain *c = &k->j->chains[i];

	return c->blob == k->blob && c->pc == k->pc && c->cid == k->cid;
}

/* Keeps ids[0..n) as the chain of key k (if there is room). */
static void keep(struct pt_jvm *j, const struct chain_key *k, uint64_t h, const uint64_t *ids, int n)
{
	struct pt__jvm_chain *c;

	if (j->nchains >= MAX_CHAINS) {
		j->nchains = j->nchain_ids = 0;
		base_map_free(&j->chain_index);
	}
	if (BASE_ARRAY_GROW(j->chain_ids, j->chain_ids_cap, j->nchain_ids + (size_t)n) ||
	    !(c = BASE_ARRAY_PUSH(j->chains, j->nchains, j->chains_cap)))
		return;
	*c = (struct pt__jvm_chain){ k->blob, k->pc, k->cid, (uint32_t)j->nchain_ids, (uint32_t)n };
	for (int i = 0; i < n; i++)
		j->chain_ids[j->nchain_ids++] = (uint32_t)ids[i];
	if (base_map_add(&j->chain_index, h, j->nchains - 1)) {
		j->nchains--;
		j->nchain_ids -= (size_t)n;
	}
}

int pt__jvm_scopes(struct pt_jvm *j, const struct pt__jvm_blob *b, uint64_t pc, uint64_t *ids, int max)
{
	struct chain_key k = { j, b->addr, pc, b->compile_id };
	uint64_t h = base_hash_word(base_hash_word(base_hash_word(BASE_HASH_SEED, b->addr), pc),
				    (uint64_t)b->compile_id);
	uint64_t *at = base_map_find(&j->chain_index, h, chain_eq, &k), pcs, pcs_end, scopes, md, md_n;
	int n = 0;

	if (max <= 0)
		return 0;
	if (at) {
		const struct pt__jvm_chain *c = &j->chains[*at];

		for (uint32_t i = 0; i < c->n && n < max; i++)
			ids[n++] = j->chain_ids[c->first + i];
		return n;
	}
	if (!tables(j, b, &pcs, &pcs_end, &scopes, &md, &md_n))
		n = decode(j, scopes, scope_at(j, b, pc, pcs, pcs_end), md, md_n, ids, max < MAX_DEPTH ? max : MAX_DEPTH);
	if (!n) {
		/* no scope: the method compiled */
		long m = pt__jvm_method(j, b->method), id = m >= 0 ? pt__jvm_frame(j, m, -1) : -1;

		if (id < 0)
			return 0;
		ids[n++] = (uint64_t)id;
	}
	keep(j, &k, h, ids, n);
	return n;
}
