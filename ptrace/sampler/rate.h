/* The sampler's CPU budget: the rate its ticks run at, lowered while
 * sampling costs more than a budget of a core and restored once it costs
 * far less (see rate.c). Sampler thread only. */
#ifndef PT_RATE_H
#define PT_RATE_H

#include <stdint.h>

struct pt_rate {
	double max_cpu;          /* the budget, a fraction of a core */
	int div;                 /* ticks run at 1/div of the rate asked */
	uint64_t duty_wall;      /* when the last tick ended */
	uint64_t win_used, win_wall;   /* this budget window's work and time */
	uint64_t changes;
	double duty;             /* the last window's cost, a fraction of a core */
};

void pt_rate_init(struct pt_rate *r, double max_cpu);
/* Accounts one tick that ended at `now` and cost `used` ns of work, with the
 * rate's own tick period `period` (before division). Returns 1 if r->div
 * went up, -1 if it went down, 0 if it did not change. */
int pt_rate_account(struct pt_rate *r, uint64_t now, uint64_t period, uint64_t used);

#endif
