/* A request for several processes: its members and their answers (see
 * group.h). Sampler thread only. */
#include "ptrace/group.h"

#include <errno.h>
#include <string.h>

#include "base/mem.h"
#include "ptrace/merge.h"

struct pt__group {
	struct pt_request *req;      /* the client's */
	struct pt_request *members;  /* one per process, in req->procs order */
	struct pt_profile **parts;   /* their profiles, as they are answered */
	size_t n, pending;
};

struct pt__group *pt__group_new(struct pt_request *req, struct pt_request **members, size_t *n)
{
	struct pt__group *g = base_calloc(1, sizeof(*g));

	*members = NULL;
	*n = 0;
	if (!g)
		return NULL;
	g->members = base_calloc(req->nprocs, sizeof(*g->members));
	g->parts = base_calloc(req->nprocs, sizeof(*g->parts));
	if (!g->members || !g->parts) {
		base_free(g->members);
		base_free(g->parts);
		base_free(g);
		return NULL;
	}
	g->req = req;
	g->n = g->pending = req->nprocs;
	for (size_t i = 0; i < g->n; i++) {
		struct pt_request *m = &g->members[i];

		m->kind = req->kind;
		m->pid = req->procs[i].pid;
		m->duration_ns = req->duration_ns;
		m->hz = req->hz;
		m->group = g;
	}
	*members = g->members;
	*n = g->n;
	return g;
}

static void group_free(struct pt__group *g)
{
	for (size_t i = 0; i < g->n; i++)
		pt_profile_free(g->parts[i]);
	base_free(g->parts);
	base_free(g->members);
	base_free(g);
}

struct pt_request *pt__group_member_done(struct pt_request *member)
{
	struct pt__group *g = member->group;
	struct pt_request *req = g->req;
	struct pt_profile_proc *procs;
	size_t i = (size_t)(member - g->members);
	int first_err = 0, any = 0;

	g->parts[i] = member->profile;
	member->profile = NULL;
	if (--g->pending)
		return NULL;
	if (!(procs = base_calloc(g->n, sizeof(*procs)))) {
		req->err = -ENOMEM;
		group_free(g);
		return req;
	}
	for (size_t k = 0; k < g->n; k++) {
		procs[k] = req->procs[k];
		procs[k].err = g->members[k].err;
		procs[k].note = NULL;
		if (g->members[k].err && !first_err)
			first_err = g->members[k].err;
		any |= g->parts[k] != NULL;
	}
	if (!any) {
		/* No process gave a profile: the group fails as its first did. */
		req->err = first_err ? first_err : -ESRCH;
	} else {
		req->err = pt_profile_merge(g->parts, procs, g->n, &req->profile);
		if (req->profile)
			req->profile->procs_left = req->nprocs_left;
	}
	base_free(procs);
	group_free(g);
	return req;
}

int pt__request_cancelled(const struct pt_request *req)
{
	return atomic_load(&req->cancel) || (req->group && atomic_load(&req->group->req->cancel));
}
