// SPDX-License-Identifier: MIT
/* --tenant-routes: the shares sized to fit the routes map less a reserve
 * per CPU (so that its LRU never evicts), refused when they cannot; a
 * tenant's routes trimmed least useful first (never hit, then oldest). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>

#include "route_shares.h"

static void sized(void **state)
{
	uint64_t per, room;

	(void)state;
	/* auto: the room (capacity less 256 a CPU) split among n + 1 */
	assert_int_equal(gw_shares_size(3, GW_TENANT_ROUTES_AUTO, 262144, 2, &per, &room), 0);
	assert_true(room == 262144 - 512);
	assert_true(per == (262144 - 512) / 4);
	assert_true(per * 4 <= room);
	/* a number that fits, and one that does not */
	assert_int_equal(gw_shares_size(3, 1000, 262144, 2, &per, &room), 0);
	assert_true(per == 1000);
	assert_int_equal(gw_shares_size(3, 65409, 262144, 2, &per, &room), -ENOSPC);
	assert_int_equal(gw_shares_size(3, 65408, 262144, 2, &per, &room), 0);
	/* many CPUs take their reserve out of the room */
	assert_int_equal(gw_shares_size(1, GW_TENANT_ROUTES_AUTO, 262144, 1024, &per, &room),
			 -ENOSPC);
	assert_true(room == 0);
	assert_int_equal(gw_shares_size(1, GW_TENANT_ROUTES_AUTO, 262144, 512, &per, &room), 0);
	assert_true(per == (262144 - 131072) / 2);
	/* off, or no tenant bound: no shares */
	assert_int_equal(gw_shares_size(3, 0, 262144, 2, &per, &room), 0);
	assert_true(per == 0);
	assert_int_equal(gw_shares_size(0, GW_TENANT_ROUTES_AUTO, 262144, 2, &per, &room), 0);
	assert_true(per == 0);
	/* the most tenants, the fewest CPUs */
	assert_int_equal(gw_shares_size(255, GW_TENANT_ROUTES_AUTO, 262144, 0, &per, &room), 0);
	assert_true(per == (262144 - 256) / 256);
}

static void ordered(void **state)
{
	struct gw_share_route v[] = {
		{ .hash = 1, .hits = 5, .installed_ns = 10, .tenant = 2 },
		{ .hash = 2, .hits = 0, .installed_ns = 30, .tenant = 2 },
		{ .hash = 3, .hits = 0, .installed_ns = 20, .tenant = 2 },
		{ .hash = 4, .hits = 1, .installed_ns = 5, .tenant = 2 },
		{ .hash = 5, .hits = 0, .installed_ns = 1, .tenant = 1 },
	};
	static const uint64_t want[] = { 5, 3, 2, 4, 1 };

	(void)state;
	gw_shares_order(v, sizeof(v) / sizeof(v[0]));
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		assert_true(v[i].hash == want[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sized),
		cmocka_unit_test(ordered),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
