// SPDX-License-Identifier: MIT
/*
 * The simulator's re-implementations of other routers
 * (tools/kvsplice-bench/sim_baselines.c): each follows its upstream rule.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "engine.h"
#include "sim_baselines.h"
#include "sim_sgltree.h"

#define NB 4
#define BLOCKS 32 /* blocks in a test prompt */

static struct sim_opts opts(void)
{
	return (struct sim_opts){ .backends = NB, .kv_blocks = 4096, .seed = 1 };
}

/* Prompt k's blocks: hashes no other prompt shares; the first shared
 * blocks of prompts 1000 + j are prompt 1000's. */
static void prompt(struct kvs_eng_req *r, uint64_t *h, uint64_t k, uint32_t shared, uint64_t id)
{
	for (uint32_t i = 0; i < BLOCKS; i++)
		h[i] = (i < shared ? 1000 : k) * 1000003ull + i + 1;
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->hashes = h;
	r->nblocks = BLOCKS;
	r->prompt_tokens = BLOCKS * KVS_BLOCK_TOKENS;
	r->max_tokens = 4;
}

static void loads(struct sim_bview *v, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	uint64_t l[NB] = { a, b, c, d };

	for (int i = 0; i < NB; i++)
		v[i].outstanding = l[i];
}

/* With full trees and nothing matched, the least loaded worker gets the
 * prompt (sgl-model-gateway), not the smallest tree nor worker 0. */
static void test_sglang_unmatched_least_loaded(void **state)
{
	struct sim_opts o = opts();
	struct sim_baseline *s = sim_baseline_new(P_SGLANG, &o);
	struct sim_bview v[NB] = { 0 };
	struct kvs_eng_req r;
	uint64_t h[BLOCKS];
	uint32_t got[NB] = { 0 };

	(void)state;
	assert_non_null(s);
	for (uint32_t k = 0; k < 400; k++) {
		uint32_t want = k % NB;

		loads(v, 5, 5, 5, 5);
		v[want].outstanding = 2;
		prompt(&r, h, k, 0, k);
		assert_int_equal(sim_baseline_pick(s, v, NB, &r, k), want);
		got[want]++;
	}
	for (int b = 0; b < NB; b++)
		assert_int_equal(got[b], 100);
	loads(v, 3, 3, 3, 3); /* equals: the first, as Rust's min_by_key */
	prompt(&r, h, 999, 0, 999);
	assert_int_equal(sim_baseline_pick(s, v, NB, &r, 500), 0);
	sim_baseline_free(s);
}

/* A match over 30% of the prompt goes to the worker the tree names, a
 * smaller one to the least loaded; imbalance overrides both. */
static void test_sglang_match_threshold_imbalance(void **state)
{
	struct sim_opts o = opts();
	struct sim_baseline *s = sim_baseline_new(P_SGLANG, &o);
	struct sim_bview v[NB] = { 0 };
	struct kvs_eng_req r;
	uint64_t h[BLOCKS];

	(void)state;
	assert_non_null(s);
	loads(v, 4, 4, 0, 4);
	prompt(&r, h, 1000, BLOCKS, 1);
	assert_int_equal(sim_baseline_pick(s, v, NB, &r, 0), 2);
	loads(v, 1, 2, 9, 3);
	prompt(&r, h, 1001, BLOCKS / 2, 2); /* half matched */
	assert_int_equal(sim_baseline_pick(s, v, NB, &r, 1), 2);
	prompt(&r, h, 1002, BLOCKS / 4, 3); /* a quarter: under 0.3 */
	assert_int_equal(sim_baseline_pick(s, v, NB, &r, 2), 0);
	loads(v, 10, 80, 70, 75); /* 80 - 10 > 64 and 80 > 1.5 x 10 */
	prompt(&r, h, 1000, BLOCKS, 4);
	assert_int_equal(sim_baseline_pick(s, v, NB, &r, 3), 0);
	sim_baseline_free(s);
}

/* Eviction takes a tenant's least recently used leaves until it fits,
 * and leaves the other tenants alone. */
static void test_sgltree_evicts_lru(void **state)
{
	struct sim_sgltree t;
	uint64_t a[10], b[10];
	int te;

	(void)state;
	assert_int_equal(sim_sgltree_init(&t, 2), 0);
	for (int i = 0; i < 10; i++) {
		a[i] = 100 + i;
		b[i] = 200 + i;
	}
	assert_int_equal(sim_sgltree_insert(&t, a, 10, 0), 0);
	assert_int_equal(sim_sgltree_insert(&t, a, 10, 1), 0);
	assert_int_equal(sim_sgltree_insert(&t, b, 10, 0), 0);
	assert_int_equal(sim_sgltree_evict(&t, 12), 0);
	assert_int_equal(t.size[0], 12);
	assert_int_equal(t.size[1], 10);
	assert_int_equal(sim_sgltree_match(&t, b, 10, &te), 10);
	assert_int_equal(te, 0);
	/* a's deep blocks only tenant 1 still holds */
	assert_int_equal(sim_sgltree_match(&t, a, 10, &te), 10);
	assert_int_equal(te, 1);
	sim_sgltree_free(&t);
}

static void run_to_done(struct kvs_engine *e, struct kvs_eng_req *r)
{
	struct kvs_eng_event *ev;
	uint32_t n;
	double now = 0;

	kvs_engine_submit(e, r);
	while (r->state != KVS_ENG_DONE)
		now += kvs_engine_step(e, now, &ev, &n);
}

/* llm-d and dynamo read the engines' caches: the worker holding the
 * prompt wins; among equals, llm-d's picks spread. */
static void test_cache_readers(void **state)
{
	struct kvs_engine e[NB];
	struct kvs_model_params m;
	struct sim_bview v[NB];
	struct sim_opts o = opts();
	struct kvs_eng_req r, warm;
	uint64_t h[BLOCKS], hw[BLOCKS];
	uint32_t seen = 0;

	(void)state;
	kvs_model_defaults(&m);
	m.kv_blocks = o.kv_blocks;
	for (int b = 0; b < NB; b++) {
		assert_int_equal(kvs_engine_init(&e[b], &m, 0), 0);
		v[b] = (struct sim_bview){ .eng = &e[b] };
	}
	for (enum pol p = P_LLMD; p <= P_DYNAMO; p++) {
		struct sim_baseline *s = sim_baseline_new(p, &o);

		assert_non_null(s);
		for (uint64_t k = 0; p == P_LLMD && k < 64; k++) {
			prompt(&r, h, k, 0, k);
			seen |= 1u << sim_baseline_pick(s, v, NB, &r, 0);
		}
		sim_baseline_free(s);
	}
	assert_true(__builtin_popcount(seen) > 1);
	prompt(&warm, hw, 7, 0, 100);
	run_to_done(&e[2], &warm);
	for (enum pol p = P_LLMD; p <= P_DYNAMO; p++) {
		struct sim_baseline *s = sim_baseline_new(p, &o);

		prompt(&r, h, 7, 0, 101);
		assert_int_equal(sim_baseline_pick(s, v, NB, &r, 0), 2);
		sim_baseline_free(s);
	}
	for (int b = 0; b < NB; b++)
		kvs_engine_free(&e[b]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sglang_unmatched_least_loaded),
		cmocka_unit_test(test_sglang_match_threshold_imbalance),
		cmocka_unit_test(test_sgltree_evicts_lru),
		cmocka_unit_test(test_cache_readers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
