// SPDX-License-Identifier: MIT
/*
 * Per-source connection counts (user/core/sources.c, for kvspliced's and
 * kvsplice-http's --max-source-conns): IPv4 by address, IPv6 by /64, an IPv4-mapped peer
 * as its IPv4 address; counts stay exact through any order of adds and
 * removals (the table moves entries back on removal, and grows).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sources.h"

static struct kvs_source_key key_of(const char *ip)
{
	struct sockaddr_storage ss = { 0 };
	struct kvs_source_key k;

	if (strchr(ip, ':')) {
		struct sockaddr_in6 *a = (void *)&ss;

		a->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, ip, &a->sin6_addr), 1);
	} else {
		struct sockaddr_in *a = (void *)&ss;

		a->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, ip, &a->sin_addr), 1);
	}
	assert_true(kvs_source_of(&ss, &k));
	return k;
}

static void what_a_source_is(void **state)
{
	struct kvs_source_key a = key_of("10.1.2.3"), b = key_of("::ffff:10.1.2.3"),
			      c = key_of("10.1.2.4"), d = key_of("2001:db8:1:2::1"),
			      e = key_of("2001:db8:1:2:ffff::9"), f = key_of("2001:db8:1:3::1"),
			      g = key_of("::a01:203"); /* 10.1.2.3's bytes, not mapped */
	struct sockaddr_storage un = { .ss_family = AF_UNIX };

	(void)state;
	assert_memory_equal(&a, &b, sizeof(a));
	assert_memory_not_equal(&a, &c, sizeof(a));
	assert_memory_equal(&d, &e, sizeof(d));
	assert_memory_not_equal(&d, &f, sizeof(d));
	assert_memory_not_equal(&a, &g, sizeof(a));
	assert_false(kvs_source_of(&un, &a));
}

static void counts_up_and_down(void **state)
{
	struct kvs_sources s = { 0 };
	struct kvs_source_key a = key_of("127.0.0.1"), b = key_of("127.0.0.2");

	(void)state;
	assert_int_equal(kvs_sources_count(&s, &a), 0);
	kvs_sources_del(&s, &a); /* on an empty table: nothing */
	for (int i = 1; i <= 3; i++)
		assert_int_equal(kvs_sources_add(&s, &a), i);
	assert_int_equal(kvs_sources_add(&s, &b), 1);
	assert_int_equal(s.n, 2);
	kvs_sources_del(&s, &a);
	assert_int_equal(kvs_sources_count(&s, &a), 2);
	kvs_sources_del(&s, &a);
	kvs_sources_del(&s, &a);
	assert_int_equal(kvs_sources_count(&s, &a), 0);
	assert_int_equal(kvs_sources_count(&s, &b), 1);
	assert_int_equal(s.n, 1);
	kvs_sources_free(&s);
}

/* Many sources, added and removed in a scrambled order, against plain
 * counters: every count right after every step (collisions, wrap-around
 * and growth all happen at this size). */
static void exact_under_churn(void **state)
{
	enum { N = 3000, STEPS = 200000 };
	static uint32_t want[N];
	struct kvs_sources s = { 0 };
	uint64_t x = 88172645463325252ull;
	uint32_t live = 0;

	(void)state;
	for (int step = 0; step < STEPS; step++) {
		struct kvs_source_key k = { 0 };
		uint32_t i;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = (uint32_t)(x % N);
		k.b[0] = 4;
		memcpy(k.b + 12, &i, 4);
		if (want[i] && (x >> 40) % 2) {
			kvs_sources_del(&s, &k);
			live -= --want[i] == 0;
		} else {
			live += want[i] == 0;
			assert_int_equal(kvs_sources_add(&s, &k), ++want[i]);
		}
		assert_int_equal(s.n, live);
		if (step % 997 == 0) {
			for (uint32_t j = 0; j < N; j++) {
				memcpy(k.b + 12, &j, 4);
				assert_int_equal(kvs_sources_count(&s, &k), want[j]);
			}
		}
	}
	kvs_sources_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(what_a_source_is),
		cmocka_unit_test(counts_up_and_down),
		cmocka_unit_test(exact_under_churn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
