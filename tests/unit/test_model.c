// SPDX-License-Identifier: MIT
/* The timing model against hand-computed cases (the step model of
 * docs/EVALUATION.md, "The fleet in virtual time"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kvsplice/hash.h"
#include "model.h"

#define assert_near(a, b, eps) assert_true((a) > (b) - (eps) && (a) < (b) + (eps))

/* 8,000 tokens, nothing cached, one chunk under the 8,192 budget:
 * 10 + 0.042 * 8000 + 0.82e-6 * 8000 * (0 + 4000) = 372.24 ms (~0.38 s). */
static void cold_8000(void **state)
{
	struct kvs_model_params p;

	(void)state;
	kvs_model_defaults(&p);
	assert_near(kvs_model_prefill_ms(&p, 0, 8000), 372.24, 0.01);
}

/* 6,000 cached, 2,000 to compute:
 * 10 + 0.042 * 2000 + 0.82e-6 * 2000 * (6000 + 1000) = 105.48 ms (~0.1 s). */
static void warm_6000_of_8000(void **state)
{
	struct kvs_model_params p;

	(void)state;
	kvs_model_defaults(&p);
	assert_near(kvs_model_prefill_ms(&p, 6000, 2000), 105.48, 0.01);
}

/* 10,000 tokens are two chunks under the 8,192 budget:
 * 10 + 0.042*8192 + 0.82e-6*8192*4096 = 381.579...
 * 10 + 0.042*1808 + 0.82e-6*1808*(8192 + 904) = 99.421... */
static void chunked_prefill(void **state)
{
	struct kvs_model_params p;
	double first = 10 + 0.042 * 8192 + 0.82e-6 * 8192 * 4096;
	double second = 10 + 0.042 * 1808 + 0.82e-6 * 1808 * (8192 + 904);

	(void)state;
	kvs_model_defaults(&p);
	assert_near(kvs_model_prefill_ms(&p, 0, 10000), first + second, 1e-6);
	p.step_tokens = 20000; /* one chunk: less fixed cost, more attention */
	assert_near(kvs_model_prefill_ms(&p, 0, 10000), 10 + 0.042 * 10000 + 0.82e-6 * 10000 * 5000,
		    1e-6);
}

/* A decode step of one sequence with 8,000 tokens of context:
 * 10 + 0.042 + 16e-6 * 8000 = 10.17 ms. */
static void decode_step(void **state)
{
	struct kvs_model_params p;

	(void)state;
	kvs_model_defaults(&p);
	assert_near(kvs_model_decode_step_ms(&p, 8000), 10.17, 1e-9);
	assert_near(kvs_model_step_ms(&p, 3, 0, 100), 10 + 0.126 + 0.0016, 1e-9);
}

static void tokens_of_bytes(void **state)
{
	(void)state;
	assert_int_equal(kvs_prompt_tokens(0), 0);
	assert_int_equal(kvs_prompt_tokens(1), 1);
	assert_int_equal(kvs_prompt_tokens(4), 1);
	assert_int_equal(kvs_prompt_tokens(5), 2);
	assert_int_equal(kvs_prompt_tokens(32000), 8000);
}

static void defaults_are_the_brief(void **state)
{
	struct kvs_model_params p;

	(void)state;
	kvs_model_defaults(&p);
	assert_int_equal(p.step_tokens, 8192);
	/* ~1.3 M tokens of KV cache in 16-token blocks */
	assert_int_equal(p.kv_blocks * 16, 1300000);
	assert_near(kvs_model_prefill_ms(&p, 0, 0), 0, 1e-12);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cold_8000),	   cmocka_unit_test(warm_6000_of_8000),
		cmocka_unit_test(chunked_prefill), cmocka_unit_test(decode_step),
		cmocka_unit_test(tokens_of_bytes), cmocka_unit_test(defaults_are_the_brief),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
