// SPDX-License-Identifier: MIT
/*
 * A client's budget of controller work (include/kvsplice/budget.h), as gcc
 * builds it; the verdict's build of the same header is exercised live by
 * tests/integration/test_ctl_fairness.sh. Integer arithmetic: a burst at
 * once, then the rate, fractions of a token kept, no overflow however long
 * the pause; and the run of frames over it that closes a client.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kvsplice/budget.h"

#define MS 1000000ull

static struct kvs_budget budget(uint32_t rate, uint32_t burst, uint32_t close_after)
{
	return (struct kvs_budget){ .rate = rate, .burst = burst, .close_after = close_after };
}

/* Frames taken of n tried at now. */
static uint32_t take_n(struct kvs_budget *b, uint64_t now, uint32_t n)
{
	uint32_t ok = 0;

	for (uint32_t i = 0; i < n; i++)
		ok += kvs_budget_take(b, now) == KVS_BUDGET_OK;
	return ok;
}

static void no_rate_no_limit(void **state)
{
	struct kvs_budget b = budget(0, 1, 1);

	(void)state;
	assert_int_equal(take_n(&b, 5 * MS, 100000), 100000);
	assert_int_equal(b.over, 0);
}

/* The burst at once, then one token per 1/rate. */
static void burst_then_rate(void **state)
{
	struct kvs_budget b = budget(100, 10, 0);
	uint64_t t = 1000 * MS;

	(void)state;
	assert_int_equal(take_n(&b, t, 50), 10);
	assert_int_equal(b.over, 40);
	assert_int_equal(take_n(&b, t + 9 * MS, 5), 0); /* 0.9 of a token */
	assert_int_equal(take_n(&b, t + 10 * MS, 5), 1);
	assert_int_equal(take_n(&b, t + 55 * MS, 10), 4); /* 4.5 earned: the half stays */
	assert_int_equal(take_n(&b, t + 60 * MS, 10), 1);
}

/* A rate that does not divide a second: nothing is lost to rounding over
 * time, and never more than rate a second after the burst. */
static void fractions_kept(void **state)
{
	struct kvs_budget b = budget(3, 1, 0);
	uint64_t t0 = 7 * MS, ok = 0;

	(void)state;
	for (uint64_t t = t0; t < t0 + 10000 * MS; t += 1 * MS)
		ok += take_n(&b, t, 1);
	assert_in_range(ok, 30, 31); /* the burst, then 3 a second for 10 s */
}

/* Tried far faster than the rate for 10 s: burst + rate x 10. */
static void long_run_bounded(void **state)
{
	struct kvs_budget b = budget(1000, 100, 0);
	uint64_t ok = 0;

	(void)state;
	for (uint64_t t = MS; t < MS + 10000 * MS; t += MS / 10)
		ok += take_n(&b, t, 1);
	assert_in_range(ok, 10000 + 100 - 1, 10000 + 100);
}

/* close_after frames over it in a row: CLOSE once, OVER after it. */
static void close_once(void **state)
{
	struct kvs_budget b = budget(10, 2, 5);

	(void)state;
	assert_int_equal(take_n(&b, MS, 2), 2);
	for (int i = 0; i < 4; i++)
		assert_int_equal(kvs_budget_take(&b, MS), KVS_BUDGET_OVER);
	assert_int_equal(kvs_budget_take(&b, MS), KVS_BUDGET_CLOSE);
	assert_int_equal(kvs_budget_take(&b, MS), KVS_BUDGET_OVER);
	assert_int_equal(b.over, 6);
}

/* A client that pauses until its bucket is full again starts a new run:
 * bursts over it now and then never close it. */
static void pause_forgives(void **state)
{
	struct kvs_budget b = budget(10, 2, 5);
	uint64_t t = MS;

	(void)state;
	for (int round = 0; round < 10; round++, t += 200 * MS) {
		assert_int_equal(take_n(&b, t, 2), 2);
		for (int i = 0; i < 4; i++)
			assert_int_equal(kvs_budget_take(&b, t), KVS_BUDGET_OVER);
	}
	assert_int_equal(b.over, 40);
	/* Without the pause (refilled but not full), the run goes on. */
	assert_int_equal(take_n(&b, t, 2), 2);
	assert_int_equal(take_n(&b, t, 4), 0);
	assert_int_equal(take_n(&b, t + 100 * MS, 1), 1);
	assert_int_equal(kvs_budget_take(&b, t + 100 * MS), KVS_BUDGET_CLOSE);
}

/* The largest rate and burst, a pause of years, a clock at its end. */
static void no_overflow(void **state)
{
	struct kvs_budget b = budget(10000000, 10000000, 0);
	uint64_t t = 1;

	(void)state;
	assert_int_equal(take_n(&b, t, 10000000), 10000000);
	t += 100ull * 365 * 24 * 3600 * 1000 * MS;
	assert_int_equal(take_n(&b, t, 10000001), 10000000);
	b = budget(1, 10000000, 0);
	assert_int_equal(take_n(&b, UINT64_MAX - 1, 3), 3);
	assert_int_equal(b.tokens, 10000000 - 3);
	/* A clock read behind at_ns (another CPU's) earns nothing. */
	assert_int_equal(take_n(&b, 5, 1), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(no_rate_no_limit), cmocka_unit_test(burst_then_rate),
		cmocka_unit_test(fractions_kept),   cmocka_unit_test(long_run_bounded),
		cmocka_unit_test(close_once),	    cmocka_unit_test(pause_forgives),
		cmocka_unit_test(no_overflow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
