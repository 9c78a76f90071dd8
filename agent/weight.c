/* The agent's arithmetic (see weight.h). */
#include "agent/weight.h"

#include <string.h>

#define LN2 0.69314718055994530942

double ppa_neg_log(double u)
{
	uint64_t bits;
	double m, s, s2, sum;
	int e;

	if (!(u > 0))
		return 745.0;   /* the smallest double's: a draw that never comes */
	memcpy(&bits, &u, sizeof(bits));
	e = (int)((bits >> 52) & 0x7ff) - 1023;
	bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;   /* m in [1, 2) */
	memcpy(&m, &bits, sizeof(m));
	if (m > 1.41421356237309504880) {   /* keep s small: m in [0.707, 1.414) */
		m /= 2;
		e++;
	}
	/* ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172 */
	s = (m - 1) / (m + 1);
	s2 = s * s;
	sum = s * (1 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9 + s2 / 11)))));
	return -(2 * sum + e * LN2);
}

/* 1 - exp(-x) for x >= 0, without the cancellation of small x. */
static double one_minus_exp_neg(double x)
{
	double term, sum, r, e;
	int k;

	if (x < 0.5) {
		term = x;
		sum = 0;
		for (int n = 1; n < 16; n++) {   /* x - x^2/2! + x^3/3! ... */
			sum += term;
			term *= -x / (n + 1);
		}
		return sum;
	}
	if (x > 40)
		return 1;
	/* exp(-x) = 2^-k exp(-r), r in [0, ln 2) */
	k = (int)(x / LN2);
	r = x - k * LN2;
	term = 1;
	e = 0;
	for (int n = 1; n < 20; n++) {
		e += term;
		term *= -r / n;
	}
	while (k-- > 0)
		e /= 2;
	return 1 - e;
}

double ppa_weight(uint64_t size, uint64_t rate)
{
	if (rate <= 1 || !size)
		return 1;   /* every allocation; or a 0-byte one, which a countdown hits only by chance */
	return 1 / one_minus_exp_neg((double)size / (double)rate);
}
