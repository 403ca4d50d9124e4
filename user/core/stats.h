/* SPDX-License-Identifier: MIT */
/* Summary statistics for reports: percentiles and moments. Pure. */
#ifndef KVS_STATS_H
#define KVS_STATS_H

#include <stddef.h>

/* The p-th percentile (0..100) of v[0..n), linear interpolation between
 * closest ranks (the definition numpy uses by default). Sorts v. 0 if n == 0. */
double kvs_percentile(double *v, size_t n, double p);
double kvs_mean(const double *v, size_t n);
/* max / mean of v (1 when all equal, 0 when n == 0 or the mean is 0). */
double kvs_max_over_mean(const double *v, size_t n);
/* Coefficient of variation: population stddev / mean. */
double kvs_cv(const double *v, size_t n);

#endif
