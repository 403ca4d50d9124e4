// SPDX-License-Identifier: MIT
/* CIDR parsing for --allow / --deny: families, prefix lengths, host bits
 * cleared, and everything malformed refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>

#include "netutil.h"

static void parses(void **state)
{
	uint8_t a[16];
	uint32_t len;
	int fam;

	(void)state;
	assert_int_equal(kvs_cidr_parse("10.1.2.3/8", &fam, a, &len), 0);
	assert_int_equal(fam, 4);
	assert_int_equal(len, 8);
	assert_int_equal(a[0], 10);
	assert_int_equal(a[1] | a[2] | a[3], 0); /* host bits cleared */
	assert_int_equal(kvs_cidr_parse("192.168.7.9", &fam, a, &len), 0);
	assert_int_equal(len, 32);
	assert_int_equal(a[3], 9);
	assert_int_equal(kvs_cidr_parse("10.0.0.255/25", &fam, a, &len), 0);
	assert_int_equal(a[3], 0x80);
	assert_int_equal(kvs_cidr_parse("0.0.0.0/0", &fam, a, &len), 0);
	assert_int_equal(len, 0);
	assert_int_equal(kvs_cidr_parse("2001:db8::ff/32", &fam, a, &len), 0);
	assert_int_equal(fam, 6);
	assert_int_equal(len, 32);
	assert_int_equal(a[0], 0x20);
	assert_int_equal(a[3], 0xb8);
	assert_int_equal(a[15], 0);
	assert_int_equal(kvs_cidr_parse("::1", &fam, a, &len), 0);
	assert_int_equal(len, 128);
	assert_int_equal(a[15], 1);
}

static void refuses(void **state)
{
	static const char *const bad[] = {
		"",
		"10.0.0.0/33",
		"10.0.0.0/",
		"10.0.0.0/-1",
		"10.0.0.0/+8",
		"10.0.0.0/8x",
		"10.0.0/8",
		"host.example",
		"::1/129",
		"1.2.3.4/8/9",
		NULL,
	};
	uint8_t a[16];
	uint32_t len;
	int fam;

	(void)state;
	for (int i = 0; i < (int)(sizeof(bad) / sizeof(bad[0])); i++)
		if (kvs_cidr_parse(bad[i], &fam, a, &len) != -EINVAL)
			fail_msg("accepted '%s'", bad[i] ? bad[i] : "(null)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parses),
		cmocka_unit_test(refuses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
