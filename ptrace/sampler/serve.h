/* Serving requests (see serve.c): a request's session begun and ended, a
 * request of several processes served as a group, the group members that
 * join later. Sampler thread only. */
#ifndef PT_SERVE_H
#define PT_SERVE_H

#include <stdint.h>

struct pt_request;
struct pt_sampler;

/* Serves one request: a session of its kind, answered now if it has no
 * window, else run by the ticks until it ends (pt__serve_end). */
void pt__serve(struct pt_sampler *s, struct pt_request *req);
/* Answers req; a group's member is its group's, which is answered with
 * its last member. */
void pt__serve_complete(struct pt_sampler *s, struct pt_request *req);
/* Members of groups to serve once the poll under way is over (a forked
 * process joining, or one going on into a new program): pt__serve_follows
 * serves them, in the order they came. */
void pt__serve_later(struct pt_sampler *s, struct pt_request *m);
void pt__serve_follows(struct pt_sampler *s);
/* Ends the sessions whose window is over, whose client left or whose target
 * exited or exec'd (all of them when stopping). */
void pt__serve_end(struct pt_sampler *s, uint64_t now, int stopping);
/* The requests with a window being served: a group's members count as
 * one, their group. */
int pt__serve_count(const struct pt_sampler *s);

#endif
