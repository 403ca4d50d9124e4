// SPDX-License-Identifier: MIT
/* CIDR parsing for --allow / --deny: families, prefix lengths, host bits
 * cleared, and everything malformed refused. */
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

static struct sockaddr_storage v4(const char *a)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;

	in->sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, a, &in->sin_addr), 1);
	return ss;
}

static struct sockaddr_storage v6(const char *a)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in6 *in = (struct sockaddr_in6 *)&ss;

	in->sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, a, &in->sin6_addr), 1);
	return ss;
}

/* --front-source: which peers are fronts. */
static void contains(void **state)
{
	const char *text[] = { "10.1.0.0/16", "192.168.7.9", "fd00::/8", "10.1.2.0/24" };
	const struct {
		const char *addr;
		int in;
	} peers[] = {
		{ "10.1.200.3", 1 },	  { "10.2.0.1", 0 }, { "192.168.7.9", 1 },
		{ "192.168.7.8", 0 },	  { "fd12::1", 1 },  { "fe80::1", 0 },
		{ "::ffff:10.1.0.1", 1 }, /* a dual-stack listener's IPv4 client */
	};
	struct kvs_cidr list[4];
	struct sockaddr_storage ss;
	int i;

	(void)state;
	for (i = 0; i < 4; i++)
		assert_int_equal(kvs_cidr_parse(text[i], &list[i].family, list[i].addr,
						&list[i].prefixlen),
				 0);
	for (i = 0; i < (int)(sizeof(peers) / sizeof(peers[0])); i++) {
		ss = strchr(peers[i].addr, ':') ? v6(peers[i].addr) : v4(peers[i].addr);
		if (kvs_cidr_contains(list, 4, &ss) != peers[i].in)
			fail_msg("%s: want %d", peers[i].addr, peers[i].in);
	}
	ss = v4("10.1.0.1");
	assert_int_equal(kvs_cidr_contains(list, 0, &ss), 0);
	{
		struct kvs_cidr all[1];

		assert_int_equal(kvs_cidr_parse("0.0.0.0/0", &all[0].family, all[0].addr,
						&all[0].prefixlen),
				 0);

		ss = v4("8.8.8.8");
		assert_int_equal(kvs_cidr_contains(all, 1, &ss), 1);
		ss = v6("::1");
		assert_int_equal(kvs_cidr_contains(all, 1, &ss), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parses),
		cmocka_unit_test(refuses),
		cmocka_unit_test(contains),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
