// SPDX-License-Identifier: MIT
/* Summary statistics for reports: percentiles and moments. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double kvs_percentile(double *v, size_t n, double p)
{
	double rank, frac;
	size_t lo;

	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), dbl_cmp);
	if (p <= 0)
		return v[0];
	if (p >= 100)
		return v[n - 1];
	rank = p / 100.0 * (double)(n - 1);
	lo = (size_t)rank;
	frac = rank - (double)lo;
	if (lo + 1 >= n)
		return v[n - 1];
	return v[lo] + frac * (v[lo + 1] - v[lo]);
}

double kvs_mean(const double *v, size_t n)
{
	double s = 0;
	size_t i;

	for (i = 0; i < n; i++)
		s += v[i];
	return n ? s / (double)n : 0;
}

double kvs_max_over_mean(const double *v, size_t n)
{
	double m = kvs_mean(v, n), mx = 0;
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i] > mx)
			mx = v[i];
	return m > 0 ? mx / m : 0;
}

double kvs_cv(const double *v, size_t n)
{
	double m = kvs_mean(v, n), s = 0;
	size_t i;

	for (i = 0; i < n; i++)
		s += (v[i] - m) * (v[i] - m);
	return n && m > 0 ? sqrt(s / (double)n) / m : 0;
}
