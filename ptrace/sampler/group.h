/* A request for several processes (a group): each process is served as a
 * request of its own (a member), on its own target, with the sessions and
 * ticks every request gets; when the last member is answered, the group's
 * request is, with one profile of them all (pt_profile_merge). A group
 * with a window follows its processes: one a member forks joins it from
 * its first instruction (pt__group_join), and one that execs goes on as a
 * new member for the new program. The sampler starts the members and hands
 * each answer here (sampler.c serve, complete and on_event). Sampler
 * thread only. */
#ifndef PT_GROUP_H
#define PT_GROUP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/sampler/request.h"

struct pt__group;

/* The group of req (req->nprocs processes, at most req->max_procs): one
 * member request per process, for that pid, in *members (n of them, owned
 * by the group). Returns NULL without memory (req untouched). */
struct pt__group *pt__group_new(struct pt_request *req, uint64_t now, struct pt_request ***members,
				size_t *n);
/* 1 if member's group follows its processes' children (it has a window
 * still running at now). */
int pt__group_follows(const struct pt_request *member, uint64_t now);
/* A new member of member's group for process pid, named as member's (a
 * fork keeps the name), its window the rest of the group's: a child
 * member's process forked. NULL when the group does not follow (now), past
 * its cap (counted as left out of the profile), or without memory. */
struct pt_request *pt__group_join(const struct pt_request *member, pid_t pid, uint64_t now);
/* A member was answered. Returns the group's request once every member is
 * (its profile merged, or its error: the first member's when none gave a
 * profile), the group freed; else NULL. A member whose process exec'd with
 * the window still running is followed into the new program: *again is
 * the new member to serve (else NULL). */
struct pt_request *pt__group_member_done(struct pt_request *member, uint64_t now, struct pt_request **again);
/* Whether req's client went away: its own, or its group's. */
int pt__request_cancelled(const struct pt_request *req);

#endif
