// SPDX-License-Identifier: MIT
/*
 * The routing policy on scenarios. A small load model drives it: each
 * decision adds the request's work to its backend's load (the prompt tokens
 * it must compute, plus DECODE_WORK for its generation), and requests
 * complete in arrival order once more than WINDOW are outstanding.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <errno.h>

#include "chash.h"
#include "kvsplice/hash.h"
#include "policy.h"
#include "prompt.h"
#include "stats.h"

#define NB 4
#define WINDOW 32
#define MAXB 512
#define DECODE_WORK 256

static const char *const names[NB] = { "10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000",
				       "10.0.0.4:8000" };

/* kvs_policy_decide with its prompt and fleet spelled out. */
static void decide(struct kvs_policy *pol, const uint64_t *h, uint32_t n, uint64_t place_key,
		   uint32_t hint, uint32_t tokens, const uint64_t *load, const uint8_t *ok,
		   const uint32_t *known, struct kvs_decision *d)
{
	struct kvs_prompt p = {
		.h = h, .n = n, .tokens = tokens, .place_key = place_key, .hint_blocks = hint
	};
	struct kvs_fleet_view f = { .load = load, .eligible = ok, .known = known };

	kvs_policy_decide(pol, &p, &f, d);
}

struct sim {
	struct kvs_policy pol;
	uint64_t load[NB];
	uint8_t ok[NB];
	uint32_t reqs[NB];
	uint64_t work_done[NB]; /* work each backend was given, in tokens */
	uint64_t cached_blocks, blocks;
	struct {
		int b;
		uint64_t work;
	} out[WINDOW];
	uint32_t nout, head;
};

static void sim_init(struct sim *s, uint32_t index_blocks)
{
	struct kvs_policy_params p;

	memset(s, 0, sizeof(*s));
	kvs_policy_defaults(&p);
	p.nbackends = NB;
	p.index_blocks = index_blocks;
	assert_int_equal(kvs_policy_init(&s->pol, &p, names), 0);
	memset(s->ok, 1, sizeof(s->ok));
}

/* A prompt of blocks: the first `shared` from seed `sseed` (a chain from
 * the same content gives the same hashes), the rest from `useed`. */
static uint32_t chain(uint64_t *h, uint64_t salt, uint64_t sseed, uint32_t shared, uint64_t useed,
		      uint32_t own)
{
	unsigned char blk[KVS_BLOCK_BYTES];
	uint64_t x = kvs_seed(0, salt);
	uint32_t i;

	for (i = 0; i < shared + own; i++) {
		kvs_text_fill(i < shared ? sseed * 100003 + i : useed * 1000003 + i, blk,
			      sizeof(blk));
		x = kvs_block_hash(x, blk);
		h[i] = x;
	}
	return shared + own;
}

static int route(struct sim *s, const uint64_t *h, uint32_t n, struct kvs_decision *d)
{
	uint32_t tokens = n * KVS_BLOCK_TOKENS;
	uint64_t work;

	if (s->nout == WINDOW) { /* the oldest request completes */
		s->load[s->out[s->head].b] -= s->out[s->head].work;
		s->head = (s->head + 1) % WINDOW;
		s->nout--;
	}
	decide(&s->pol, h, n, h[n - 1], 0, tokens, s->load, s->ok, NULL, d);
	assert_true(d->backend >= 0 && d->backend < NB);
	work = tokens - (uint64_t)d->cached_blocks * KVS_BLOCK_TOKENS + DECODE_WORK;
	s->load[d->backend] += work;
	s->work_done[d->backend] += work;
	s->out[(s->head + s->nout) % WINDOW].b = d->backend;
	s->out[(s->head + s->nout) % WINDOW].work = work;
	s->nout++;
	s->reqs[d->backend]++;
	s->cached_blocks += d->cached_blocks;
	s->blocks += n;
	return d->backend;
}

static double work_max_over_mean(const struct sim *s)
{
	double v[NB];

	for (int i = 0; i < NB; i++)
		v[i] = (double)s->work_done[i];
	return kvs_max_over_mean(v, NB);
}

static double max_over_mean(const struct sim *s)
{
	double v[NB];

	for (int i = 0; i < NB; i++)
		v[i] = s->reqs[i];
	return kvs_max_over_mean(v, NB);
}

/* Requests sharing a long template go where the template is. */
static void shared_template_goes_to_holder(void **state)
{
	struct sim s;
	struct kvs_decision d;
	uint64_t h[MAXB];
	uint32_t n;
	int first, i;

	(void)state;
	sim_init(&s, 100000);
	n = chain(h, 0, 1, 96, 1000, 32);
	first = route(&s, h, n, &d);
	assert_int_equal(d.reason, KVS_R_COLD);
	for (i = 0; i < 20; i++) {
		n = chain(h, 0, 1, 96, 2000 + i, 32);
		/* others idle between: the holder is not loaded */
		memset(s.load, 0, sizeof(s.load));
		s.nout = 0;
		assert_int_equal(route(&s, h, n, &d), first);
		assert_int_equal(d.reason, KVS_R_PREFIX);
		assert_int_equal(d.cached_blocks, 96);
	}
	kvs_policy_free(&s.pol);
}

/* Every request shares only a system prompt (1/5 of it): routing must not
 * pile them on the backend that holds it. */
static void common_system_prompt_stays_balanced(void **state)
{
	struct sim s;
	struct kvs_decision d;
	uint64_t h[MAXB];
	int i;

	(void)state;
	sim_init(&s, 100000);
	for (i = 0; i < 4000; i++)
		route(&s, h, chain(h, 0, 7, 32, 10000 + i, 128), &d);
	printf("system prompt: max/mean %.3f\n", max_over_mean(&s));
	assert_true(max_over_mean(&s) <= 1.3);
	assert_true(max_over_mean(&s) <= 1.15);
	kvs_policy_free(&s.pol);
}

/* Conversations: each turn's prompt is the previous one plus a new turn.
 * From the second turn on, a conversation stays on its backend. */
static void multi_turn_sticks(void **state)
{
	enum { CONVS = 24, TURNS = 6 };
	struct sim s;
	struct kvs_decision d;
	uint64_t h[MAXB];
	int home[CONVS], moved = 0, total = 0, t, c;

	(void)state;
	sim_init(&s, 100000);
	for (t = 0; t < TURNS; t++) {
		for (c = 0; c < CONVS; c++) {
			/* 8 blocks of system prompt, then 40 per turn (question
			 * and answer) so far, this turn's included */
			uint32_t n = chain(h, 0, 5000 + c, 8 + 40 * (uint32_t)(t + 1), 0, 0);
			int b = route(&s, h, n, &d);

			if (t == 0) {
				home[c] = b;
				continue;
			}
			total++;
			if (b != home[c]) {
				moved++;
				home[c] = b;
			}
		}
	}
	printf("multi-turn: %d of %d later turns moved, max/mean %.3f\n", moved, total,
	       max_over_mean(&s));
	assert_true(moved * 20 <= total); /* at least 95% stay */
	kvs_policy_free(&s.pol);
}

/* Turn 2 of a conversation without a system message: its first message (8
 * blocks) is all it shares with turn 1, a fifth of its prompt, below the
 * minimum match. Placed anew without a hint; with the client's hint (the
 * first message), the holder's cached prefix covers it: decisive. */
static void hinted_prefix_is_decisive(void **state)
{
	struct kvs_decision d;
	uint64_t h[MAXB];
	uint32_t n;

	(void)state;
	for (uint32_t hint = 0; hint <= 8; hint += 8) {
		struct sim s;
		int home;

		sim_init(&s, 100000);
		n = chain(h, 0, 77, 8, 1, 0);
		decide(&s.pol, h, n, h[n - 1], hint, n * 16, s.load, s.ok, NULL, &d);
		home = d.backend;
		n = chain(h, 0, 77, 8, 2, 32);
		decide(&s.pol, h, n, h[7], hint, n * 16, s.load, s.ok, NULL, &d);
		assert_int_equal(d.best_blocks, 8);
		if (hint) {
			assert_int_equal(d.reason, KVS_R_PREFIX);
			assert_int_equal(d.backend, home);
		} else {
			assert_int_equal(d.reason, KVS_R_SHARED);
		}
		kvs_policy_free(&s.pol);
	}
}

/* Nothing shared: spread evenly. */
static void unshared_spreads_evenly(void **state)
{
	struct sim s;
	struct kvs_decision d;
	uint64_t h[MAXB];
	int i;

	(void)state;
	sim_init(&s, 100000);
	for (i = 0; i < 4000; i++)
		route(&s, h, chain(h, 0, 0, 0, 90000 + i, 100), &d);
	printf("unshared: max/mean %.3f\n", max_over_mean(&s));
	assert_true(max_over_mean(&s) <= 1.15);
	assert_int_equal(s.cached_blocks, 0);
	kvs_policy_free(&s.pol);
}

/* The same prompt text under another salt is another prompt: routing never
 * reveals or reuses what the other tenant's requests did. */
static void salts_never_share(void **state)
{
	struct sim s;
	struct kvs_decision d;
	uint64_t h[MAXB];

	(void)state;
	sim_init(&s, 100000);
	route(&s, h, chain(h, 111, 3, 64, 0, 0), &d);
	memset(s.load, 0, sizeof(s.load)); /* about salts, not load */
	s.nout = 0;
	route(&s, h, chain(h, 111, 3, 64, 0, 0), &d);
	assert_int_equal(d.cached_blocks, 64);
	route(&s, h, chain(h, 222, 3, 64, 0, 0), &d);
	assert_int_equal(d.best_blocks, 0);
	assert_int_equal(d.reason, KVS_R_COLD);
	kvs_policy_free(&s.pol);
}

/* One template carries 70% of the traffic: it spills to a second backend,
 * both keep it (hits stay high). Known weakness: with the default
 * recompute weight (16, chosen for the fleet scenario) the work piles up on
 * the template's holders, by how much depends on where the ring puts the
 * cold prefixes (the figures: docs/EVALUATION.md, "The fleet in virtual
 * time", the weak side). A rate-based notion of a hot prefix is the fix.
 * The bound asserted is the first measurement, not a goal. */
static void hot_prefix_spills_with_affinity(void **state)
{
	struct sim s;
	struct kvs_decision d;
	uint64_t h[MAXB];
	int i, holders = 0;

	(void)state;
	sim_init(&s, 100000);
	for (i = 0; i < 4000; i++) {
		if (i % 10 < 7)
			route(&s, h, chain(h, 0, 42, 96, 70000 + i, 16), &d);
		else
			route(&s, h, chain(h, 0, 1000 + (uint64_t)i % 40, 96, 80000 + i, 16), &d);
	}
	chain(h, 0, 42, 96, 0, 0);
	for (uint32_t b = 0; b < NB; b++)
		holders += kvs_policy_cached(&s.pol, b, h, 96) == 96;
	printf("hot prefix: %d holders, work max/mean %.3f (requests %.3f), predicted hit %.3f, "
	       "spills %llu\n",
	       holders, work_max_over_mean(&s), max_over_mean(&s),
	       (double)s.cached_blocks / (double)s.blocks,
	       (unsigned long long)s.pol.decisions[KVS_R_SPILL]);
	assert_true(holders >= 2);
	assert_true(work_max_over_mean(&s) <= 1.6);
	assert_true((double)s.cached_blocks / (double)s.blocks > 0.7);
	kvs_policy_free(&s.pol);
}

/* A system prompt every new conversation shares (32 blocks of 96: over
 * the 30% that makes a match decisive) at 100 requests/s on 4 backends,
 * the clock and the fleet's charged work told every 100 ms as the
 * controller's tick does: with hot prefixes, the prompt's requests go to
 * replicas by the placement rule (KVS_R_HOT), every backend among them;
 * without (p.hot 0, or nothing observed), they follow its holder, which
 * keeps them until the load bound spills them (this load model's short
 * queues spill early: the imbalance hot prefixes cure shows in
 * kvsplice-bench sim, docs/EVALUATION.md). Distinct prefixes at the same
 * rate are never hot. */
static void run_system_prompt(struct sim *s, int hot, int observe, uint64_t sseed_step)
{
	struct kvs_decision d;
	uint64_t h[MAXB], charged = 0;
	int i;

	sim_init(s, 100000);
	s->pol.p.hot = hot;
	for (i = 0; i < 600; i++) {
		if (observe && i % 10 == 0) {
			charged = 0;
			for (uint32_t b = 0; b < NB; b++)
				charged += s->work_done[b];
			kvs_policy_observe(&s->pol, 1000000000ULL + (uint64_t)i * 10000000ULL,
					   charged, DECODE_WORK);
		}
		route(s, h, chain(h, 0, 5 + (uint64_t)i * sseed_step, 32, 1000 + (uint64_t)i, 64),
		      &d);
	}
}

static void hot_system_prompt_replicates(void **state)
{
	struct sim on, off, unobserved, cold;

	(void)state;
	run_system_prompt(&on, 1, 1, 0);
	run_system_prompt(&off, 0, 1, 0);
	run_system_prompt(&unobserved, 1, 0, 0);
	run_system_prompt(&cold, 1, 1, 1);
	printf("system prompt: hot %llu decisions, %llu to a replica not the holder, work "
	       "max/mean %.3f; without: %.3f, spills %llu\n",
	       (unsigned long long)on.pol.decisions[KVS_R_HOT],
	       (unsigned long long)on.pol.hot_replicas, work_max_over_mean(&on),
	       work_max_over_mean(&off), (unsigned long long)off.pol.decisions[KVS_R_SPILL]);
	assert_true(on.pol.decisions[KVS_R_HOT] > 400);
	assert_true(on.pol.hot_replicas > 0);
	for (uint32_t b = 0; b < NB; b++)
		assert_true(on.reqs[b] > 600 / NB / 2);
	assert_true(work_max_over_mean(&on) < 1.1);
	assert_int_equal(off.pol.decisions[KVS_R_HOT], 0);
	assert_int_equal(unobserved.pol.decisions[KVS_R_HOT], 0);
	assert_int_equal(cold.pol.decisions[KVS_R_HOT], 0);
	kvs_policy_free(&on.pol);
	kvs_policy_free(&off.pol);
	kvs_policy_free(&unobserved.pol);
	kvs_policy_free(&cold.pol);
}

/* Two backends hold the prefix: the less loaded one gets the request,
 * every time, not a coin toss. */
static void ties_go_to_the_less_loaded(void **state)
{
	struct sim s;
	struct kvs_decision d;
	uint64_t h[MAXB];
	uint64_t load[NB] = { 0 };
	uint8_t ok[NB] = { 1, 1, 1, 1 };
	uint32_t n = chain(h, 0, 9, 64, 0, 0);
	int a, b;

	(void)state;
	sim_init(&s, 100000);
	/* make two holders: route with the first holder overloaded */
	decide(&s.pol, h, n, h[n - 1], 0, n * 16, load, ok, NULL, &d);
	a = d.backend;
	load[a] = 1000000;
	decide(&s.pol, h, n, h[n - 1], 0, n * 16, load, ok, NULL, &d);
	b = d.backend;
	assert_int_not_equal(a, b);
	assert_int_equal(d.reason, KVS_R_SPILL);
	for (int i = 0; i < 10; i++) {
		load[a] = 500;
		load[b] = 400;
		decide(&s.pol, h, n, h[n - 1], 0, n * 16, load, ok, NULL, &d);
		assert_int_equal(d.backend, b);
		load[a] = 300;
		decide(&s.pol, h, n, h[n - 1], 0, n * 16, load, ok, NULL, &d);
		assert_int_equal(d.backend, a);
	}
	kvs_policy_free(&s.pol);
}

/* The index never holds more than the backend can; old prompts go first. */
static void index_is_bounded_like_the_backend(void **state)
{
	struct sim s;
	struct kvs_decision d;
	uint64_t h[MAXB], first[MAXB];
	uint32_t n0 = chain(first, 0, 1, 50, 0, 0);
	int i;

	(void)state;
	sim_init(&s, 500);
	route(&s, first, n0, &d);
	/* 80 more prompts of 50 blocks: ~1000 blocks per backend of 500 */
	for (i = 0; i < 80; i++)
		route(&s, h, chain(h, 0, 200 + (uint64_t)i, 50, 0, 0), &d);
	for (uint32_t b = 0; b < NB; b++) {
		assert_true(s.pol.index[b].used * KVS_INDEX_GROUP <= 500);
		assert_int_equal(kvs_policy_cached(&s.pol, b, first, n0), 0);
	}
	kvs_policy_free(&s.pol);
}

/* Evidence from elsewhere (the kernel's learned routes) counts as cached:
 * a backend the index knows nothing about but the routes say holds the
 * prompt's first 64 blocks wins it. */
static void known_depth_counts_as_cached(void **state)
{
	struct sim s;
	struct kvs_decision d;
	uint64_t h[MAXB];
	uint32_t known[NB] = { 0, 0, 64, 0 }, n = chain(h, 0, 31, 80, 0, 0);

	(void)state;
	sim_init(&s, 100000);
	decide(&s.pol, h, n, h[n - 1], 0, n * 16, s.load, s.ok, known, &d);
	assert_int_equal(d.backend, 2);
	assert_int_equal(d.cached_blocks, 64);
	assert_int_equal(d.reason, KVS_R_PREFIX);
	/* and it never claims more than the prompt has */
	known[1] = 500;
	decide(&s.pol, h, n, h[n - 1], 0, n * 16, s.load, s.ok, known, &d);
	assert_int_equal(d.cached_blocks, n);
	kvs_policy_free(&s.pol);
}

/* A holder past --balance but within its own keep bound keeps a request
 * whose recomputation elsewhere costs more, as the kernel's keep rule
 * (kvs_place_keep) does; past the keep bound, or with the keep bound at
 * --balance (the controller before), it spills. */
/* A fresh index; backend 2 (the holder) at load, the others at 1,000. */
static void holder_at(struct sim *s, uint64_t load)
{
	sim_init(s, 100000);
	s->load[0] = s->load[1] = s->load[3] = 1000;
	s->load[2] = load;
}

static void holder_keeps_within_the_keep_bound(void **state)
{
	struct sim s;
	struct kvs_decision d;
	uint64_t h[MAXB];
	uint32_t known[NB] = { 0, 0, 64, 0 }, n = chain(h, 0, 32, 80, 0, 0);

	(void)state;
	/* mean 1,750: past 1.15 x mean + 1,280 (3,293), within 2 x (4,780) */
	holder_at(&s, 4000);
	assert_true(s.pol.p.keep_balance > 1.99 && s.pol.p.keep_balance < 2.01);
	decide(&s.pol, h, n, h[n - 1], 0, n * 16, s.load, s.ok, known, &d);
	assert_int_equal(d.backend, 2);
	assert_int_equal(d.reason, KVS_R_PREFIX);
	assert_int_equal(d.cached_blocks, 64);

	s.pol.p.keep_balance = s.pol.p.balance;
	decide(&s.pol, h, n, h[n - 1], 0, n * 16, s.load, s.ok, known, &d);
	assert_int_not_equal(d.backend, 2);
	assert_int_equal(d.reason, KVS_R_SPILL);

	/* past the keep bound (mean 2,250: 2 x mean + 1,280 = 5,780), in a
	 * fresh index: the spill above made its backend a holder */
	kvs_policy_free(&s.pol);
	holder_at(&s, 6000);
	decide(&s.pol, h, n, h[n - 1], 0, n * 16, s.load, s.ok, known, &d);
	assert_int_not_equal(d.backend, 2);
	assert_int_equal(d.reason, KVS_R_SPILL);
	kvs_policy_free(&s.pol);
}

static int fb(struct sim *s, uint32_t b, uint64_t pred, uint64_t miss, uint64_t surprise)
{
	struct kvs_feedback f = { .predicted = pred, .mispredicted = miss, .unexpected = surprise };

	return kvs_policy_feedback(&s->pol, b, &f);
}

/* What counts as an unexpected hit: past the checkpoint after the
 * prediction (which the kernel could not see), within the window. */
static void unexpected_hits(void **state)
{
	uint32_t d, j = 0;

	(void)state;
	for (d = 0; d < KVS_MAX_WINDOW_BLOCKS; d++) {
		while (kvs_checkpoint(j) <= d)
			j++;
		assert_int_equal(kvs_checkpoint_after(d), kvs_checkpoint(j));
	}
	assert_int_equal(kvs_unexpected_cached(0, 1024, 16384), 1024 - 64); /* placed cold */
	assert_int_equal(kvs_unexpected_cached(0, 48, 16384), 0);
	/* a route at 320 blocks; it held 375 (the next checkpoint is 384) */
	assert_int_equal(kvs_unexpected_cached(320 * 16 - 5, 375 * 16, 16384), 0);
	assert_int_equal(kvs_unexpected_cached(320 * 16, 400 * 16, 16384), 16 * 16);
	assert_int_equal(kvs_unexpected_cached(6000, 100, 16384), 0);	 /* a miss */
	assert_int_equal(kvs_unexpected_cached(16384, 40000, 16384), 0); /* past the window */
	assert_int_equal(kvs_unexpected_cached(0, 40000, 16384), 16384 - 64);
	assert_int_equal(kvs_unexpected_cached(900 * 16, 40000, 16384), 0); /* next: 1,024 */
	assert_int_equal(kvs_unexpected_cached(900 * 16, 40000, 262144), 40000 - 1024 * 16);
	assert_int_equal(kvs_unexpected_cached(2000 * 16, 40000, 262144), 40000 - 2048 * 16);
}

/* Reports correct the index size both ways (configured 64,000 blocks, 4
 * backends): evidence under a sixteenth of the index (in tokens) waits; a
 * 20% miss share shrinks it by 10%, 3% holds; unexpected hits grow it by
 * n/2 times their share, past the configured size, at most a quarter a
 * step; misses win over surprises; repeated, they reach the bounds, 1/1024
 * of the configured size (at least 16 entries of KVS_INDEX_GROUP blocks:
 * 64) and 4x. */
static void feedback_resizes_index(void **state)
{
	struct sim s;
	int i;

	(void)state;
	sim_init(&s, 64000);
	assert_int_equal(fb(&s, 1, 100, 100, 0), 0); /* too little */
	assert_int_equal(fb(&s, 1, 50000, 50000, 0), 0);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 64000);
	assert_int_equal(fb(&s, 1, 64000, 12800, 0), 1);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 57600);
	assert_int_equal(fb(&s, 1, 64000, 1920, 0), 1); /* 3%: hold */
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 57600);
	assert_int_equal(fb(&s, 1, 57600, 0, 400), 1); /* 0.7% of the hits: hold */
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 57600);
	/* 6.25% of the hits unexpected: +12.5% */
	assert_int_equal(fb(&s, 1, 60000, 0, 4000), 1);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 64800);
	assert_int_equal(fb(&s, 1, 40000, 0, 40000), 1); /* half: a quarter */
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 81000);
	assert_int_equal(fb(&s, 1, 80000, 16000, 40000), 1); /* 20% missed: shrink */
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 72900);
	for (i = 0; i < 100; i++)
		fb(&s, 1, 0, 0, 1u << 24);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 4 * 64000);
	for (i = 0; i < 100; i++)
		fb(&s, 1, 1u << 24, 9u << 20, 0);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 64);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 0), 64000); /* others untouched */
	/* and back up, from the floor */
	for (i = 0; i < 100; i++)
		fb(&s, 1, 1u << 20, 0, 1u << 20);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 4 * 64000);
	kvs_policy_free(&s.pol);
}

/* A backend that says its capacity (64,000 blocks configured): its index
 * takes that size at once, evicting as the backend would; the reports'
 * corrections then move around it (the floor is 1/1024 of what it said),
 * under the operator's ceiling (4x configured), which a backend saying
 * more cannot pass; saying it again changes nothing learnt since; 0, or a
 * removal, is the configured size again. Others keep the configured size. */
static void said_capacity_sizes_the_index(void **state)
{
	uint64_t h[64], load[NB] = { 0 };
	uint8_t ok[NB] = { 1, 1, 1, 1 };
	struct kvs_decision d;
	struct sim s;
	int i;

	(void)state;
	sim_init(&s, 64000);
	chain(h, 0, 1, 60, 1, 4);
	decide(&s.pol, h, 64, h[63], 0, 64 * KVS_BLOCK_TOKENS, load, ok, NULL, &d);
	assert_int_equal(kvs_policy_cached(&s.pol, (uint32_t)d.backend, h, 64), 64);
	/* said smaller than it holds: it keeps the head, as the backend would */
	assert_int_equal(kvs_policy_set_capacity(&s.pol, (uint32_t)d.backend, 32), 1);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, (uint32_t)d.backend), 32);
	assert_int_equal(kvs_policy_cached(&s.pol, (uint32_t)d.backend, h, 64), 32);
	assert_int_equal(kvs_policy_set_capacity(&s.pol, 1, 20000), 1);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 20000);
	assert_int_equal(kvs_policy_set_capacity(&s.pol, 1, 20000), 0);
	assert_int_equal(fb(&s, 1, 20000, 4000, 0), 1); /* 20% missed: -10% */
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 18000);
	assert_int_equal(kvs_policy_set_capacity(&s.pol, 1, 20000), 0); /* learnt stays */
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 18000);
	for (i = 0; i < 100; i++)
		fb(&s, 1, 1u << 24, 9u << 20, 0);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 64); /* 16 groups: 20000/1024 < 16 */
	for (i = 0; i < 100; i++)
		fb(&s, 1, 1u << 20, 0, 1u << 20);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 4 * 64000);
	assert_int_equal(kvs_policy_set_capacity(&s.pol, 2, 1u << 30), 1);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 2), 4 * 64000);
	assert_int_equal(kvs_policy_set_capacity(&s.pol, 2, 0), 1);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 2), 64000);
	assert_int_equal(kvs_policy_set_capacity(&s.pol, 3, 200000), 1);
	assert_int_equal(fb(&s, 3, 200000, 200000, 0), 1); /* all missed: half */
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 3), 100000);
	kvs_policy_remove_backend(&s.pol, 3);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 3), 64000);
	assert_int_equal(kvs_policy_set_capacity(&s.pol, 3, 200000), 1);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 0 == d.backend ? 1 : 0),
			 0 == d.backend ? 18000 : 64000);
	assert_int_equal(kvs_policy_set_capacity(&s.pol, NB, 100), 0); /* no such slot */
	kvs_policy_free(&s.pol);
}

/* Misses the backend's load explains do not shrink the index: with its
 * outstanding work at a share of the index's size (the squeeze), only the
 * miss share beyond it counts. 64,000 blocks are 1,024,000 tokens; a 30%
 * miss share under a 25% squeeze holds, under 10% shrinks by (30-10)/2 =
 * 10%, and a backend whose running requests take its whole cache never
 * shrinks its index, whatever it misses. */
static void load_explains_misses(void **state)
{
	struct sim s;
	struct kvs_feedback f = { .predicted = 64000, .mispredicted = 19200 };
	int i;

	(void)state;
	sim_init(&s, 64000);
	f.peak_work = 256000;
	assert_int_equal(kvs_policy_feedback(&s.pol, 1, &f), 1);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 64000);
	f.peak_work = 102400;
	assert_int_equal(kvs_policy_feedback(&s.pol, 1, &f), 1);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 57600);
	f = (struct kvs_feedback){ .predicted = 1u << 24,
				   .mispredicted = 1u << 24,
				   .peak_work = 1ull << 40 };
	for (i = 0; i < 100; i++)
		kvs_policy_feedback(&s.pol, 2, &f);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 2), 64000);
	/* the same misses without the load: down to the floor */
	f.peak_work = 0;
	for (i = 0; i < 100; i++)
		kvs_policy_feedback(&s.pol, 2, &f);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 2), 64);
	kvs_policy_free(&s.pol);
}

/* Hits the index knew of, under a request the kernel charged as uncached
 * (placed as new on a backend holding its system prompt), are not
 * unexpected: they do not grow the index; the same hits unknown do. */
static void known_hits_are_not_surprises(void **state)
{
	struct sim s;
	uint64_t h[MAXB], g[MAXB / KVS_INDEX_GROUP];
	uint32_t n = chain(h, 0, 31, 64, 0, 0), j;

	(void)state;
	sim_init(&s, 64000);
	for (j = 0; j < n / KVS_INDEX_GROUP; j++)
		g[j] = h[(j + 1) * KVS_INDEX_GROUP - 1];
	kvs_policy_record(&s.pol, 1, g, n / KVS_INDEX_GROUP);	 /* b holds 64 blocks */
	kvs_policy_report(&s.pol, 1, g, n / KVS_INDEX_GROUP, 0); /* charged as uncached */
	/* its END: 1,024 cached, 960 of them past the first checkpoint */
	assert_int_equal(fb(&s, 1, 64000, 0, 960), 1);
	assert_int_equal(kvs_policy_index_blocks(&s.pol, 1), 64000);
	kvs_policy_report(&s.pol, 2, g, n / KVS_INDEX_GROUP, 0); /* 2's index: nothing */
	assert_int_equal(fb(&s, 2, 64000, 0, 960), 1);
	assert_true(kvs_policy_index_blocks(&s.pol, 2) > 64000);
	kvs_policy_free(&s.pol);
}

/* Shrinking evicts like the backend: least recently used first. */
static void shrinking_evicts_lru_first(void **state)
{
	struct sim s;
	struct kvs_decision d;
	uint64_t a[MAXB], b[MAXB];
	uint32_t na = chain(a, 0, 1, 100, 0, 0), nb = chain(b, 0, 2, 100, 0, 0);
	uint8_t only0[NB] = { 1, 0, 0, 0 };

	(void)state;
	sim_init(&s, 64000);
	decide(&s.pol, a, na, a[na - 1], 0, na * 16, s.load, only0, NULL, &d);
	decide(&s.pol, b, nb, b[nb - 1], 0, nb * 16, s.load, only0, NULL, &d);
	/* room for 37 of the 50 index entries (25 per prompt) */
	assert_int_equal(kvs_pcache_set_capacity(&s.pol.index[0], 150 / KVS_INDEX_GROUP), 37);
	assert_int_equal(kvs_policy_cached(&s.pol, 0, b, nb), 100);
	/* a's tail went first: its first 12 entries are left */
	assert_int_equal(kvs_policy_cached(&s.pol, 0, a, na), 12 * KVS_INDEX_GROUP);
	kvs_policy_free(&s.pol);
}

static int hook_backend = -1;
static uint64_t hook_hash;

static void hook(void *ctx, uint32_t backend, uint64_t hash)
{
	(void)ctx;
	hook_backend = (int)backend;
	hook_hash = hash;
}

/* A marked block evicted from backend b's index is reported with b: the
 * gateway withdraws the route it installed for it. */
static void index_eviction_reaches_the_hook(void **state)
{
	struct sim s;
	struct kvs_decision d;
	uint64_t a[MAXB];
	uint32_t n = chain(a, 0, 1, 50, 0, 0);
	uint8_t only2[NB] = { 0, 0, 1, 0 };

	(void)state;
	sim_init(&s, 64000);
	kvs_policy_on_evict(&s.pol, hook, NULL);
	decide(&s.pol, a, n, a[n - 1], 0, n * 16, s.load, only2, NULL, &d);
	assert_int_equal(d.backend, 2);
	/* a[31] ends the index's 8th entry of the prompt's 12: keeping 7
	 * evicts it (the tail goes first) */
	kvs_policy_mark(&s.pol, 2, a[31]);
	kvs_pcache_set_capacity(&s.pol.index[2], 7);
	assert_int_equal(hook_backend, 2);
	assert_true(hook_hash == a[31]);
	kvs_policy_free(&s.pol);
}

/* An idle fleet (every load 0, as when prompts are computed at once and
 * outputs are short) where all hold one short system prompt: placed by load
 * alone, ties rotated by the request, so every backend gets a fair share
 * rather than backend 0 or the first holders getting all. */
static void idle_fleet_shared_prompt_uses_every_backend(void **state)
{
	struct sim s;
	struct kvs_decision d;
	uint64_t h[MAXB], zero[NB] = { 0 };
	uint32_t reqs[NB] = { 0 }, n;
	int i, b;

	(void)state;
	sim_init(&s, 100000);
	for (i = 0; i < 400; i++) {
		n = chain(h, 0, 7, 16, 20000 + i, 64); /* 20% shared */
		decide(&s.pol, h, n, h[n - 1], 0, n * KVS_BLOCK_TOKENS, zero, s.ok, NULL, &d);
		assert_true(d.backend >= 0);
		reqs[d.backend]++;
	}
	for (b = 0; b < NB; b++)
		assert_in_range(reqs[b], 70, 130); /* 100 each, give or take */
	kvs_policy_free(&s.pol);
}

/* Sixteen new templates on an idle fleet, chosen so that the ring alone
 * would put every one of them on backend 0 (work never binds when every
 * load is 0): bounded by how many new prefixes each backend was given, no
 * backend gets more than 5 of the 16. */
static void idle_fleet_cold_templates_spread(void **state)
{
	struct sim s;
	struct kvs_chash ring;
	struct kvs_decision d;
	uint64_t h[MAXB], zero[NB] = { 0 };
	uint32_t got[NB] = { 0 }, n, seed = 500;
	int t, b;

	(void)state;
	sim_init(&s, 100000);
	assert_int_equal(kvs_chash_build(&ring, names, NB, KVS_CHASH_VNODES), 0);
	for (t = 0; t < 16; t++) {
		do { /* the next template the ring alone would give backend 0 */
			seed++;
			n = chain(h, 0, seed, 96, 30000 + seed, 16);
		} while (kvs_chash_pick(&ring, h[n - 1], zero, s.ok, KVS_POLICY_BALANCE) != 0);
		decide(&s.pol, h, n, h[n - 1], 0, n * KVS_BLOCK_TOKENS, zero, s.ok, NULL, &d);
		assert_int_equal(d.reason, KVS_R_COLD);
		got[d.backend]++;
	}
	printf("cold templates per backend: %u %u %u %u\n", got[0], got[1], got[2], got[3]);
	for (b = 0; b < NB; b++) /* the ring alone: 16 0 0 0; seen: 5 3 4 4 */
		assert_true(got[b] <= 5);
	kvs_chash_free(&ring);
	kvs_policy_free(&s.pol);
}

static void no_backend(void **state)
{
	struct sim s;
	struct kvs_decision d;
	uint64_t h[MAXB];
	uint32_t n = chain(h, 0, 1, 8, 0, 0);

	(void)state;
	sim_init(&s, 1000);
	memset(s.ok, 0, sizeof(s.ok));
	decide(&s.pol, h, n, h[n - 1], 0, 128, s.load, s.ok, NULL, &d);
	assert_int_equal(d.backend, -1);
	assert_int_equal(d.reason, KVS_R_NONE);
	kvs_policy_free(&s.pol);
}

/* Backends come and go at run time (kvsplicectl, reloads): a slot added
 * later starts with an empty index and takes cold prefixes; a removed one
 * (NULL name, forgotten, ineligible) takes nothing, and the prefixes the
 * others hold stay with them. Slots never shrink. */
static void backends_added_and_removed(void **state)
{
	const char *grown[NB + 1] = { names[0], names[1], names[2], names[3], "10.0.0.5:8000" };
	uint64_t h[64], load[NB + 1] = { 0 };
	uint8_t ok[NB + 1] = { 1, 1, 1, 1, 1 };
	struct kvs_decision d;
	struct sim s;
	uint32_t got[NB + 1] = { 0 }, k;
	int held;

	(void)state;
	sim_init(&s, 4096);
	chain(h, 0, 1, 32, 1, 4);
	decide(&s.pol, h, 36, h[35], 0, 36 * KVS_BLOCK_TOKENS, load, ok, NULL, &d);
	held = d.backend;
	assert_int_equal(kvs_policy_set_backends(&s.pol, grown, NB - 1), -EINVAL);
	assert_int_equal(kvs_policy_set_backends(&s.pol, grown, NB + 1), 0);
	assert_int_equal(kvs_policy_cached(&s.pol, NB, h, 36), 0);
	for (k = 0; k < 200; k++) { /* cold prompts reach the new slot too */
		chain(h, 0, 1000 + k, 4, 7, 0);
		decide(&s.pol, h, 4, h[3], 0, 4 * KVS_BLOCK_TOKENS, load, ok, NULL, &d);
		assert_true(d.backend >= 0 && d.backend <= NB);
		got[d.backend]++;
	}
	assert_true(got[NB] >= 10);
	/* Remove slot 4 again, and one of the others that does not hold the
	 * first prompt: the prompt stays with its holder. */
	int gone = held == 0 ? 1 : 0;

	grown[NB] = NULL;
	grown[gone] = NULL;
	ok[NB] = ok[gone] = 0;
	kvs_policy_forget_backend(&s.pol, NB);
	kvs_policy_forget_backend(&s.pol, (uint32_t)gone);
	assert_int_equal(kvs_policy_set_backends(&s.pol, grown, NB + 1), 0);
	chain(h, 0, 1, 32, 1, 4);
	decide(&s.pol, h, 36, h[35], 0, 36 * KVS_BLOCK_TOKENS, load, ok, NULL, &d);
	assert_int_equal(d.backend, held);
	assert_int_equal(d.reason, KVS_R_PREFIX);
	for (k = 0; k < 200; k++) {
		chain(h, 0, 5000 + k, 4, 7, 0);
		decide(&s.pol, h, 4, h[3], 0, 4 * KVS_BLOCK_TOKENS, load, ok, NULL, &d);
		assert_true(d.backend != NB && d.backend != gone);
	}
	kvs_policy_free(&s.pol);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(shared_template_goes_to_holder),
		cmocka_unit_test(common_system_prompt_stays_balanced),
		cmocka_unit_test(multi_turn_sticks),
		cmocka_unit_test(hinted_prefix_is_decisive),
		cmocka_unit_test(unshared_spreads_evenly),
		cmocka_unit_test(salts_never_share),
		cmocka_unit_test(hot_prefix_spills_with_affinity),
		cmocka_unit_test(hot_system_prompt_replicates),
		cmocka_unit_test(ties_go_to_the_less_loaded),
		cmocka_unit_test(index_is_bounded_like_the_backend),
		cmocka_unit_test(known_depth_counts_as_cached),
		cmocka_unit_test(holder_keeps_within_the_keep_bound),
		cmocka_unit_test(unexpected_hits),
		cmocka_unit_test(feedback_resizes_index),
		cmocka_unit_test(said_capacity_sizes_the_index),
		cmocka_unit_test(load_explains_misses),
		cmocka_unit_test(known_hits_are_not_surprises),
		cmocka_unit_test(shrinking_evicts_lru_first),
		cmocka_unit_test(index_eviction_reaches_the_hook),
		cmocka_unit_test(idle_fleet_shared_prompt_uses_every_backend),
		cmocka_unit_test(idle_fleet_cold_templates_spread),
		cmocka_unit_test(no_backend),
		cmocka_unit_test(backends_added_and_removed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
