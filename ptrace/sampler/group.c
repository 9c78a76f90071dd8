/* A request for several processes: its members and their answers (see
 * group.h). Sampler thread only. */
#include "ptrace/sampler/group.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/array.h"
#include "base/mem.h"
#include "ptrace/profile/merge.h"
#include "ptrace/proc/proc.h"

_Static_assert(PT_GROUP_MAX <= PT_MERGE_MAX, "a group's members are merged in one call");

/* A member joining with less of the window left does not (its session
 * would end before its first tick). */
#define JOIN_MIN_NS 20000000ull

struct pt__group {
	struct pt_request *req;       /* the client's */
	/* one per process followed, each allocated alone (sessions point at
	 * them), in the order they joined; their processes and profiles */
	struct pt_request **members;
	struct pt_profile_proc *procs;
	struct pt_profile **parts;
	size_t n, cap, max, pending, left;
	uint64_t end_ns;              /* the window's end (0: none) */
};

/* Room for one more member. Returns 0 or -ENOMEM. */
static int reserve(struct pt__group *g)
{
	size_t cap = g->cap;
	int err;

	if (g->n < g->cap)
		return 0;
	if ((err = BASE_ARRAY_RESERVE(g->members, cap, g->n + 1)))
		return err;
	cap = g->cap;
	if ((err = BASE_ARRAY_RESERVE(g->procs, cap, g->n + 1)))
		return err;
	cap = g->cap;
	if ((err = BASE_ARRAY_RESERVE(g->parts, cap, g->n + 1)))
		return err;
	g->cap = cap;
	return 0;
}

/* A new member for pid (NULL without memory or past the cap: left). */
static struct pt_request *add(struct pt__group *g, pid_t pid, const char *name, uint64_t duration_ns)
{
	struct pt_request *m;

	if (g->n >= g->max) {
		g->left++;
		return NULL;
	}
	if (reserve(g) || !(m = base_calloc(1, sizeof(*m))))
		return NULL;
	m->kind = g->req->kind;
	m->pid = pid;
	m->duration_ns = duration_ns;
	m->hz = g->req->hz;
	m->group = g;
	g->members[g->n] = m;
	g->procs[g->n] = (struct pt_profile_proc){ .pid = pid };
	snprintf(g->procs[g->n].name, sizeof(g->procs[g->n].name), "%s", name);
	g->parts[g->n] = NULL;
	g->n++;
	g->pending++;
	return m;
}

static void group_free(struct pt__group *g)
{
	for (size_t i = 0; i < g->n; i++) {
		pt_profile_free(g->parts[i]);
		base_free(g->members[i]);
	}
	base_free(g->parts);
	base_free(g->procs);
	base_free(g->members);
	base_free(g);
}

struct pt__group *pt__group_new(struct pt_request *req, uint64_t now, struct pt_request ***members,
				size_t *n)
{
	struct pt__group *g = base_calloc(1, sizeof(*g));

	*members = NULL;
	*n = 0;
	if (!g)
		return NULL;
	g->req = req;
	g->max = req->max_procs && req->max_procs < PT_GROUP_MAX ? req->max_procs : PT_GROUP_MAX;
	g->left = req->nprocs_left;
	g->end_ns = req->duration_ns ? now + req->duration_ns : 0;
	for (size_t i = 0; i < req->nprocs; i++) {
		if (g->n >= g->max) {
			g->left++;
		} else if (!add(g, req->procs[i].pid, req->procs[i].name, req->duration_ns)) {
			group_free(g);
			return NULL;   /* no memory */
		}
	}
	*members = g->members;
	*n = g->n;
	return g;
}

int pt__group_follows(const struct pt_request *member, uint64_t now)
{
	const struct pt__group *g = member->group;

	return g && g->end_ns && now + JOIN_MIN_NS < g->end_ns && !atomic_load(&g->req->cancel);
}

/* member's index in its group. */
static size_t index_of(const struct pt__group *g, const struct pt_request *member)
{
	size_t i;

	for (i = 0; i < g->n && g->members[i] != member; i++) {
	}
	return i;
}

static struct pt_request *join(struct pt__group *g, pid_t pid, const char *name, uint64_t now)
{
	return add(g, pid, name, g->end_ns - now);
}

struct pt_request *pt__group_join(const struct pt_request *member, pid_t pid, uint64_t now)
{
	struct pt__group *g = member->group;
	char name[64];

	if (!pt__group_follows(member, now))
		return NULL;
	/* copied: the array may move as the member is added */
	snprintf(name, sizeof(name), "%s", g->procs[index_of(g, member)].name);
	return join(g, pid, name, now);
}

/* The name a process has now (its comm), or "?". */
static void comm_of(pid_t pid, char *out, size_t len)
{
	char path[64], buf[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0)
		snprintf(buf, sizeof(buf), "?");
	buf[strcspn(buf, "\n")] = '\0';
	snprintf(out, len, "%s", buf);
}

struct pt_request *pt__group_member_done(struct pt_request *member, uint64_t now, struct pt_request **again)
{
	struct pt__group *g = member->group;
	struct pt_request *req = g->req;
	const char *cut = member->profile ? member->profile->cut : NULL;
	size_t i;
	int first_err = 0, any = 0;

	*again = NULL;
	/* Through an exec: the same process, a new program, a new member. */
	if (cut && !strncmp(cut, "exec", 4) && pt__group_follows(member, now)) {
		char name[64];

		comm_of(member->pid, name, sizeof(name));
		*again = join(g, member->pid, name, now);
	}
	i = index_of(g, member);
	g->parts[i] = member->profile;
	member->profile = NULL;
	if (--g->pending)
		return NULL;
	for (size_t k = 0; k < g->n; k++) {
		g->procs[k].err = g->members[k]->err;
		g->procs[k].note = NULL;
		if (g->members[k]->err && !first_err)
			first_err = g->members[k]->err;
		any |= g->parts[k] != NULL;
	}
	if (!any) {
		/* No process gave a profile: the group fails as its first did. */
		req->err = first_err ? first_err : -ESRCH;
	} else {
		req->err = pt_profile_merge(g->parts, g->procs, g->n, &req->profile);
		if (req->profile)
			req->profile->procs_left = g->left;
	}
	group_free(g);
	return req;
}

int pt__request_cancelled(const struct pt_request *req)
{
	return atomic_load(&req->cancel) || (req->group && atomic_load(&req->group->req->cancel));
}
