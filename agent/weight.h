/* The agent's arithmetic, without libm (whose versioned symbols would tie
 * the agent to a recent glibc): the exponential draw of the sampling
 * countdown, and the weight of a sample. Pure functions; any thread. */
#ifndef PPA_WEIGHT_H
#define PPA_WEIGHT_H

#include <stdint.h>

/* -ln(u) for u in (0, 1], to about 1e-7 relative. */
double ppa_neg_log(double u);
/* How many allocations of size bytes one sample stands for at a mean of
 * rate bytes between samples: 1 / (1 - exp(-size / rate)), the inverse of
 * the chance that the countdown samples such an allocation (Go's
 * unsampling, for one allocation). 1 when rate <= 1. */
double ppa_weight(uint64_t size, uint64_t rate);

#endif
