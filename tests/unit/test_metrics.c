// SPDX-License-Identifier: MIT
/*
 * The Prometheus exposition (user/kvspliced/metrics.c) on known inputs:
 * the backends' first-token histogram is cumulative, its +Inf bucket and
 * count agree, its sum and parts are in seconds, a removed slot has no
 * series; and the kernel's bucket of a time (include/kvsplice/maps.h,
 * kvs_ttft_bucket) agrees with the bounds the exposition prints.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "metrics.h"

static void ttft_bucket_edges(void **state)
{
	uint32_t i;

	(void)state;
	assert_int_equal(kvs_ttft_bucket(1), 0);
	for (i = 0; i < KVS_TTFT_BUCKETS - 1; i++) {
		assert_int_equal(kvs_ttft_bucket(kvs_ttft_bounds_us[i]), i);
		assert_int_equal(kvs_ttft_bucket(kvs_ttft_bounds_us[i] + 1), i + 1);
	}
	assert_int_equal(kvs_ttft_bucket(0), 0);
	assert_int_equal(kvs_ttft_bucket(UINT32_MAX * 2ull), KVS_TTFT_BUCKETS - 1);
}

/* The value of the sample line that starts with name (labels included). */
static const char *sample(const char *text, const char *name)
{
	static char line[256];
	const char *p = text;
	size_t n = strlen(name);

	while ((p = strstr(p, name))) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ') {
			size_t len = strcspn(p + n + 1, "\n");

			snprintf(line, sizeof(line), "%.*s", (int)len, p + n + 1);
			return line;
		}
		p += n;
	}
	return NULL;
}

/* The value of backend's bucket le. */
static const char *bucket(const char *text, const char *backend, const char *le)
{
	char name[160];

	snprintf(name, sizeof(name),
		 "kvsplice_backend_ttft_seconds_bucket{backend=\"%s\",le=\"%s\"}", backend, le);
	return sample(text, name);
}

static void ttft_histogram(void **state)
{
	struct kvs_stats k = { 0 };
	struct kvs_ctl_stats c = { 0 };
	struct kvs_decide_hist d = { 0 };
	struct kvs_backend be[3] = { { 0 } };
	struct kvs_ttft t[3] = { { 0 } };
	const char *names[3] = { "10.0.0.1:8000", NULL, "10.0.0.3:8000" };
	struct kvs_metrics_in in = {
		.k = &k,
		.c = &c,
		.be = be,
		.ttft = t,
		.names = names,
		.nbackends = 3,
		.routes = -1,
		.decide = &d,
		.open_fds = -1,
		.max_fds = -1,
	};
	static char buf[1 << 16];

	(void)state;
	/* backend 0: 3 requests of 4 ms, 30 ms, 2 min; backend 2: none */
	t[0].bucket[kvs_ttft_bucket(4000)]++;
	t[0].bucket[kvs_ttft_bucket(30000)]++;
	t[0].bucket[kvs_ttft_bucket(120000000)]++;
	t[0].count = 3;
	t[0].queue_us = 1000 + 20000 + 119000000;
	t[0].prefill_us = 3000 + 10000 + 1000000;
	t[1].count = 7; /* a removed slot's leftovers: not shown */
	assert_true(kvs_metrics_render(buf, sizeof(buf), &in) < sizeof(buf));
	/* vLLM's bounds: 4 ms in le 0.005, 30 ms in 0.04, 2 min in 160 */
	assert_string_equal(bucket(buf, "10.0.0.1:8000", "0.001"), "0");
	assert_string_equal(bucket(buf, "10.0.0.1:8000", "0.005"), "1");
	assert_string_equal(bucket(buf, "10.0.0.1:8000", "0.02"), "1");
	assert_string_equal(bucket(buf, "10.0.0.1:8000", "0.04"), "2");
	assert_string_equal(bucket(buf, "10.0.0.1:8000", "80"), "2");
	assert_string_equal(bucket(buf, "10.0.0.1:8000", "160"), "3");
	assert_string_equal(bucket(buf, "10.0.0.1:8000", "2560"), "3");
	assert_string_equal(bucket(buf, "10.0.0.1:8000", "+Inf"), "3");
	assert_string_equal(
		sample(buf, "kvsplice_backend_ttft_seconds_count{backend=\"10.0.0.1:8000\"}"), "3");
	assert_string_equal(sample(buf,
				   "kvsplice_backend_ttft_seconds_sum{backend=\"10.0.0.1:8000\"}"),
			    "120.034000");
	assert_string_equal(
		sample(buf, "kvsplice_backend_queue_seconds_total{backend=\"10.0.0.1:8000\"}"),
		"119.021000");
	assert_string_equal(
		sample(buf, "kvsplice_backend_prefill_seconds_total{backend=\"10.0.0.1:8000\"}"),
		"1.013000");
	assert_string_equal(bucket(buf, "10.0.0.3:8000", "+Inf"), "0");
	assert_null(strstr(buf, "backend=\"(null)\""));
	assert_non_null(strstr(buf, "# TYPE kvsplice_backend_ttft_seconds histogram\n"));
	/* 22 bounds and +Inf, for each of the two backends present */
	{
		const char *p = buf;
		int n = 0;

		while ((p = strstr(p, "kvsplice_backend_ttft_seconds_bucket{"))) {
			n++;
			p++;
		}
		assert_int_equal(n, 2 * KVS_TTFT_BUCKETS);
	}
	/* without the map (no ttft given): no series at all */
	in.ttft = NULL;
	kvs_metrics_render(buf, sizeof(buf), &in);
	assert_null(strstr(buf, "kvsplice_backend_ttft_seconds"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ttft_bucket_edges),
		cmocka_unit_test(ttft_histogram),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
