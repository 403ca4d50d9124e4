// SPDX-License-Identifier: MIT
/* --tenant-source CIDR=SALT: parsed strictly, and a client's address finds
 * the first tenant whose CIDR holds it (map index from 1; 0: none). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "tenant.h"

static struct sockaddr_storage v4(const char *a)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s = (struct sockaddr_in *)&ss;

	s->sin_family = AF_INET;
	inet_pton(AF_INET, a, &s->sin_addr);
	return ss;
}

static void parses(void **state)
{
	struct kvs_cidr n;
	uint64_t salt;

	(void)state;
	assert_int_equal(gw_tenant_parse("10.1.0.0/16=7", &n, &salt), 0);
	assert_int_equal(n.family, 4);
	assert_int_equal(n.prefixlen, 16);
	assert_true(salt == 7);
	assert_int_equal(gw_tenant_parse("2001:db8::/32=0x2a", &n, &salt), 0);
	assert_int_equal(n.family, 6);
	assert_true(salt == 0x2a);
	assert_int_equal(gw_tenant_parse("127.0.0.2=18446744073709551615", &n, &salt), 0);
	assert_true(salt == UINT64_MAX);
	assert_int_equal(gw_tenant_parse("127.0.0.2=0", &n, &salt), 0); /* the shared domain */
	assert_true(salt == 0);
}

static void refuses(void **state)
{
	static const char *const bad[] = {
		"10.0.0.0/8",			   /* no salt */
		"10.0.0.0/8=",			   /* empty salt */
		"=5",				   /* no CIDR */
		"10.0.0.0/33=5",		   /* not a CIDR */
		"10.0.0.0/8=five",		   /* not a number */
		"10.0.0.0/8=5x",		   /* trailing junk */
		"10.0.0.0/8=-1",		   /* negative, which strtoull would wrap */
		"10.0.0.0/8=18446744073709551616", /* 2^64 */
	};
	struct kvs_cidr n;
	uint64_t salt;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(gw_tenant_parse(bad[i], &n, &salt), -EINVAL);
}

static void matches(void **state)
{
	static const char *const src[] = { "10.1.2.0/24=1", "10.1.0.0/16=2", "127.0.0.3=3" };
	static struct gw_tenants t; /* (large) */
	struct sockaddr_storage ss;

	(void)state;
	assert_int_equal(gw_tenants_init(&t, src, 3), 0);
	ss = v4("10.1.2.9");
	assert_int_equal(gw_tenant_of(&t, &ss), 1); /* the first that holds it */
	assert_true(gw_tenant_salt(&t, 1) == 1);
	ss = v4("10.1.9.9");
	assert_int_equal(gw_tenant_of(&t, &ss), 2);
	ss = v4("127.0.0.3");
	assert_int_equal(gw_tenant_of(&t, &ss), 3);
	assert_true(gw_tenant_salt(&t, 3) == 3);
	ss = v4("127.0.0.1");
	assert_int_equal(gw_tenant_of(&t, &ss), 0);
	assert_int_equal(gw_tenants_init(&t, src, GW_MAX_TENANTS + 1), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parses),
		cmocka_unit_test(refuses),
		cmocka_unit_test(matches),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
