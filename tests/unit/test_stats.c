// SPDX-License-Identifier: MIT
/* Report arithmetic: known inputs, known percentiles and balance figures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "stats.h"

#define assert_near(a, b) assert_true((a) > (b)-1e-9 && (a) < (b) + 1e-9)

static void percentiles(void **state)
{
	double v[] = { 5, 1, 4, 2, 3 }; /* sorted: 1 2 3 4 5 */
	double w[] = { 10, 20, 30, 40 };

	(void)state;
	assert_near(kvs_percentile(v, 5, 50), 3);
	assert_near(kvs_percentile(v, 5, 0), 1);
	assert_near(kvs_percentile(v, 5, 100), 5);
	assert_near(kvs_percentile(v, 5, 90), 4.6); /* rank 3.6 */
	assert_near(kvs_percentile(w, 4, 50), 25);  /* rank 1.5 */
	assert_near(kvs_percentile(w, 4, 99), 39.7);
	assert_near(kvs_percentile(w, 0, 50), 0);
}

static void balance(void **state)
{
	double even[] = { 10, 10, 10, 10 }, skew[] = { 40, 0, 0, 0 }, pair[] = { 1, 3 };

	(void)state;
	assert_near(kvs_max_over_mean(even, 4), 1);
	assert_near(kvs_cv(even, 4), 0);
	assert_near(kvs_max_over_mean(skew, 4), 4);
	assert_near(kvs_max_over_mean(pair, 2), 1.5);
	assert_near(kvs_cv(pair, 2), 0.5); /* stddev 1, mean 2 */
	assert_near(kvs_mean(pair, 2), 2);
	assert_near(kvs_max_over_mean(pair, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(percentiles),
		cmocka_unit_test(balance),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
