// SPDX-License-Identifier: MIT
/* Bounded-load consistent hashing: agreement between instances, the load
 * bound, eligibility, and minimal movement when a backend leaves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "chash.h"

static const char *const names4[] = { "10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000",
				      "10.0.0.4:8000" };

static void two_instances_agree(void **state)
{
	struct kvs_chash a, b;
	uint64_t load[4] = { 0 };
	uint8_t ok[4] = { 1, 1, 1, 1 };

	(void)state;
	assert_int_equal(kvs_chash_build(&a, names4, 4, KVS_CHASH_VNODES), 0);
	assert_int_equal(kvs_chash_build(&b, names4, 4, KVS_CHASH_VNODES), 0);
	for (uint64_t k = 0; k < 1000; k++)
		assert_int_equal(kvs_chash_pick(&a, k, load, ok, 1.25),
				 kvs_chash_pick(&b, k, load, ok, 1.25));
	kvs_chash_free(&a);
	kvs_chash_free(&b);
}

/* One hot key placed over and over, each placement adding one unit of load:
 * no backend ever exceeds ceil(1.25 * (total + 1) / n), so the key spills
 * along the ring: three backends fill to ~1.25x the mean, the fourth takes
 * the rest (~0.25x). Unbounded hashing would put all 4000 on one. */
static void load_bound_holds(void **state)
{
	struct kvs_chash c;
	uint64_t load[4] = { 0 }, total = 0;
	uint8_t ok[4] = { 1, 1, 1, 1 };

	(void)state;
	assert_int_equal(kvs_chash_build(&c, names4, 4, KVS_CHASH_VNODES), 0);
	for (uint64_t k = 0; k < 4000; k++) {
		/* the same key every time: unbounded hashing would pile it on one */
		int b = kvs_chash_pick(&c, 7, load, ok, 1.25);
		uint64_t bound = (uint64_t)((1.25 * (double)(total + 1) + 3) / 4);

		assert_true(b >= 0 && b < 4);
		load[b]++;
		total++;
		assert_true(load[b] <= bound + 1);
	}
	for (int i = 0; i < 4; i++) {
		assert_true(load[i] <= 1251);
		assert_true(load[i] >= 200);
	}
	kvs_chash_free(&c);
}

static void ineligible_backends_are_skipped(void **state)
{
	struct kvs_chash c;
	uint64_t load[4] = { 0 };
	uint8_t ok[4] = { 0, 1, 0, 0 }, none[4] = { 0 };

	(void)state;
	assert_int_equal(kvs_chash_build(&c, names4, 4, KVS_CHASH_VNODES), 0);
	for (uint64_t k = 0; k < 100; k++)
		assert_int_equal(kvs_chash_pick(&c, k, load, ok, 1.25), 1);
	assert_int_equal(kvs_chash_pick(&c, 1, load, none, 1.25), -1);
	kvs_chash_free(&c);
}

/* When a backend becomes ineligible, only its keys move. */
static void minimal_movement(void **state)
{
	struct kvs_chash c;
	uint64_t load[4] = { 0 };
	uint8_t all[4] = { 1, 1, 1, 1 }, three[4] = { 1, 1, 0, 1 };
	int moved = 0, owned = 0;

	(void)state;
	assert_int_equal(kvs_chash_build(&c, names4, 4, KVS_CHASH_VNODES), 0);
	for (uint64_t k = 0; k < 2000; k++) {
		int before = kvs_chash_pick(&c, k, load, all, 100.0);
		int after = kvs_chash_pick(&c, k, load, three, 100.0);

		if (before == 2)
			owned++;
		else if (before != after)
			moved++;
	}
	assert_int_equal(moved, 0);
	assert_true(owned > 300 && owned < 700); /* a fair share, ~500 */
	kvs_chash_free(&c);
}

/* A slot whose backend was removed (NULL name) has no ring position: keys
 * go to the others, and those that went to the others stay where they were
 * (the ring is the same but for the removed backend's points). With every
 * slot empty nothing is picked. */
static void empty_slots_get_nothing(void **state)
{
	const char *const gap[] = { names4[0], NULL, names4[2], names4[3] };
	const char *const none[] = { NULL, NULL };
	struct kvs_chash full, c;
	uint64_t load[4] = { 0 };
	uint8_t ok[4] = { 1, 1, 1, 1 };
	int moved = 0;

	(void)state;
	assert_int_equal(kvs_chash_build(&full, names4, 4, KVS_CHASH_VNODES), 0);
	assert_int_equal(kvs_chash_build(&c, gap, 4, KVS_CHASH_VNODES), 0);
	assert_int_equal(c.npoints, 3 * KVS_CHASH_VNODES);
	for (uint64_t k = 0; k < 2000; k++) {
		int was = kvs_chash_pick(&full, k, load, ok, 100.0);
		int b = kvs_chash_pick(&c, k, load, ok, 100.0);

		assert_true(b >= 0 && b != 1);
		if (was != 1)
			assert_int_equal(b, was);
		else
			moved++;
	}
	assert_true(moved > 300 && moved < 700); /* slot 1 held about a quarter */
	kvs_chash_free(&c);
	kvs_chash_free(&full);
	assert_int_equal(kvs_chash_build(&c, none, 2, KVS_CHASH_VNODES), 0);
	assert_int_equal(kvs_chash_pick(&c, 1, load, ok, 1.25), -1);
	kvs_chash_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(two_instances_agree),
		cmocka_unit_test(load_bound_holds),
		cmocka_unit_test(ineligible_backends_are_skipped),
		cmocka_unit_test(minimal_movement),
		cmocka_unit_test(empty_slots_get_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
