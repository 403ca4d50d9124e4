// SPDX-License-Identifier: MIT
/* The batching engine against hand-computed model times (user/model/model.h;
 * the fleet it models: docs/EVALUATION.md, "The fleet in virtual time"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "engine.h"
#include "kvsplice/hash.h"

/* A function, not a macro: its argument (often a step) is evaluated once. */
static void assert_near(double got, double want)
{
	if (!(got > want - 1e-6 && got < want + 1e-6))
		fail_msg("got %.9f, want %.9f", got, want);
}
#define MAXB 1024

static uint64_t H[8][MAXB];

/* hashes of a prompt: `shared` blocks of family f, then own blocks of s */
static void mkchain(uint64_t *h, uint32_t f, uint32_t shared, uint32_t s, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		h[i] = i < shared ? ((uint64_t)f << 32 | i) + 1 :
				    ((uint64_t)(s + 1000) << 32 | i) + 1;
}

static void mkreq(struct kvs_eng_req *r, uint64_t *h, uint32_t tokens, uint32_t max_tokens)
{
	memset(r, 0, sizeof(*r));
	r->hashes = h;
	r->nblocks = tokens / KVS_BLOCK_TOKENS;
	r->prompt_tokens = tokens;
	r->max_tokens = max_tokens;
}

static void init(struct kvs_engine *e, uint32_t kv_blocks)
{
	struct kvs_model_params m;

	kvs_model_defaults(&m);
	m.kv_blocks = kv_blocks;
	assert_int_equal(kvs_engine_init(e, &m, 0), 0);
}

/* Run steps until r finishes; returns the time it did. */
static double run_until_done(struct kvs_engine *e, struct kvs_eng_req *r, double now)
{
	struct kvs_eng_event *ev;
	uint32_t n;

	while (r->state != KVS_ENG_DONE) {
		double d = kvs_engine_step(e, now, &ev, &n);

		assert_true(d > 0);
		now += d;
	}
	return now;
}

/* 8,000 cold tokens: one chunk, 372.24 ms to the first token (~0.38 s). */
static void cold_prompt(void **state)
{
	struct kvs_engine e;
	struct kvs_eng_req r;
	struct kvs_eng_event *ev;
	uint32_t n;

	(void)state;
	init(&e, 100000);
	mkchain(H[0], 1, 500, 0, 500);
	mkreq(&r, H[0], 8000, 1);
	kvs_engine_submit(&e, &r);
	assert_near(kvs_engine_step(&e, 0, &ev, &n), 372.24);
	assert_int_equal(n, 1);
	assert_true(ev[0].done);
	assert_near(r.first_ms, 372.24);
	assert_int_equal(r.state, KVS_ENG_DONE);
	assert_true(kvs_engine_idle(&e));
	kvs_engine_free(&e);
}

/* The same 6,000-token prefix again with 2,000 new tokens: 105.48 ms. */
static void warm_prompt(void **state)
{
	struct kvs_engine e;
	struct kvs_eng_req a, b;
	struct kvs_eng_event *ev;
	uint32_t n;

	(void)state;
	init(&e, 100000);
	mkchain(H[0], 1, 375, 0, 500);
	mkchain(H[1], 1, 375, 1, 500);
	mkreq(&a, H[0], 8000, 1);
	kvs_engine_submit(&e, &a);
	run_until_done(&e, &a, 0);
	mkreq(&b, H[1], 8000, 1);
	kvs_engine_submit(&e, &b);
	assert_near(kvs_engine_step(&e, 1000, &ev, &n), 105.48);
	assert_int_equal(b.cached_tokens, 6000);
	kvs_engine_free(&e);
}

/* A full hit still computes the last block: cached = prompt - 16. */
static void full_hit_recomputes_last_block(void **state)
{
	struct kvs_engine e;
	struct kvs_eng_req a, b;
	struct kvs_eng_event *ev;
	uint32_t n;

	(void)state;
	init(&e, 100000);
	mkchain(H[0], 1, 100, 0, 100);
	mkreq(&a, H[0], 1600, 1);
	kvs_engine_submit(&e, &a);
	run_until_done(&e, &a, 0);
	mkreq(&b, H[0], 1600, 1);
	kvs_engine_submit(&e, &b);
	/* 16 tokens computed after 1584: 10 + 0.042*16 + 0.82e-6*16*(1584+8) */
	assert_near(kvs_engine_step(&e, 0, &ev, &n), 10 + 0.042 * 16 + 0.82e-6 * 16 * 1592);
	assert_int_equal(b.cached_tokens, 1584);
	kvs_engine_free(&e);
}

/* 10,000 tokens: chunks of 8,192 and 1,808, then decode steps. */
static void chunked_prefill_then_decode(void **state)
{
	struct kvs_engine e;
	struct kvs_eng_req r;
	struct kvs_eng_event *ev;
	uint32_t n;

	(void)state;
	init(&e, 100000);
	mkchain(H[0], 2, 625, 0, 625);
	mkreq(&r, H[0], 10000, 3);
	kvs_engine_submit(&e, &r);
	assert_near(kvs_engine_step(&e, 0, &ev, &n), 10 + 0.042 * 8192 + 0.82e-6 * 8192 * 4096);
	assert_int_equal(n, 0);
	assert_near(kvs_engine_step(&e, 0, &ev, &n),
		    10 + 0.042 * 1808 + 0.82e-6 * 1808 * (8192 + 904));
	assert_int_equal(n, 1); /* the first token */
	/* decode: one token with 10,001 tokens of context */
	assert_near(kvs_engine_step(&e, 0, &ev, &n), 10 + 0.042 + 16e-6 * 10001);
	assert_near(kvs_engine_step(&e, 0, &ev, &n), 10 + 0.042 + 16e-6 * 10002);
	assert_true(n == 1 && ev[0].done);
	assert_near(kvs_engine_step(&e, 0, &ev, &n), 0);
	kvs_engine_free(&e);
}

/* Continuous batching: a decoding request and a new prefill share a step;
 * two prefills share the budget, oldest first. */
static void batching(void **state)
{
	struct kvs_engine e;
	struct kvs_eng_req a, b, c;
	struct kvs_eng_event *ev;
	uint32_t n;

	(void)state;
	init(&e, 100000);
	mkchain(H[0], 3, 0, 0, 100);
	mkchain(H[1], 3, 0, 1, 100);
	mkchain(H[2], 3, 0, 2, 400);
	mkreq(&a, H[0], 1600, 5);
	kvs_engine_submit(&e, &a);
	kvs_engine_step(&e, 0, &ev, &n); /* a prefilled, first token */
	mkreq(&b, H[1], 1600, 2);
	kvs_engine_submit(&e, &b);
	/* a decodes (ctx 1601) while b prefills 1,600 */
	assert_near(kvs_engine_step(&e, 10, &ev, &n),
		    10 + 0.042 * 1601 + 0.82e-6 * 1600 * 800 + 16e-6 * 1601);
	assert_int_equal(n, 2);
	/* c wants 6,400, the budget has 8,192 - 2 decodes = 8,190 left */
	mkreq(&c, H[2], 6400, 1);
	kvs_engine_submit(&e, &c);
	assert_near(kvs_engine_step(&e, 20, &ev, &n),
		    10 + 0.042 * 6402 + 0.82e-6 * 6400 * 3200 + 16e-6 * (1602 + 1601));
	assert_int_equal(c.state, KVS_ENG_DONE);
	kvs_engine_free(&e);
}

/* KV capacity: a request that does not fit waits until blocks free up;
 * blocks of running requests are never evicted; afterwards the oldest
 * unpinned blocks are. */
static void kv_capacity_and_eviction(void **state)
{
	struct kvs_engine e;
	struct kvs_eng_req a, b;
	struct kvs_eng_event *ev;
	uint32_t n;

	(void)state;
	init(&e, 150);
	mkchain(H[0], 4, 0, 0, 100);
	mkchain(H[1], 4, 0, 1, 100);
	mkreq(&a, H[0], 1600, 16); /* 100 blocks + 1 for its generation */
	mkreq(&b, H[1], 1600, 16);
	kvs_engine_submit(&e, &a);
	kvs_engine_submit(&e, &b);
	kvs_engine_step(&e, 0, &ev, &n);
	assert_int_equal(a.state, KVS_ENG_DECODE);
	assert_int_equal(b.state, KVS_ENG_WAITING); /* 101 + 101 > 150 */
	double t = run_until_done(&e, &a, 0);
	assert_int_equal(kvs_pcache_match(&e.cache, H[0], 100), 100);
	run_until_done(&e, &b, t);
	/* b needed room: a's blocks went, tail first */
	assert_true(kvs_pcache_match(&e.cache, H[0], 100) < 100);
	assert_int_equal(kvs_pcache_match(&e.cache, H[1], 100), 100);
	assert_true(e.cache.used <= 150);
	assert_int_equal(e.reserved_blocks, 0);
	kvs_engine_free(&e);
}

/* A block is cached as the step that computes it is planned, as vLLM v1
 * caches a full block at allocate_slots "so that the block can be reused
 * by other requests in the same batch" (docs/design/prefix_caching.md,
 * vllm-project/vllm 01ff8bf): two cold requests for one prompt at once
 * compute it once, the second all but its last block. A waiting request is
 * admitted only while the step has budget left, and meets the cache then. */
static void same_step_blocks_are_hits(void **state)
{
	struct kvs_engine e;
	struct kvs_eng_req a, b;
	struct kvs_eng_event *ev;
	uint32_t n;

	(void)state;
	init(&e, 100000);
	mkchain(H[0], 5, 0, 0, 600);
	mkreq(&a, H[0], 2048, 1);
	mkreq(&b, H[0], 2048, 1);
	kvs_engine_submit(&e, &a);
	kvs_engine_submit(&e, &b);
	kvs_engine_step(&e, 0, &ev, &n);
	assert_int_equal(a.cached_tokens, 0);
	assert_int_equal(b.cached_tokens, 2048 - 16);
	assert_int_equal(n, 2); /* both first tokens from the one step */
	run_until_done(&e, &b, 10);

	/* The first takes the whole budget: the second waits a step, then
	 * finds the first's whole prompt. */
	mkchain(H[1], 6, 0, 1, 600);
	mkreq(&a, H[1], 9600, 1);
	mkreq(&b, H[1], 9600, 1);
	kvs_engine_submit(&e, &a);
	kvs_engine_submit(&e, &b);
	kvs_engine_step(&e, 20, &ev, &n);
	assert_int_equal(a.computed, 8192);
	assert_int_equal(b.state, KVS_ENG_WAITING);
	kvs_engine_step(&e, 30, &ev, &n);
	assert_int_equal(a.computed, 9600);
	assert_int_equal(b.cached_tokens, 9600 - 16);
	kvs_engine_free(&e);
}

/* A request larger than the whole cache can never be admitted; one that
 * fills it exactly can; max_tokens near 2^32 does not wrap the sum. */
static void requests_that_cannot_fit(void **state)
{
	struct kvs_engine e;
	struct kvs_eng_req r;
	uint64_t h[64];

	(void)state;
	init(&e, 100);
	mkchain(h, 1, 0, 1, 64);
	mkreq(&r, h, 1024, 600); /* 64 + 38 blocks */
	assert_int_equal(kvs_engine_blocks_needed(&r), 102);
	assert_false(kvs_engine_fits(&e, &r));
	mkreq(&r, h, 1024, 576); /* exactly 100 */
	assert_true(kvs_engine_fits(&e, &r));
	mkreq(&r, h, 1024, UINT32_MAX - 100);
	assert_false(kvs_engine_fits(&e, &r));
	assert_int_equal(kvs_engine_blocks_needed(&r), (1024ull + UINT32_MAX - 100 + 15) / 16);
	kvs_engine_free(&e);
}

/* A request cancelled anywhere - waiting, part-way through its prefill,
 * decoding with its token of the last step not yet delivered - leaves the
 * engine at once: its reservation returned, its blocks unpinned (those it
 * computed stay cached), its events gone, and the others go on. */
static void cancel_anywhere(void **state)
{
	struct kvs_engine e;
	struct kvs_eng_req a, b, c;
	struct kvs_eng_event *ev;
	uint32_t n;

	(void)state;
	init(&e, 1000);
	mkchain(H[0], 6, 0, 0, 600);
	mkchain(H[1], 6, 0, 1, 600);
	mkchain(H[2], 6, 0, 2, 600);
	mkreq(&a, H[0], 9600, 100); /* 600 blocks + 7: two chunks of prefill */
	mkreq(&b, H[1], 1600, 100);
	mkreq(&c, H[2], 4800, 100); /* does not fit beside a: waits */
	kvs_engine_submit(&e, &a);
	kvs_engine_submit(&e, &b);
	kvs_engine_submit(&e, &c);
	kvs_engine_step(&e, 0, &ev, &n);
	assert_int_equal(a.state, KVS_ENG_PREFILL);
	assert_int_equal(b.state, KVS_ENG_WAITING); /* no budget left to admit it */
	assert_int_equal(c.state, KVS_ENG_WAITING);

	/* A waiting one, the last: out of the queue, nothing else moves. */
	kvs_engine_cancel(&e, &c);
	assert_int_equal(e.nwaiting, 1);
	assert_ptr_equal(e.wait_head, &b);
	assert_ptr_equal(e.wait_tail, &b);
	assert_int_equal(e.nrunning, 1);

	/* The prefilling one: out of the batch, its reservation back, what it
	 * computed cached and unpinned. */
	kvs_engine_cancel(&e, &a);
	assert_int_equal(e.nrunning, 0);
	assert_int_equal(e.reserved_blocks, 0);
	assert_int_equal(e.cache.used, e.cache.evictable); /* nothing pinned */
	assert_int_equal(kvs_pcache_match(&e.cache, H[0], 600), 8192 / 16);

	/* The decoding one, with its first token produced by the last step. */
	kvs_engine_step(&e, 10, &ev, &n);
	assert_int_equal(b.state, KVS_ENG_DECODE);
	assert_int_equal(e.nevents_last, 1);
	kvs_engine_cancel(&e, &b);
	assert_int_equal(e.nevents_last, 0);
	assert_int_equal(e.nrunning, 0);
	assert_int_equal(e.reserved_blocks, 0);
	assert_true(kvs_engine_idle(&e));
	assert_int_equal(kvs_pcache_match(&e.cache, H[1], 100), 100);

	/* The engine goes on: a new request runs to its end. */
	mkreq(&c, H[2], 4800, 2);
	kvs_engine_submit(&e, &c);
	run_until_done(&e, &c, 20);
	assert_int_equal(e.reserved_blocks, 0);
	kvs_engine_free(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cold_prompt),
		cmocka_unit_test(warm_prompt),
		cmocka_unit_test(full_hit_recomputes_last_block),
		cmocka_unit_test(chunked_prefill_then_decode),
		cmocka_unit_test(batching),
		cmocka_unit_test(kv_capacity_and_eviction),
		cmocka_unit_test(same_step_blocks_are_hits),
		cmocka_unit_test(requests_that_cannot_fit),
		cmocka_unit_test(cancel_anywhere),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
