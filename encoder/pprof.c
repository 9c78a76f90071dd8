/* The pprof profile builder (see pprof.h): the profile's tables as flat
 * arrays in insertion order (ids are places in them), strings and
 * functions deduplicated through hash maps whose values index those
 * arrays, and the encoding that points protobuf-c's messages into them.
 * protobuf-c only packs into a buffer of ours here: it allocates nothing.
 * One builder is used by one thread at a time. */
#include "encoder/pprof.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/map.h"
#include "base/mem.h"
#include "encoder/gz.h"
#include "profile.pb-c.h"

/* A growable array of T: v[0..n), room for cap (base/array.h). */
#define VEC(T) struct { T *v; size_t n, cap; }
/* A new element at the end of a, or NULL (a unchanged). Each caller fills
 * it in whole: one given back by a failed call (n lowered) is not zeroed. */
#define VEC_PUSH(a) BASE_ARRAY_PUSH((a).v, (a).n, (a).cap)

/* One Line of a location: its function and line number (0: unknown). */
struct line_ref {
	uint64_t fn;
	int64_t line;
};

struct sample {
	size_t first_id, n_ids, first_val, first_label, n_labels;
};

struct loc_lines {
	size_t first, n;
};

struct enc_pprof {
	int64_t default_type;  /* string id, 0: none */
	VEC(char *) strs;      /* the string table: copies, index = string id */
	struct base_map str_index;    /* hash of a string -> its index in strs */
	struct base_map func_index;   /* hash of (name, file, start line) -> index in funcs */
	VEC(Perftools__Profiles__ValueType) types;
	VEC(Perftools__Profiles__Mapping) maps;
	VEC(Perftools__Profiles__Location) locs;   /* line set at encode */
	VEC(struct loc_lines) loc_lines;           /* each location's run of line_fn */
	VEC(struct line_ref) line_fn;              /* every location's Lines */
	VEC(Perftools__Profiles__Function) funcs;
	VEC(struct sample) samples;
	VEC(uint64_t) ids;                         /* all samples' location ids */
	VEC(int64_t) vals;                         /* all samples' values */
	VEC(int64_t) comments;
	VEC(Perftools__Profiles__Label) labels;    /* all samples' labels */
	Perftools__Profiles__ValueType period_type;
	int64_t period, time_ns, duration_ns;
};

int enc_pprof_new(struct enc_pprof **out)
{
	struct enc_pprof *p = base_calloc(1, sizeof(*p));
	char **s0;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	perftools__profiles__value_type__init(&p->period_type);
	/* string_table[0] must be "". */
	s0 = VEC_PUSH(p->strs);
	if (!s0 || !(*s0 = base_strdup(""))) {
		enc_pprof_free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void enc_pprof_free(struct enc_pprof *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->strs.n; i++)
		base_free(p->strs.v[i]);
	base_free(p->strs.v);
	base_map_free(&p->str_index);
	base_map_free(&p->func_index);
	base_free(p->types.v);
	base_free(p->maps.v);
	base_free(p->locs.v);
	base_free(p->loc_lines.v);
	base_free(p->line_fn.v);
	base_free(p->funcs.v);
	base_free(p->samples.v);
	base_free(p->ids.v);
	base_free(p->vals.v);
	base_free(p->comments.v);
	base_free(p->labels.v);
	base_free(p);
}

/* What str_index's equality callback compares with. */
struct str_key {
	const struct enc_pprof *p;
	const char *s;
};

static int str_eq(const void *arg, uint64_t idx)
{
	const struct str_key *k = arg;

	return !strcmp(k->p->strs.v[idx], k->s);
}

/* Interns s; returns its string-table index (> 0, or 0 for ""), or -ENOMEM. */
static int64_t intern(struct enc_pprof *p, const char *s)
{
	struct str_key k = { p, s };
	uint64_t h, *idx;
	char **slot;

	if (!s || !*s)
		return 0;
	h = base_hash_str(s);
	if ((idx = base_map_find(&p->str_index, h, str_eq, &k)))
		return (int64_t)*idx;
	if (!(slot = VEC_PUSH(p->strs)))
		return -ENOMEM;
	if (!(*slot = base_strdup(s)) || base_map_add(&p->str_index, h, p->strs.n - 1)) {
		base_free(*slot);
		p->strs.n--;
		return -ENOMEM;
	}
	return (int64_t)p->strs.n - 1;
}

static int value_type(struct enc_pprof *p, Perftools__Profiles__ValueType *vt, const char *type,
		      const char *unit)
{
	int64_t t = intern(p, type), u = intern(p, unit);

	if (t < 0 || u < 0)
		return -ENOMEM;
	perftools__profiles__value_type__init(vt);
	vt->type = t;
	vt->unit = u;
	return 0;
}

int enc_pprof_sample_type(struct enc_pprof *p, const char *type, const char *unit)
{
	Perftools__Profiles__ValueType vt, *slot;
	int err;

	/* Interned first: a failure leaves no half-made type behind, which
	 * protobuf-c would trip over (it has no descriptor) at encode. */
	if ((err = value_type(p, &vt, type, unit)))
		return err;
	if (!(slot = VEC_PUSH(p->types)))
		return -ENOMEM;
	*slot = vt;
	return 0;
}

int enc_pprof_period(struct enc_pprof *p, const char *type, const char *unit, int64_t period)
{
	p->period = period;
	return value_type(p, &p->period_type, type, unit);
}

int enc_pprof_default_type(struct enc_pprof *p, const char *type)
{
	int64_t id = intern(p, type);

	if (id < 0)
		return (int)id;
	p->default_type = id;
	return 0;
}

void enc_pprof_time(struct enc_pprof *p, int64_t time_ns, int64_t duration_ns)
{
	p->time_ns = time_ns;
	p->duration_ns = duration_ns;
}

int enc_pprof_comment(struct enc_pprof *p, const char *text)
{
	int64_t s = intern(p, text), *c;

	if (s < 0 || !(c = VEC_PUSH(p->comments)))
		return -ENOMEM;
	*c = s;
	return 0;
}

int64_t enc_pprof_mapping(struct enc_pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
			  const char *file, const char *build_id, int has_functions)
{
	int64_t f = intern(p, file), b = intern(p, build_id);
	Perftools__Profiles__Mapping *m;

	if (f < 0 || b < 0 || !(m = VEC_PUSH(p->maps)))
		return -ENOMEM;
	perftools__profiles__mapping__init(m);
	m->id = p->maps.n;
	m->memory_start = start;
	m->memory_limit = limit;
	m->file_offset = offset;
	m->filename = f;
	m->build_id = b;
	m->has_functions = !!has_functions;
	return (int64_t)m->id;
}

/* What func_index's equality callback compares with: string ids. */
struct func_key {
	const struct enc_pprof *p;
	int64_t name, sys, file, start;
};

static uint64_t func_hash(const struct func_key *k)
{
	uint64_t h = base_hash_word(BASE_HASH_SEED, (uint64_t)k->name);

	h = base_hash_word(h, (uint64_t)k->sys);
	h = base_hash_word(h, (uint64_t)k->file);
	return base_hash_word(h, (uint64_t)k->start);
}

static int func_eq(const void *arg, uint64_t idx)
{
	const struct func_key *k = arg;
	const Perftools__Profiles__Function *fn = &k->p->funcs.v[idx];

	return fn->name == k->name && fn->system_name == k->sys && fn->filename == k->file &&
	       fn->start_line == k->start;
}

/* The function of name, system name sys (string ids), file and first
 * line, found again or added. */
static int64_t function_of(struct enc_pprof *p, int64_t s, int64_t sys, int64_t f, int64_t start_line)
{
	struct func_key k = { p, s, sys, f, start_line };
	Perftools__Profiles__Function *fn;
	uint64_t h, *idx;

	h = func_hash(&k);
	/* A function without a name (string 0) is never merged with another:
	 * each nameless one stays apart. */
	if (s && (idx = base_map_find(&p->func_index, h, func_eq, &k)))
		return (int64_t)p->funcs.v[*idx].id;
	if (!(fn = VEC_PUSH(p->funcs)))
		return -ENOMEM;
	if (s && base_map_add(&p->func_index, h, p->funcs.n - 1)) {
		p->funcs.n--;
		return -ENOMEM;
	}
	perftools__profiles__function__init(fn);
	fn->id = p->funcs.n;
	fn->name = s;
	fn->system_name = sys;
	fn->filename = f;
	fn->start_line = start_line;
	return (int64_t)fn->id;
}

int64_t enc_pprof_function_src(struct enc_pprof *p, const char *name, const char *file,
			       int64_t start_line, int compiled)
{
	int64_t s = intern(p, name), f = file ? intern(p, file) : 0;

	if (s < 0 || f < 0)
		return -ENOMEM;
	/* Interpreted code has no system name: pprof demangles a function
	 * whose name equals its system name, and the C++ rule that drops
	 * template arguments would blank out Python's "<module>" (go tool
	 * pprof showed "<unknown>"). */
	return function_of(p, s, f && !compiled ? 0 : s, f, start_line);
}

int64_t enc_pprof_function_sys(struct enc_pprof *p, const char *name, const char *system,
			       const char *file, int64_t start_line)
{
	int64_t s = intern(p, name), sys = intern(p, system), f = file ? intern(p, file) : 0;

	if (s < 0 || sys < 0 || f < 0)
		return -ENOMEM;
	return function_of(p, s, sys, f, start_line);
}

int64_t enc_pprof_function(struct enc_pprof *p, const char *name)
{
	return enc_pprof_function_src(p, name, NULL, 0, 1);
}

int64_t enc_pprof_location(struct enc_pprof *p, uint64_t mapping_id, uint64_t address,
			   uint64_t function_id)
{
	return enc_pprof_location_lines(p, mapping_id, address, &function_id, function_id ? 1 : 0);
}

int64_t enc_pprof_location_lines(struct enc_pprof *p, uint64_t mapping_id, uint64_t address,
				 const uint64_t *function_ids, size_t n)
{
	return enc_pprof_location_src(p, mapping_id, address, function_ids, NULL, n);
}

int64_t enc_pprof_location_src(struct enc_pprof *p, uint64_t mapping_id, uint64_t address,
			       const uint64_t *function_ids, const int64_t *lines, size_t n)
{
	Perftools__Profiles__Location *l;
	struct loc_lines *ll;
	size_t first = p->line_fn.n;

	for (size_t i = 0; i < n; i++) {
		struct line_ref *r = VEC_PUSH(p->line_fn);

		if (!r) {
			p->line_fn.n = first;
			return -ENOMEM;
		}
		r->fn = function_ids[i];
		r->line = lines ? lines[i] : 0;
	}
	if (!(l = VEC_PUSH(p->locs))) {
		p->line_fn.n = first;
		return -ENOMEM;
	}
	if (!(ll = VEC_PUSH(p->loc_lines))) {
		p->locs.n--;
		p->line_fn.n = first;
		return -ENOMEM;
	}
	ll->first = first;
	ll->n = n;
	perftools__profiles__location__init(l);
	l->id = p->locs.n;
	l->mapping_id = mapping_id;
	l->address = address;
	return (int64_t)l->id;
}

int enc_pprof_sample(struct enc_pprof *p, const uint64_t *loc_ids, size_t n, const int64_t *v,
		     size_t nv)
{
	return enc_pprof_sample_labels(p, loc_ids, n, v, nv, NULL, 0);
}

int enc_pprof_sample_labels(struct enc_pprof *p, const uint64_t *loc_ids, size_t n,
			    const int64_t *v, size_t nv, const struct enc_label *labels, size_t nl)
{
	struct sample *s;

	if (nv != p->types.n)
		return -EINVAL;
	for (size_t i = 0; i < nl; i++) {
		Perftools__Profiles__Label *l;
		int64_t key = intern(p, labels[i].key);
		int64_t str = labels[i].str ? intern(p, labels[i].str) : 0;
		int64_t unit = labels[i].unit ? intern(p, labels[i].unit) : 0;

		if (key <= 0 || str < 0 || unit < 0)
			return key == 0 ? -EINVAL : -ENOMEM;   /* a label needs a key */
		if (!(l = VEC_PUSH(p->labels)))
			return -ENOMEM;
		perftools__profiles__label__init(l);
		l->key = key;
		if (labels[i].str) {
			l->str = str;
		} else {
			l->num = labels[i].num;
			l->num_unit = unit;
		}
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t *id;

		if (!loc_ids[i] || loc_ids[i] > p->locs.n)
			return -EINVAL;
		if (!(id = VEC_PUSH(p->ids)))
			return -ENOMEM;
		*id = loc_ids[i];
	}
	for (size_t i = 0; i < nv; i++) {
		int64_t *x = VEC_PUSH(p->vals);

		if (!x)
			return -ENOMEM;
		*x = v[i];
	}
	if (!(s = VEC_PUSH(p->samples)))
		return -ENOMEM;
	s->first_id = p->ids.n - n;
	s->n_ids = n;
	s->first_val = p->vals.n - nv;
	s->first_label = p->labels.n - nl;
	s->n_labels = nl;
	return 0;
}

/* protobuf-c wants arrays of pointers; build them over our flat arrays
 * (n items of size bytes at items). */
static void **ptrs(void *items, size_t n, size_t size)
{
	void **v = base_calloc(n, sizeof(*v));

	if (v)
		for (size_t i = 0; i < n; i++)
			v[i] = (char *)items + i * size;
	return v;
}

#define PTRS(a) ptrs((a).v, (a).n, sizeof(*(a).v))

/* Each location's Lines (several where code was inlined, innermost first):
 * lines and linep have a slot per function id of line_fn. */
static void link_lines(struct enc_pprof *p, Perftools__Profiles__Line *lines,
		       Perftools__Profiles__Line **linep)
{
	for (size_t i = 0; i < p->line_fn.n; i++) {
		perftools__profiles__line__init(&lines[i]);
		lines[i].function_id = p->line_fn.v[i].fn;
		lines[i].line = p->line_fn.v[i].line;
		linep[i] = &lines[i];
	}
	for (size_t i = 0; i < p->locs.n; i++) {
		Perftools__Profiles__Location *l = &p->locs.v[i];
		const struct loc_lines *ll = &p->loc_lines.v[i];

		l->n_line = ll->n;
		l->line = ll->n ? &linep[ll->first] : NULL;
	}
}

/* The samples as protobuf-c messages pointing into the builder's arrays. */
static void link_samples(struct enc_pprof *p, Perftools__Profiles__Sample *smp,
			 Perftools__Profiles__Sample **smpp, void **labp)
{
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];

		perftools__profiles__sample__init(&smp[i]);
		smp[i].n_location_id = s->n_ids;
		smp[i].location_id = p->ids.v + s->first_id;
		smp[i].n_value = p->types.n;
		smp[i].value = p->vals.v + s->first_val;
		smp[i].n_label = s->n_labels;
		smp[i].label = (Perftools__Profiles__Label **)labp + s->first_label;
		smpp[i] = &smp[i];
	}
}

/* Packs prof and gzips it (see enc_pprof_encode). */
static int pack(const Perftools__Profiles__Profile *prof, size_t max, uint8_t **out, size_t *len)
{
	size_t rawlen = perftools__profiles__profile__get_packed_size(prof);
	uint8_t *raw = base_malloc(rawlen);
	int err;

	if (!raw)
		return -ENOMEM;
	perftools__profiles__profile__pack(prof, raw);
	err = enc_gz_compress(raw, rawlen, max, out, len);
	base_free(raw);
	return err;
}

int enc_pprof_encode(struct enc_pprof *p, size_t max, uint8_t **out, size_t *len)
{
	Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__Sample *smp = NULL, **smpp = NULL;
	Perftools__Profiles__Line *lines = NULL, **linep = NULL;
	void **tp = PTRS(p->types), **mp = PTRS(p->maps), **lp = PTRS(p->locs);
	void **fp = PTRS(p->funcs), **labp = PTRS(p->labels);
	int err = -ENOMEM;

	*out = NULL;
	lines = base_calloc(p->line_fn.n, sizeof(*lines));
	linep = base_calloc(p->line_fn.n, sizeof(*linep));
	smp = base_calloc(p->samples.n, sizeof(*smp));
	smpp = base_calloc(p->samples.n, sizeof(*smpp));
	if (!tp || !mp || !lp || !fp || !labp || !lines || !linep || !smp || !smpp)
		goto out;
	link_lines(p, lines, linep);
	link_samples(p, smp, smpp, labp);
	prof.n_sample_type = p->types.n;
	prof.sample_type = (Perftools__Profiles__ValueType **)tp;
	prof.n_sample = p->samples.n;
	prof.sample = smpp;
	prof.n_mapping = p->maps.n;
	prof.mapping = (Perftools__Profiles__Mapping **)mp;
	prof.n_location = p->locs.n;
	prof.location = (Perftools__Profiles__Location **)lp;
	prof.n_function = p->funcs.n;
	prof.function = (Perftools__Profiles__Function **)fp;
	prof.n_string_table = p->strs.n;
	prof.string_table = p->strs.v;
	prof.default_sample_type = p->default_type;
	prof.time_nanos = p->time_ns;
	prof.duration_nanos = p->duration_ns;
	prof.period_type = &p->period_type;
	prof.period = p->period;
	prof.n_comment = p->comments.n;
	prof.comment = p->comments.v;
	err = pack(&prof, max, out, len);
out:
	/* Leave no pointer into the arrays freed below. */
	for (size_t i = 0; i < p->locs.n; i++)
		p->locs.v[i].line = NULL;
	base_free(tp);
	base_free(mp);
	base_free(lp);
	base_free(fp);
	base_free(labp);
	base_free(lines);
	base_free(linep);
	base_free(smp);
	base_free(smpp);
	return err;
}

/* ---- the flame view (flame.h) ----------------------------------------------- */

void enc_pprof_flame_free(struct enc_pprof_flame *x)
{
	for (size_t i = 0; i < x->nprocs; i++)
		base_free(x->procs[i]);
	base_free(x->procs);
	base_free(x->types);
	base_free(x->comments);
	base_free(x->names);
	base_free(x->frames);
	base_free(x->stacks);
	base_free(x->values);
	memset(x, 0, sizeof(*x));
}

/* Sample s's process frame: the index of its name among names, made at
 * first sight of its pid; UINT32_MAX for a sample with no pid label. */
static uint32_t proc_frame(const struct enc_pprof *p, const struct sample *s, struct enc_pprof_flame *x,
			   struct base_map *seen, int *err)
{
	const char *name = "?";
	int64_t pid = -1;
	uint64_t *known;
	char buf[160], *copy, **grown;

	for (size_t i = 0; i < s->n_labels; i++) {
		const Perftools__Profiles__Label *l = &p->labels.v[s->first_label + i];
		const char *key = p->strs.v[l->key];

		if (!strcmp(key, "pid"))
			pid = l->str ? strtoll(p->strs.v[l->str], NULL, 10) : l->num;
		else if (!strcmp(key, "process") && l->str)
			name = p->strs.v[l->str];
	}
	if (pid < 0)
		return UINT32_MAX;
	if ((known = base_map_get(seen, (uint64_t)pid + 1)))
		return (uint32_t)*known;
	snprintf(buf, sizeof(buf), "%s (pid %lld)", name, (long long)pid);
	if (!(copy = base_strdup(buf)) ||
	    !(grown = base_reallocarray(x->procs, x->nprocs + 1, sizeof(*grown)))) {
		base_free(copy);
		*err = -ENOMEM;
		return UINT32_MAX;
	}
	x->procs = grown;
	x->procs[x->nprocs++] = copy;   /* freed with x from here on */
	x->names[x->f.nnames] = copy;
	if (base_map_put(seen, (uint64_t)pid + 1, x->f.nnames)) {
		*err = -ENOMEM;
		return UINT32_MAX;
	}
	return (uint32_t)x->f.nnames++;
}

int enc_pprof_flame(const struct enc_pprof *p, const char *title, struct enc_pprof_flame *x)
{
	size_t nf = 0, at = 0;
	struct base_map seen = { 0 };
	uint32_t *name_of = NULL;   /* function index -> index in names: one per distinct name */
	uint32_t *sid_name = NULL;  /* string id -> index in names, UINT32_MAX: none yet */
	int err = 0;

	memset(x, 0, sizeof(*x));
	for (size_t i = 0; i < p->samples.n; i++) {
		nf += 1;   /* a process frame, perhaps */
		for (size_t k = 0; k < p->samples.v[i].n_ids; k++)
			nf += p->loc_lines.v[p->ids.v[p->samples.v[i].first_id + k] - 1].n;
	}
	x->types = base_calloc(p->types.n + 1, sizeof(*x->types));
	x->comments = base_calloc(p->comments.n + 1, sizeof(*x->comments));
	/* names: the functions', then one per process (at most one per sample) */
	x->names = base_calloc(p->funcs.n + p->samples.n + 1, sizeof(*x->names));
	x->frames = base_calloc(nf + 1, sizeof(*x->frames));
	x->stacks = base_calloc(p->samples.n + 1, sizeof(*x->stacks));
	x->values = base_calloc(p->vals.n + 1, sizeof(*x->values));
	name_of = base_calloc(p->funcs.n + 1, sizeof(*name_of));
	sid_name = base_calloc(p->strs.n + 1, sizeof(*sid_name));
	if (!x->types || !x->comments || !x->names || !x->frames || !x->stacks || !x->values || !name_of ||
	    !sid_name) {
		base_free(name_of);
		base_free(sid_name);
		enc_pprof_flame_free(x);
		return -ENOMEM;
	}
	x->f.dflt = p->types.n ? p->types.n - 1 : 0;   /* pprof's default: the last */
	for (size_t k = 0; k < p->types.n; k++) {
		x->types[k] = (struct enc_flame_type){ p->strs.v[p->types.v[k].type],
						       p->strs.v[p->types.v[k].unit] };
		if (p->default_type && p->types.v[k].type == p->default_type)
			x->f.dflt = k;
	}
	for (size_t k = 0; k < p->comments.n; k++)
		x->comments[k] = p->strs.v[p->comments.v[k]];
	/* Functions of one name in several files (Python's <module>) are
	 * one frame name: the forms merge by name. */
	for (size_t k = 0; k < p->strs.n; k++)
		sid_name[k] = UINT32_MAX;
	for (size_t k = 0; k < p->funcs.n; k++) {
		size_t sid = (size_t)p->funcs.v[k].name;

		if (sid_name[sid] == UINT32_MAX) {
			sid_name[sid] = (uint32_t)x->f.nnames;
			x->names[x->f.nnames++] = p->strs.v[sid];
		}
		name_of[k] = sid_name[sid];
	}
	for (size_t i = 0; i < p->samples.n && !err; i++) {
		const struct sample *s = &p->samples.v[i];
		uint32_t proc = proc_frame(p, s, x, &seen, &err);
		size_t first = at;

		if (proc != UINT32_MAX)
			x->frames[at++] = proc;
		/* the root is the last location; its outermost function its last line */
		for (size_t k = s->n_ids; k-- > 0;) {
			const struct loc_lines *ll = &p->loc_lines.v[p->ids.v[s->first_id + k] - 1];

			for (size_t j = ll->n; j-- > 0;)
				x->frames[at++] = name_of[p->line_fn.v[ll->first + j].fn - 1];
		}
		x->stacks[i] = (struct enc_flame_stack){ (uint32_t)first, (uint32_t)(at - first) };
		memcpy(x->values + i * p->types.n, p->vals.v + s->first_val, p->types.n * sizeof(*x->values));
	}
	base_map_free(&seen);
	base_free(name_of);
	base_free(sid_name);
	if (err) {
		enc_pprof_flame_free(x);
		return err;
	}
	x->f = (struct enc_flame){ .title = title, .types = x->types, .ntypes = p->types.n,
				   .dflt = x->f.dflt, .comments = x->comments, .ncomments = p->comments.n,
				   .names = x->names, .nnames = x->f.nnames, .frames = x->frames,
				   .stacks = x->stacks, .nstacks = p->samples.n, .values = x->values };
	return 0;
}
