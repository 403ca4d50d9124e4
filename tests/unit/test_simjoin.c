// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench sim --join-at (tools/kvsplice-bench/sim_fleet.c): the last
 * backend serves nothing that arrived before it joined, every policy may
 * send it work after, and the before / after figures add up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "model.h"
#include "policy.h"
#include "sim_int.h"

#define NB 3

/* A small fleet on the default workload: 900 requests at 14/s, the
 * newcomer joining 30 s in (about 420 requests before). */
static struct sim_opts opts(int newcomer)
{
	struct sim_opts o = sim_defaults;

	o.backends = NB;
	o.kv_blocks = 20000;
	o.requests = 900;
	o.seed = 3;
	o.join_at_s = 30;
	o.newcomer = newcomer;
	o.json = 1; /* no progress lines */

	o.contexts =
		(uint32_t)(o.occupancy * NB * o.kv_blocks * KVS_BLOCK_TOKENS / o.context_tokens);
	return o;
}

static void run(const struct sim_opts *o, enum pol p, struct result *res)
{
	struct workload w;

	memset(res, 0, sizeof(*res));
	assert_int_equal(sim_make_workload(o, &w), 0);
	sim_run_policy(o, &w, p, res);
	assert_int_equal(res->done, w.n);
	assert_int_equal(res->join.before + res->join.after, w.n);
	/* the figures stay; the per-request arrays go (freed one by one
	 * they leaked as the result grew them) */
	sim_free_result(res);
	res->ttft = NULL;
	memset(&res->anat, 0, sizeof(res->anat));
	sim_free_workload(&w);
}

/* What the newcomer served is exactly its share of the requests after the
 * join: nothing from before. */
static void check_nothing_before(const struct result *r)
{
	assert_true(r->join.before > 300 && r->join.after > 300);
	assert_int_equal((uint32_t)r->loads[NB - 1],
			 (uint32_t)(r->join.share * r->join.after + 0.5));
}

static void test_join_every_policy(void **state)
{
	static const enum pol pols[] = { P_RR,	 P_LOR,	   P_CHASH,   P_SGLANG,
					 P_LLMD, P_DYNAMO, P_KVSPLICE };
	struct sim_opts o = opts(J_JOINS);
	struct result r;

	(void)state;
	for (size_t i = 0; i < sizeof(pols) / sizeof(pols[0]); i++) {
		run(&o, pols[i], &r);
		check_nothing_before(&r);
		assert_true(r.join.share <= 1.0);
	}
}

/* Round robin gives the newcomer its turn at once: a third after. */
static void test_join_rr_fair(void **state)
{
	struct sim_opts o = opts(J_JOINS);
	struct result r;

	(void)state;
	run(&o, P_RR, &r);
	assert_true(r.join.share > 0.33 && r.join.share < 0.34);
}

/* kvsplice places new prefixes on it: it takes work soon after joining. */
static void test_join_kvsplice_takes_work(void **state)
{
	struct sim_opts o = opts(J_JOINS);
	struct result r;

	(void)state;
	run(&o, P_KVSPLICE, &r);
	assert_true(r.join.share_60 > 0.05);
	assert_true(r.join.work_share > 0.05);
}

/* never: the fleet without it; always: with it from the start, serving
 * before and after alike. */
static void test_newcomer_never_always(void **state)
{
	struct sim_opts o = opts(J_NEVER);
	struct result r;

	(void)state;
	run(&o, P_KVSPLICE, &r);
	assert_int_equal((uint32_t)r.loads[NB - 1], 0);
	assert_true(r.join.share == 0);
	o = opts(J_ALWAYS);
	run(&o, P_RR, &r);
	assert_true(r.loads[NB - 1] > r.join.share * r.join.after + 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join_every_policy),
		cmocka_unit_test(test_join_rr_fair),
		cmocka_unit_test(test_join_kvsplice_takes_work),
		cmocka_unit_test(test_newcomer_never_always),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
