#include "encoder/pprof.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "encoder/gz.h"
#include "profile.pb-c.h"

/* A growable array of fixed-size items. */
struct vec {
	void *v;
	size_t n, cap, size;
};

static void *vec_push(struct vec *a)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		void *v = realloc(a->v, cap * a->size);

		if (!v)
			return NULL;
		a->v = v;
		a->cap = cap;
	}
	return memset((char *)a->v + a->n++ * a->size, 0, a->size);
}

struct str_slot {
	uint64_t hash;     /* 0 = empty */
	int64_t idx;
};

struct func_slot {
	int64_t name;      /* string index, 0 = empty */
	int64_t file;      /* string index, 0 = none */
	int64_t start;     /* first line, 0 = unknown */
	int64_t id;
};

/* One Line of a location: its function and line number (0: unknown). */
struct line_ref {
	uint64_t fn;
	int64_t line;
};

struct enc_pprof {
	int64_t default_type;  /* string id, 0: none */
	struct vec strs;       /* char * */
	struct str_slot *sh;
	size_t shcap;
	struct func_slot *fh;
	size_t fhcap;
	struct vec types;      /* Perftools__Profiles__ValueType */
	struct vec maps;       /* Perftools__Profiles__Mapping */
	struct vec locs;       /* Perftools__Profiles__Location, line set at encode */
	struct vec loc_lines;  /* struct loc_lines: each location's run of line_fn */
	struct vec line_fn;    /* struct line_ref: every location's Lines */
	struct vec funcs;      /* Perftools__Profiles__Function */
	struct vec samples;    /* struct sample */
	struct vec ids;        /* uint64_t: all samples' location ids */
	struct vec vals;       /* int64_t: all samples' values */
	struct vec comments;   /* int64_t */
	struct vec labels;     /* Perftools__Profiles__Label: all samples' labels */
	Perftools__Profiles__ValueType period_type;
	int64_t period, time_ns, duration_ns;
};

struct sample {
	size_t first_id, n_ids, first_val, first_label, n_labels;
};

struct loc_lines {
	size_t first, n;
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h | 1;
}

int enc_pprof_new(struct enc_pprof **out)
{
	struct enc_pprof *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->strs.size = sizeof(char *);
	p->types.size = sizeof(Perftools__Profiles__ValueType);
	p->maps.size = sizeof(Perftools__Profiles__Mapping);
	p->locs.size = sizeof(Perftools__Profiles__Location);
	p->loc_lines.size = sizeof(struct loc_lines);
	p->line_fn.size = sizeof(struct line_ref);
	p->funcs.size = sizeof(Perftools__Profiles__Function);
	p->samples.size = sizeof(struct sample);
	p->ids.size = sizeof(uint64_t);
	p->vals.size = sizeof(int64_t);
	p->comments.size = sizeof(int64_t);
	p->labels.size = sizeof(Perftools__Profiles__Label);
	perftools__profiles__value_type__init(&p->period_type);
	/* string_table[0] must be "". */
	char **s0 = vec_push(&p->strs);

	if (!s0 || !(*s0 = strdup(""))) {
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
		free(((char **)p->strs.v)[i]);
	free(p->strs.v);
	free(p->sh);
	free(p->fh);
	free(p->types.v);
	free(p->maps.v);
	free(p->locs.v);
	free(p->loc_lines.v);
	free(p->line_fn.v);
	free(p->funcs.v);
	free(p->samples.v);
	free(p->ids.v);
	free(p->vals.v);
	free(p->comments.v);
	free(p->labels.v);
	free(p);
}

/* Interns s; returns its string-table index (> 0, or 0 for ""), or -ENOMEM. */
static int64_t intern(struct enc_pprof *p, const char *s)
{
	uint64_t h;
	size_t j;

	if (!s || !*s)
		return 0;
	if ((p->strs.n + 1) * 2 > p->shcap) {
		size_t cap = p->shcap ? p->shcap * 2 : 256;
		struct str_slot *t = calloc(cap, sizeof(*t));

		if (!t)
			return -ENOMEM;
		for (size_t i = 0; i < p->shcap; i++) {
			if (!p->sh[i].hash)
				continue;
			for (j = p->sh[i].hash & (cap - 1); t[j].hash; j = (j + 1) & (cap - 1)) {
			}
			t[j] = p->sh[i];
		}
		free(p->sh);
		p->sh = t;
		p->shcap = cap;
	}
	h = hash_str(s);
	for (j = h & (p->shcap - 1); p->sh[j].hash; j = (j + 1) & (p->shcap - 1))
		if (p->sh[j].hash == h && !strcmp(((char **)p->strs.v)[p->sh[j].idx], s))
			return p->sh[j].idx;
	char **slot = vec_push(&p->strs);

	if (!slot)
		return -ENOMEM;
	if (!(*slot = strdup(s))) {
		p->strs.n--;
		return -ENOMEM;
	}
	p->sh[j].hash = h;
	p->sh[j].idx = (int64_t)p->strs.n - 1;
	return p->sh[j].idx;
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
	Perftools__Profiles__ValueType *vt = vec_push(&p->types);

	return vt ? value_type(p, vt, type, unit) : -ENOMEM;
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

	if (s < 0 || !(c = vec_push(&p->comments)))
		return -ENOMEM;
	*c = s;
	return 0;
}

int64_t enc_pprof_mapping(struct enc_pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
			  const char *file, const char *build_id, int has_functions)
{
	int64_t f = intern(p, file), b = intern(p, build_id);
	Perftools__Profiles__Mapping *m;

	if (f < 0 || b < 0 || !(m = vec_push(&p->maps)))
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

static uint64_t func_hash(int64_t name, int64_t file, int64_t start)
{
	return ((uint64_t)name * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)file * 0xc2b2ae3d27d4eb4full) ^
	       ((uint64_t)start * 0x165667b19e3779f9ull);
}

int64_t enc_pprof_function_src(struct enc_pprof *p, const char *name, const char *file,
			       int64_t start_line, int compiled)
{
	int64_t s = intern(p, name), f = file ? intern(p, file) : 0;
	Perftools__Profiles__Function *fn;
	size_t j;

	if (s < 0 || f < 0)
		return -ENOMEM;
	if ((p->funcs.n + 1) * 2 > p->fhcap) {
		size_t cap = p->fhcap ? p->fhcap * 2 : 256;
		struct func_slot *t = calloc(cap, sizeof(*t));

		if (!t)
			return -ENOMEM;
		for (size_t i = 0; i < p->fhcap; i++) {
			const struct func_slot *o = &p->fh[i];

			if (!o->name)
				continue;
			for (j = func_hash(o->name, o->file, o->start) & (cap - 1); t[j].name;
			     j = (j + 1) & (cap - 1)) {
			}
			t[j] = *o;
		}
		free(p->fh);
		p->fh = t;
		p->fhcap = cap;
	}
	for (j = func_hash(s, f, start_line) & (p->fhcap - 1); p->fh[j].name; j = (j + 1) & (p->fhcap - 1))
		if (p->fh[j].name == s && p->fh[j].file == f && p->fh[j].start == start_line)
			return p->fh[j].id;
	if (!(fn = vec_push(&p->funcs)))
		return -ENOMEM;
	perftools__profiles__function__init(fn);
	fn->id = p->funcs.n;
	fn->name = s;
	/* Interpreted code has no system name: pprof demangles a function
	 * whose name equals its system name, and the C++ rule that drops
	 * template arguments would blank out Python's "<module>" (go tool
	 * pprof showed "<unknown>"). */
	fn->system_name = f && !compiled ? 0 : s;
	fn->filename = f;
	fn->start_line = start_line;
	p->fh[j] = (struct func_slot){ s, f, start_line, (int64_t)fn->id };
	return (int64_t)fn->id;
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
		struct line_ref *r = vec_push(&p->line_fn);

		if (!r) {
			p->line_fn.n = first;
			return -ENOMEM;
		}
		r->fn = function_ids[i];
		r->line = lines ? lines[i] : 0;
	}
	if (!(l = vec_push(&p->locs))) {
		p->line_fn.n = first;
		return -ENOMEM;
	}
	if (!(ll = vec_push(&p->loc_lines))) {
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
		if (!(l = vec_push(&p->labels)))
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
		if (!(id = vec_push(&p->ids)))
			return -ENOMEM;
		*id = loc_ids[i];
	}
	for (size_t i = 0; i < nv; i++) {
		int64_t *x = vec_push(&p->vals);

		if (!x)
			return -ENOMEM;
		*x = v[i];
	}
	if (!(s = vec_push(&p->samples)))
		return -ENOMEM;
	s->first_id = p->ids.n - n;
	s->n_ids = n;
	s->first_val = p->vals.n - nv;
	s->first_label = p->labels.n - nl;
	s->n_labels = nl;
	return 0;
}

/* protobuf-c wants arrays of pointers; build them over our flat arrays. */
static void **ptrs(struct vec *a)
{
	void **v = malloc((a->n ? a->n : 1) * sizeof(*v));

	if (v)
		for (size_t i = 0; i < a->n; i++)
			v[i] = (char *)a->v + i * a->size;
	return v;
}

/* Each location's Lines (several where code was inlined, innermost first):
 * lines and linep have a slot per function id of line_fn. */
static void link_lines(struct enc_pprof *p, Perftools__Profiles__Line *lines,
		       Perftools__Profiles__Line **linep)
{
	for (size_t i = 0; i < p->line_fn.n; i++) {
		perftools__profiles__line__init(&lines[i]);
		lines[i].function_id = ((const struct line_ref *)p->line_fn.v)[i].fn;
		lines[i].line = ((const struct line_ref *)p->line_fn.v)[i].line;
		linep[i] = &lines[i];
	}
	for (size_t i = 0; i < p->locs.n; i++) {
		Perftools__Profiles__Location *l = (Perftools__Profiles__Location *)p->locs.v + i;
		const struct loc_lines *ll = (const struct loc_lines *)p->loc_lines.v + i;

		l->n_line = ll->n;
		l->line = ll->n ? &linep[ll->first] : NULL;
	}
}

/* The samples as protobuf-c messages pointing into the builder's arrays. */
static void link_samples(struct enc_pprof *p, Perftools__Profiles__Sample *smp,
			 Perftools__Profiles__Sample **smpp, void **labp)
{
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = (const struct sample *)p->samples.v + i;

		perftools__profiles__sample__init(&smp[i]);
		smp[i].n_location_id = s->n_ids;
		smp[i].location_id = (uint64_t *)p->ids.v + s->first_id;
		smp[i].n_value = p->types.n;
		smp[i].value = (int64_t *)p->vals.v + s->first_val;
		smp[i].n_label = s->n_labels;
		smp[i].label = (Perftools__Profiles__Label **)labp + s->first_label;
		smpp[i] = &smp[i];
	}
}

/* Packs prof and gzips it (see enc_pprof_encode). */
static int pack(const Perftools__Profiles__Profile *prof, size_t max, uint8_t **out, size_t *len)
{
	size_t rawlen = perftools__profiles__profile__get_packed_size(prof);
	uint8_t *raw = malloc(rawlen ? rawlen : 1);
	int err;

	if (!raw)
		return -ENOMEM;
	perftools__profiles__profile__pack(prof, raw);
	err = enc_gz_compress(raw, rawlen, max, out, len);
	free(raw);
	return err;
}

int enc_pprof_encode(struct enc_pprof *p, size_t max, uint8_t **out, size_t *len)
{
	Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__Sample *smp = NULL, **smpp = NULL;
	Perftools__Profiles__Line *lines = NULL, **linep = NULL;
	void **tp = ptrs(&p->types), **mp = ptrs(&p->maps), **lp = ptrs(&p->locs);
	void **fp = ptrs(&p->funcs), **labp = ptrs(&p->labels);
	int err = -ENOMEM;

	*out = NULL;
	lines = calloc(p->line_fn.n ? p->line_fn.n : 1, sizeof(*lines));
	linep = malloc((p->line_fn.n ? p->line_fn.n : 1) * sizeof(*linep));
	smp = calloc(p->samples.n ? p->samples.n : 1, sizeof(*smp));
	smpp = malloc((p->samples.n ? p->samples.n : 1) * sizeof(*smpp));
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
	prof.string_table = (char **)p->strs.v;
	prof.default_sample_type = p->default_type;
	prof.time_nanos = p->time_ns;
	prof.duration_nanos = p->duration_ns;
	prof.period_type = &p->period_type;
	prof.period = p->period;
	prof.n_comment = p->comments.n;
	prof.comment = (int64_t *)p->comments.v;
	err = pack(&prof, max, out, len);
out:
	/* Leave no pointer into the arrays freed below. */
	for (size_t i = 0; i < p->locs.n; i++)
		((Perftools__Profiles__Location *)p->locs.v)[i].line = NULL;
	free(tp);
	free(mp);
	free(lp);
	free(fp);
	free(labp);
	free(lines);
	free(linep);
	free(smp);
	free(smpp);
	return err;
}
