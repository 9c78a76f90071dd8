/* The sampler's CPU budget (see rate.h): the cost of its ticks, averaged
 * over half a second, against a fraction of a core, and the rate divisor
 * that keeps it under. Owns nothing but the counters in struct pt_rate.
 * Sampler thread only. */
#include "ptrace/sampler/rate.h"

#define DUTY_WINDOW_NS 500000000ull   /* the budget is checked twice a second */
#define MAX_RATE_DIV 64

void pt_rate_init(struct pt_rate *r, double max_cpu)
{
	*r = (struct pt_rate){ .max_cpu = max_cpu > 0 ? max_cpu : 0.15, .div = 1 };
}

/* When sampling costs more than its budget of a core (--max-cpu-percent: too
 * many threads to look at, stop and unwind, a crowded machine), the sampler
 * lowers its rate by as many halvings as bring it under the budget, rather
 * than fall behind or crowd the target off its cores; it doubles it again
 * once under a quarter of the budget. The cost is the sampler thread's CPU
 * in its ticks plus the time it spent taking the stops that came after them
 * (the work a lower rate saves; not counted: the wake-ups for those stops,
 * requests, and the target's other events: a churning target's clones and
 * exits cost the same at any rate), over half a second of ticks (a gap with
 * no ticks counts as four periods at most). Over a few ticks it swings with
 * the stops that come in bursts: averaged over ten ticks, 64 busy threads
 * at 1000 Hz changed the rate 32 times in 6 s. */
int pt_rate_account(struct pt_rate *r, uint64_t now, uint64_t period, uint64_t used)
{
	uint64_t cap = 4 * period * (uint64_t)r->div;
	int div = r->div, was = r->div;
	double left;

	if (r->duty_wall && now > r->duty_wall)
		r->win_wall += now - r->duty_wall < cap ? now - r->duty_wall : cap;
	r->duty_wall = now;
	r->win_used += used;
	if (r->win_wall < DUTY_WINDOW_NS)
		return 0;
	r->duty = left = (double)r->win_used / (double)r->win_wall;
	r->win_used = r->win_wall = 0;
	while (left > r->max_cpu && div < MAX_RATE_DIV) {
		div *= 2;
		left /= 2;
	}
	if (div == r->div && r->duty < r->max_cpu / 4 && div > 1)
		div /= 2;
	if (div == was)
		return 0;
	r->changes++;
	r->div = div;
	return div > was ? 1 : -1;
}
