/* A request for several processes (a group): each process is served as a
 * request of its own (a member), on its own target, with the sessions and
 * ticks every request gets; when the last member is answered, the group's
 * request is, with one profile of them all (pt_profile_merge). The sampler
 * starts the members and hands each answer here (sampler.c serve and
 * complete). Sampler thread only. */
#ifndef PT_GROUP_H
#define PT_GROUP_H

#include <stdatomic.h>
#include <stddef.h>

#include "ptrace/sampler.h"

struct pt__group;

/* The group of req (req->nprocs processes): one member request per
 * process, a copy of req for that pid, returned in *members (n of them,
 * owned by the group). Returns NULL without memory (req untouched). */
struct pt__group *pt__group_new(struct pt_request *req, struct pt_request **members, size_t *n);
/* A member was answered. Returns the group's request once every member is
 * (its profile merged, or its error: the first member's when none gave a
 * profile), the group freed; else NULL. */
struct pt_request *pt__group_member_done(struct pt_request *member);
/* Whether req's client went away: its own, or its group's. */
int pt__request_cancelled(const struct pt_request *req);

#endif
