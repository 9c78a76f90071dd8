/* Where a Go program's goroutines wait, for the block and mutex profiles
 * (waiting.c's; see gowaits.c). Sampler thread. */
#ifndef PT_SESSION_GOWAITS_H
#define PT_SESSION_GOWAITS_H

#include <stdint.h>

struct pt_session;
struct pt_stacks;
struct pt__gowaits;

/* What the looks found, for the profile's comment and the logs. */
struct pt__gowaits_stats {
	uint64_t looks;         /* looks at every goroutine, the first included */
	uint64_t reads_shared;  /* looks that took another session's read of that tick */
	uint64_t waits;         /* goroutine waits seen (the contentions) */
	uint64_t torn;          /* waits left out of a look: the goroutine moved while read */
	uint64_t parked;        /* goroutines parked at the last look */
	uint64_t period_ns;     /* the time between looks, as it last was */
	uint64_t look_ns;       /* what the last look took */
};

/* The waits of ss's target, if it is a Go program whose goroutines podprof
 * reads (else *out is NULL and 0 returned: its threads' waits serve), put
 * in block (every parked goroutine's) and mutex (those waiting for a
 * sync.Mutex or RWMutex); either may be NULL. Takes the first look now,
 * which counts nothing: a goroutine counts from there. Returns 0 or
 * -ENOMEM. */
int pt__gowaits_new(struct pt_session *ss, struct pt_stacks *block, struct pt_stacks *mutex,
		    struct pt__gowaits **out);
/* Looks again if one is due at now (CLOCK_MONOTONIC ns); force
 * PT__GOWAITS_NOW: whether due or not (the window's end);
 * PT__GOWAITS_FRESH: unless one came in the last 10 ms (a request's answer
 * up to it: requests come from outside, the rate of their looks is held).
 * Nothing once gw's session ended (pt__gowaits_end). */
#define PT__GOWAITS_NOW 1
#define PT__GOWAITS_FRESH 2
void pt__gowaits_look(struct pt__gowaits *gw, uint64_t now, int force);
/* gw's session ended: no look more, what it gathered stays to be read
 * (a continuous watch's waits, which requests may still ask for). */
void pt__gowaits_end(struct pt__gowaits *gw);
void pt__gowaits_stats(const struct pt__gowaits *gw, struct pt__gowaits_stats *out);
/* The Go release read ("go1.26.10"). */
const char *pt__gowaits_version(const struct pt__gowaits *gw);
/* NULL-safe. */
void pt__gowaits_free(struct pt__gowaits *gw);

#endif
