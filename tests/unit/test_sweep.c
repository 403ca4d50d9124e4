// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench sim --sweep (tools/kvsplice-bench/sim_sweep.c): the
 * verdict's tolerance (2% or 5 ms, whichever is larger), the served
 * fraction, and round robin's knee on a tiny fleet: just under it rr
 * serves what is offered, just over it does not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <malloc.h>
#include <math.h>

#include "sim_int.h"
#include "sim_sweep.h"

static void test_verdict(void **state)
{
	/* kvsplice is index 2 */
	double gap, best[] = { 500, 400, 390 }, tied_pct[] = { 1000, 500, 509 },
		    tied_ms[] = { 100, 100, 104 }, loses[] = { 1000, 500, 511 },
		    loses_ms[] = { 100, 100, 106 }, alone[] = { 7 };

	(void)state;
	assert_int_equal(sim_sweep_verdict(best, 3, 2, 2, 5, &gap), SV_BEST);
	assert_true(gap < -2.4 && gap > -2.6);
	/* 2% of 500 is 10 ms, more than 5: 509 ties, 511 loses */
	assert_int_equal(sim_sweep_verdict(tied_pct, 3, 2, 2, 5, &gap), SV_TIED);
	assert_int_equal(sim_sweep_verdict(loses, 3, 2, 2, 5, &gap), SV_LOSES);
	assert_true(gap > 2.1 && gap < 2.3);
	/* 2% of 100 is 2 ms, less than 5: 104 ties, 106 loses */
	assert_int_equal(sim_sweep_verdict(tied_ms, 3, 2, 2, 5, &gap), SV_TIED);
	assert_int_equal(sim_sweep_verdict(loses_ms, 3, 2, 2, 5, &gap), SV_LOSES);
	/* an equal figure is best; no kvsplice, no verdict */
	assert_int_equal(sim_sweep_verdict(tied_ms, 2, 1, 2, 5, &gap), SV_BEST);
	assert_int_equal(sim_sweep_verdict(best, 3, -1, 2, 5, &gap), SV_NONE);
	assert_int_equal(sim_sweep_verdict(alone, 1, 0, 2, 5, &gap), SV_BEST);
}

static void test_served(void **state)
{
	double arr[] = { 0, 1000, 2000, 3000, 4000 };
	struct workload w = { .n = 5, .arrival_ms = arr };
	/* every request served, the last ending 1 s after the last arrival */
	struct result r = { .done = 5, .rps = 5 / 5.0 };

	(void)state;
	assert_true(sim_served(&w, &r) > 0.79 && sim_served(&w, &r) < 0.81);
	r.rps = 5 / 4.0; /* ending with the last arrival */
	assert_true(sim_served(&w, &r) > 0.999);
}

/* A tiny fleet: 2 backends, nothing shared, 2,000 requests: a run long
 * enough that only a growing queue, not its last request, costs 3%. */
static struct sim_opts tiny(void)
{
	struct sim_opts o = sim_defaults;

	o.backends = 2;
	o.kv_blocks = 20000;
	o.requests = 2000;
	o.kind = W_UNIQUE;
	o.context_tokens = 4000;
	o.own_tokens = 0;
	o.max_tokens = 32;
	o.rate = 4;
	o.quiet = 1;
	o.json = 1;
	o.npol = 2;
	o.pols[0] = P_RR;
	o.pols[1] = P_KVSPLICE;
	o.contexts = 1;
	return o;
}

static double rr_served(const struct sim_opts *base, double load)
{
	struct sim_opts o = *base;
	struct workload w;
	struct result r;
	double s;

	sim_set_load(&o, load);
	assert_int_equal(sim_make_workload(&o, &w), 0);
	sim_run_policy(&o, &w, P_RR, &r);
	s = sim_served(&w, &r);
	sim_free_result(&r);
	sim_free_workload(&w);
	return s;
}

static void test_knee(void **state)
{
	struct sim_opts o = tiny();
	struct sweep *s = calloc(1, sizeof(*s));
	uint32_t i, past = 0;

	(void)state;
	s->base = o.rate;
	assert_int_equal(sim_sweep_knee(&o, s), 0);
	assert_true(s->knee > 0);
	/* the probes bracket it: every probe at or over the knee is past it,
	 * every one under 0.98 x it is not */
	for (i = 0; i < s->nprobe; i++) {
		if (s->probe[i].load >= s->knee)
			assert_true(s->probe[i].over);
		else
			assert_false(s->probe[i].over);
		past += s->probe[i].over;
	}
	assert_true(past >= 1 && past < s->nprobe);
	assert_true(rr_served(&o, 0.8 * s->knee) >= o.sweep_served);
	assert_true(rr_served(&o, 1.3 * s->knee) < o.sweep_served);

	/* the ladder starts at half the knee and stops once the best saturates */
	o.sweep_step = 0.3;
	assert_int_equal(sim_sweep_ladder(&o, s), 0);
	assert_true(s->nload >= 2);
	assert_true(s->load[0].factor > 0.49 && s->load[0].factor < 0.51);
	assert_false(s->load[0].saturated);
	assert_int_equal(s->load[0].v90 == SV_NONE, 0);
	for (i = 0; i + 1 < s->nload; i++)
		assert_false(s->load[i].saturated);
	/* a policy saturated at two loads in a row is not run at the next;
	 * the loads in a row are counted */
	for (i = 0; i < s->nload; i++)
		for (uint32_t j = 0; j < o.npol; j++) {
			const struct sweep_pol *p = &s->load[i].pol[j];
			int before = i ? s->load[i - 1].pol[j].saturated_runs : 0;

			if (i)
				assert_int_equal(p->skipped,
						 sim_sweep_skip(&s->load[i - 1].pol[j]));
			if (!p->skipped)
				assert_int_equal(p->saturated_runs,
						 p->served < o.sweep_served ? before + 1 : 0);
		}
	assert_true(s->load[s->nload - 1].saturated ||
		    s->load[s->nload - 1].factor > o.sweep_max - o.sweep_step);
	free(s);
}

/* One saturated load does not take a policy out of the ladder: it runs
 * again at the next (near saturation the served share wavers), and is
 * left out after two in a row, and from then on. */
static void test_skip(void **state)
{
	struct sweep_pol ok = { .served = 0.99 }, once = { .served = 0.96, .saturated_runs = 1 },
			 twice = { .served = 0.95, .saturated_runs = 2 }, out = { .skipped = 1 };

	(void)state;
	assert_false(sim_sweep_skip(&ok));
	assert_false(sim_sweep_skip(&once));
	assert_true(sim_sweep_skip(&twice));
	assert_true(sim_sweep_skip(&out));
}

/* One policy's TTFT p90 and hit rate at one load, a single run. */
static void one_run(const struct sim_opts *base, double load, enum pol p, double *p90, double *hit)
{
	struct sim_opts o = *base;
	struct workload w;
	struct result r;

	sim_set_load(&o, load);
	assert_int_equal(sim_make_workload(&o, &w), 0);
	sim_run_policy(&o, &w, p, &r);
	*p90 = r.ttft_p90;
	*hit = r.hit;
	sim_free_result(&r);
	sim_free_workload(&w);
}

/* --sweep-repeat N judges each load on the mean of N runs at loads 0.4%
 * apart around it: the figures are those runs' means. */
static void test_repeat(void **state)
{
	struct sim_opts o = tiny();
	struct sweep *s = calloc(1, sizeof(*s));
	double lo90, lohit, hi90, hihit;

	(void)state;
	assert_non_null(s);
	assert_true(fabs(sim_sweep_repeat_factor(0, 1) - 1) < 1e-12);
	assert_true(fabs(sim_sweep_repeat_factor(0, 4) - 0.994) < 1e-12);
	assert_true(fabs(sim_sweep_repeat_factor(3, 4) - 1.006) < 1e-12);
	assert_true(fabs(sim_sweep_repeat_factor(1, 2) - 1.002) < 1e-12);
	o.rate = 7; /* near the tiny fleet's saturation, where runs differ */
	o.sweep_repeat = 2;
	o.sweep_from = o.sweep_max = 1;
	s->knee = o.rate;
	assert_int_equal(sim_sweep_ladder(&o, s), 0);
	assert_int_equal(s->nload, 1);
	one_run(&o, o.rate * 0.998, P_KVSPLICE, &lo90, &lohit);
	one_run(&o, o.rate * 1.002, P_KVSPLICE, &hi90, &hihit);
	assert_true(fabs(s->load[0].pol[1].p90 - (lo90 + hi90) / 2) < 1e-6);
	assert_true(fabs(s->load[0].pol[1].hit - (lohit + hihit) / 2) < 1e-9);
	free(s);
}

/* A sweep is dozens of runs: each run's memory (its TTFT, and the
 * per-request arrays of its anatomy) is given back, not only its TTFT. */
static void test_no_leak(void **state)
{
	struct sim_opts o = tiny();
	struct sweep *s = calloc(1, sizeof(*s));
	size_t before, after;

	(void)state;
	assert_non_null(s);
	s->base = o.rate;
	malloc_trim(0);
	before = mallinfo2().uordblks;
	assert_int_equal(sim_sweep_knee(&o, s), 0);
	malloc_trim(0);
	after = mallinfo2().uordblks;
	/* 2,000 requests a probe leaked ~17 bytes each, ~34 KB a probe */
	assert_true(after < before + 4096);
	free(s);
}

/* --sweep-warmup: the percentiles of the requests after the first F by
 * arrival, those never served (no TTFT) left out. */
static void test_warmup(void **state)
{
	double t[100];
	struct result r = { .anat.ttft = t, .ttft_p90 = -1 };

	(void)state;
	for (int i = 0; i < 100; i++)
		t[i] = i < 25 ? 10000 : i - 24; /* a slow start, then 1..75 ms */
	t[99] = 0;				/* one never served */
	sim_sweep_after_warmup(&r, 100, 0.25);
	assert_true(r.ttft_p90 < 75 && r.ttft_p90 > 60);
	assert_true(r.ttft_p99 <= 74);
	sim_sweep_after_warmup(&r, 100, 0);
	assert_true(r.ttft_p90 == 10000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verdict), cmocka_unit_test(test_served),
		cmocka_unit_test(test_knee),	cmocka_unit_test(test_skip),
		cmocka_unit_test(test_no_leak), cmocka_unit_test(test_repeat),
		cmocka_unit_test(test_warmup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
