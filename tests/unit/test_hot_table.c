// SPDX-License-Identifier: MIT
/* The controller's table of prefix rates (user/core/hot_table.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "hot_table.h"
#include "kvsplice/place.h"

#define MS 1000000ULL

/* Counted requests make the rate (in 1/KVS_HOT_FP a window); a window
 * later the previous one's count slides out; two windows unseen, nothing
 * is left; a prefix never counted has none. */
static void counts_and_slides(void **state)
{
	struct kvs_hot_table t;
	uint64_t now = 5000 * MS;
	int i;

	(void)state;
	assert_int_equal(kvs_hot_table_init(&t, 64), 0);
	for (i = 0; i < 10; i++)
		kvs_hot_table_count(&t, 42, now + (uint64_t)i * MS);
	assert_int_equal(kvs_hot_table_rate(&t, 42, now + 10 * MS), 10 * KVS_HOT_FP);
	assert_int_equal(kvs_hot_table_rate(&t, 43, now + 10 * MS), 0);
	/* half a window into the next one, half the previous count counts */
	kvs_hot_table_count(&t, 42, now + KVS_HOT_WINDOW_NS);
	assert_int_equal(kvs_hot_table_rate(&t, 42, now + KVS_HOT_WINDOW_NS * 3 / 2),
			 KVS_HOT_FP + 5 * KVS_HOT_FP);
	kvs_hot_table_count(&t, 42, now + 4 * KVS_HOT_WINDOW_NS);
	assert_int_equal(kvs_hot_table_rate(&t, 42, now + 4 * KVS_HOT_WINDOW_NS), KVS_HOT_FP);
	kvs_hot_table_free(&t);
}

/* A table far smaller than the prefixes it sees: a hot prefix, once
 * counted more than once, keeps its slot against a thousand cold ones
 * counted once each (a new prefix takes the least counted slot of its
 * probe), and its rate is intact. (A prefix counted once is as cold as
 * the others until its second request: a table this full can lose it.) */
static void hot_prefix_keeps_its_slot(void **state)
{
	struct kvs_hot_table t;
	uint64_t now = 1000 * MS;
	int i;

	(void)state;
	assert_int_equal(kvs_hot_table_init(&t, 8), 0);
	assert_int_equal(t.mask, 7);
	for (i = 0; i < 5; i++)
		kvs_hot_table_count(&t, 7, now);
	for (i = 0; i < 1000; i++) {
		if (i % 20 == 0)
			kvs_hot_table_count(&t, 7, now);
		kvs_hot_table_count(&t, 100000 + (uint64_t)i, now);
	}
	assert_int_equal(kvs_hot_table_rate(&t, 7, now), 55 * KVS_HOT_FP);
	assert_true(t.replaced > 900);
	/* stale slots are taken first, without replacing a live prefix */
	t.replaced = 0;
	for (i = 0; i < 8; i++)
		kvs_hot_table_count(&t, 200000 + (uint64_t)i, now + 3 * KVS_HOT_WINDOW_NS);
	assert_int_equal(t.replaced, 0);
	kvs_hot_table_free(&t);
}

/* Early in a clock that starts at 0 (the simulator's virtual time, which
 * starts the controller's policy at its first tick, 100 ms): a prefix's
 * first window begins at its first request, so its count holds from the
 * start. Before, a slot taken less than a window after time 0 kept its
 * window's start at 0, which marks an empty slot: every request took the
 * slot anew, and no prefix counted more than 1 in the first second. */
static void counts_from_time_zero(void **state)
{
	struct kvs_hot_table t;
	int i;

	(void)state;
	assert_int_equal(kvs_hot_table_init(&t, 64), 0);
	for (i = 0; i < 6; i++)
		kvs_hot_table_count(&t, 42, 100 * MS + (uint64_t)i * MS);
	assert_int_equal(kvs_hot_table_rate(&t, 42, 106 * MS), 6 * KVS_HOT_FP);
	/* and it slides as any window does */
	kvs_hot_table_count(&t, 42, 100 * MS + KVS_HOT_WINDOW_NS);
	assert_int_equal(kvs_hot_table_rate(&t, 42, 100 * MS + KVS_HOT_WINDOW_NS), 7 * KVS_HOT_FP);
	kvs_hot_table_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(counts_and_slides),
		cmocka_unit_test(hot_prefix_keeps_its_slot),
		cmocka_unit_test(counts_from_time_zero),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
