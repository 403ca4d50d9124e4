// SPDX-License-Identifier: MIT
/*
 * The placement rule (include/kvsplice/place.h): the kernel's build and the
 * userspace build decide the same on the same inputs (the BPF one run
 * through tests/bpf/place_probe.bpf.c, which holds the verdict's own
 * placement code, bpf/datapath/place.bpf.h), and the rule keeps its promises: load
 * bound, room for new prefixes, agreement between gateways, few keys
 * moved when a backend leaves, the least loaded backend for a new prefix,
 * and the rendezvous order for spills.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "chash.h"
#include "kvsplice/hash.h"
#include "kvsplice/maps.h"
#include "kvsplice/place.h"
#include "place_probe.skel.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A fleet of n backends named 10.0.0.b:8000, idle, all eligible. */
static void fleet(struct kvs_place_be *be, uint32_t n)
{
	char name[32];

	memset(be, 0, sizeof(*be) * KVS_MAX_BACKENDS);
	for (uint32_t b = 0; b < n; b++) {
		snprintf(name, sizeof(name), "10.0.0.%u:8000", b + 1);
		be[b].seed = kvs_str_hash(name);
		be[b].ok = 1;
	}
}

/* An idle fleet, counts reset before each key: where the hash alone puts
 * it. */
static int hashed(struct kvs_place_be *be, uint32_t n, uint64_t key)
{
	for (uint32_t b = 0; b < n; b++)
		be[b].placed = 0;
	return kvs_place(key, be, n);
}

static void never_above_the_load_bound(void **state)
{
	struct kvs_place_be be[KVS_MAX_BACKENDS];
	uint32_t n = 8, i, b;

	(void)state;
	fleet(be, n);
	for (i = 0; i < 5000; i++) {
		uint64_t total = 0;
		int pick;

		for (b = 0; b < n; b++) {
			be[b].load = next() % 100000;
			total += be[b].load;
		}
		pick = kvs_place(next(), be, n);
		assert_true(pick >= 0 && pick < (int)n);
		/* the mean, ceil((total + 1) / n): a new prefix is cached
		 * nowhere, so nothing pays for a wait above it */
		assert_true(be[pick].load + 1 <= (total + 1 + n - 1) / n);
	}
}

static void new_prefixes_spread(void **state)
{
	struct kvs_place_be be[KVS_MAX_BACKENDS];
	uint32_t n = 7, count[KVS_MAX_BACKENDS] = { 0 }, i, b, lo = UINT32_MAX, hi = 0;

	(void)state;
	fleet(be, n);
	/* An idle fleet: only the room for new prefixes spreads them. */
	for (i = 0; i < 7000; i++)
		count[kvs_place(next(), be, n)]++;
	for (b = 0; b < n; b++) {
		lo = count[b] < lo ? count[b] : lo;
		hi = count[b] > hi ? count[b] : hi;
	}
	/* Within two of each other at every step, so at the end too. */
	assert_true(hi - lo <= 2);
}

static void gateways_agree_and_keys_stay(void **state)
{
	struct kvs_place_be a[KVS_MAX_BACKENDS], c[KVS_MAX_BACKENDS];
	uint32_t n = 8, i, moved = 0, on_gone = 0;

	(void)state;
	fleet(a, n);
	fleet(c, n);
	c[3].ok = 0; /* backend 3 leaves gateway c's fleet */
	for (i = 0; i < 4000; i++) {
		uint64_t key = next();
		int x = hashed(a, n, key), y;

		assert_int_equal(hashed(a, n, key), x); /* the same answer twice */
		y = hashed(c, n, key);
		assert_int_not_equal(y, 3);
		if (x == 3)
			on_gone++;
		else if (x != y)
			moved++;
	}
	/* Rendezvous hashing: only the keys of the backend that left move. */
	assert_int_equal(moved, 0);
	assert_true(on_gone > 4000 / n / 2);
}

/* The eligible backend with the least load, the highest score among equal
 * loads. */
static int least_loaded(const struct kvs_place_be *be, uint32_t n, uint64_t key)
{
	int best = -1;

	for (uint32_t b = 0; b < n; b++) {
		if (!be[b].ok)
			continue;
		if (best < 0 || be[b].load < be[best].load ||
		    (be[b].load == be[best].load &&
		     kvs_place_score(key, be[b].seed) > kvs_place_score(key, be[best].seed)))
			best = (int)b;
	}
	return best;
}

/* The highest score within the mean, ceil((total + 1) / eligible). */
static int highest_in_bound(const struct kvs_place_be *be, uint32_t n, uint64_t key)
{
	uint64_t total = 0, bound;
	uint32_t b, n_ok = 0;
	int best = -1;

	for (b = 0; b < n; b++)
		if (be[b].ok) {
			total += be[b].load;
			n_ok++;
		}
	bound = n_ok ? (total + n_ok) / n_ok : 0;
	for (b = 0; b < n; b++)
		if (be[b].ok && be[b].load + 1 <= bound &&
		    (best < 0 ||
		     kvs_place_score(key, be[b].seed) > kvs_place_score(key, be[best].seed)))
			best = (int)b;
	return best;
}

/*
 * A spill keeps the rendezvous order within the mean, room or not, not the
 * least load: a prefix spills again while its holder stays busy, and its
 * spills should meet their own cache on one second backend
 * (docs/EVALUATION.md, "The trace's p90: the fallback's order").
 */
static void spills_follow_the_score(void **state)
{
	struct kvs_place_be be[KVS_MAX_BACKENDS];
	struct kvs_place_sum s;
	uint32_t n = 8, i, b, differs = 0;

	(void)state;
	fleet(be, n);
	for (i = 0; i < 4000; i++) {
		uint64_t key = next();
		int pick;

		for (b = 0; b < n; b++) {
			be[b].load = next() % 3 ? next() % 100000 : 5000 * (next() % 4);
			be[b].ok = next() % 6 != 0;
			be[b].placed = next() % (4 * KVS_PLACE_UNIT);
		}
		pick = kvs_place_choose(key, be, n, 1, &s);
		assert_int_equal(pick, highest_in_bound(be, n, key));
		differs += pick != least_loaded(be, n, key);
	}
	assert_true(differs > 1000); /* not the least loaded's */
}

/* Whether backend b has room for a new prefix (fewer than
 * KVS_PLACE_AHEAD placements past the least placed, both decayed by this
 * placement's decay): among equal loads, those with room come first. */
static int has_room(const struct kvs_place_be *be, uint32_t n, uint32_t b)
{
	uint64_t least = ~0ULL;
	uint32_t i, n_ok = 0;

	for (i = 0; i < n; i++)
		if (be[i].ok) {
			n_ok++;
			if (be[i].placed < least)
				least = be[i].placed;
		}
	return be[b].placed - kvs_place_decay(be[b].placed, n_ok) <
	       least - kvs_place_decay(least, n_ok) + KVS_PLACE_AHEAD;
}

/*
 * A new prefix goes to the least loaded backend, room (recent placements)
 * then the score deciding among equal loads: it is cached nowhere, so its
 * first token waits for the work ahead of it, and the least work is the
 * shortest wait. The rule before sent it to the highest score among the
 * backends with room within the mean, up to a mean's worth of queue behind
 * the least loaded, and past the least loaded when that one had been
 * given two new prefixes more than another (docs/EVALUATION.md, "New
 * prefixes to the least loaded").
 */
static void new_prefixes_go_to_the_least_loaded(void **state)
{
	struct kvs_place_be be[KVS_MAX_BACKENDS], was[KVS_MAX_BACKENDS];
	uint32_t n = 8, i, b, lacking = 0;

	(void)state;
	fleet(be, n);
	for (i = 0; i < 4000; i++) {
		uint64_t key = next();
		int want = -1;

		for (b = 0; b < n; b++) {
			be[b].ok = next() % 6 != 0;
			be[b].placed = next() % (4 * KVS_PLACE_UNIT);
			/* ties in load are common on a light fleet */
			be[b].load = next() % 3 ? next() % 100000 : 5000 * (next() % 3);
		}
		memcpy(was, be, sizeof(be));
		for (b = 0; b < n; b++) {
			if (!be[b].ok)
				continue;
			if (want < 0 || be[b].load < be[want].load ||
			    (be[b].load == be[want].load &&
			     (has_room(be, n, b) > has_room(be, n, (uint32_t)want) ||
			      (has_room(be, n, b) == has_room(be, n, (uint32_t)want) &&
			       kvs_place_score(key, be[b].seed) >
				       kvs_place_score(key, be[want].seed)))))
				want = (int)b;
		}
		lacking += want >= 0 && !has_room(be, n, (uint32_t)want);
		assert_int_equal(kvs_place(key, be, n), want);
		if (want >= 0) /* counted, and every count decayed */
			assert_true(be[want].placed > was[want].placed);
	}
	/* the least loaded without room: where the rule before looked past it */
	assert_true(lacking > 500);
	/* an idle fleet: room everywhere, the hash places (rendezvous) */
	fleet(be, n);
	for (i = 0; i < 100; i++) {
		uint64_t key = next();
		int best = 0;

		for (b = 0; b < n; b++) {
			be[b].placed = 0;
			if (kvs_place_score(key, be[b].seed) > kvs_place_score(key, be[best].seed))
				best = (int)b;
		}
		assert_int_equal(kvs_place(key, be, n), best);
	}
}

static void nobody_eligible(void **state)
{
	struct kvs_place_be be[KVS_MAX_BACKENDS];

	(void)state;
	fleet(be, 4);
	for (uint32_t b = 0; b < 4; b++)
		be[b].ok = 0;
	assert_int_equal(kvs_place(42, be, 4), -1);
}

static void depth_of_the_key(void **state)
{
	(void)state;
	assert_int_equal(kvs_place_depth(0, 0), 0);
	assert_int_equal(kvs_place_depth(0, 3), 3);    /* under one checkpoint */
	assert_int_equal(kvs_place_depth(0, 100), 64); /* the deepest checkpoint */
	assert_int_equal(kvs_place_depth(0, 5000), 1024);
	assert_int_equal(kvs_place_depth(40, 100), 40);	 /* the hint */
	assert_int_equal(kvs_place_depth(400, 100), 64); /* a hint past the prompt */
}

/* The probe's backends map from the userspace inputs. */
static void write_fleet(struct place_probe_bpf *skel, const struct kvs_place_be *be, uint32_t n,
			const uint32_t *maxo, const uint64_t *outst)
{
	int fd = bpf_map__fd(skel->maps.backends);

	for (uint32_t b = 0; b < KVS_MAX_BACKENDS; b++) {
		struct kvs_backend v = { 0 };

		if (b < n) {
			v.state = be[b].ok ? KVS_BE_UP :
					     (next() % 2 ? KVS_BE_DOWN : KVS_BE_DRAINING);
			v.max_outstanding = maxo[b];
			v.outstanding = outst[b];
			v.outstanding_work = be[b].load;
			v.place_seed = be[b].seed;
			v.placed = be[b].placed;
		}
		assert_int_equal(bpf_map_update_elem(fd, &b, &v, BPF_ANY), 0);
	}
}

static int run_probe(struct place_probe_bpf *skel, uint64_t key, int spill)
{
	struct {
		uint64_t key;
		uint32_t spill, pad;
	} args = { key, (uint32_t)spill, 0 };
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &args, .ctx_size_in = sizeof(args));

	assert_int_equal(bpf_prog_test_run_opts(bpf_program__fd(skel->progs.place_probe), &o), 0);
	return (int)o.retval;
}

/*
 * Random fleets (1 to 64 slots, some not up, some at their request limit,
 * loads with ties, placement counts near and far apart), each placing a
 * run of keys, a quarter of them as spills: the kernel's build and
 * userspace's pick the same backend and leave the same counts, every time.
 */
static void kernel_and_userspace_agree(void **state)
{
	struct place_probe_bpf *skel = *state;
	struct kvs_place_be be[KVS_MAX_BACKENDS];
	uint32_t maxo[KVS_MAX_BACKENDS], b, f, k, compared = 0;
	uint64_t outst[KVS_MAX_BACKENDS];
	int fd;

	if (!skel)
		skip();
	fd = bpf_map__fd(skel->maps.backends);
	for (f = 0; f < 200; f++) {
		uint32_t n = 1 + (uint32_t)(next() % KVS_MAX_BACKENDS);

		fleet(be, n);
		for (b = 0; b < n; b++) {
			maxo[b] = next() % 4 ? 0 : 8;
			outst[b] = next() % 12;
			be[b].ok = next() % 5 != 0;
			/* as the kernel's may_place() has it */
			if (maxo[b] && outst[b] >= maxo[b])
				be[b].ok = 0;
			/* ties, everyday loads, and loads near 2^40 tokens
			 * (fixed-point overflow would show as a disagreement) */
			be[b].load = next() % 3 ? next() % 50000 : 1000;
			if (f % 10 == 9)
				be[b].load = (1ull << 40) - next() % 100000;
			be[b].placed = next() % 2 ? next() % (8 * KVS_PLACE_UNIT) : 0;
		}
		write_fleet(skel, be, n, maxo, outst);
		/* write_fleet drew states for the ineligible: keep its view */
		for (k = 0; k < 20; k++) {
			struct kvs_place_sum s;
			uint64_t key = next();
			int spill = next() % 4 == 0;
			int want = kvs_place_choose(key, be, n, spill, &s);
			int got = run_probe(skel, key, spill);

			if (want >= 0 && !spill)
				be[want].placed += KVS_PLACE_UNIT;
			assert_int_equal(got, want);
			for (b = 0; b < n; b++) {
				struct kvs_backend v;

				assert_int_equal(bpf_map_lookup_elem(fd, &b, &v), 0);
				assert_true(v.placed == be[b].placed);
			}
			compared++;
		}
	}
	assert_int_equal(compared, 4000);
}

/*
 * Random fleets: the kernel's build of a hot route's replica set
 * (hot_members, the verdict's pass) and userspace's (kvs_hot_members, the
 * simulator's) hold the same backends, for every k from 1 to past the
 * fleet, with the holder up or not.
 */
static void hot_members_agree(void **state)
{
	struct place_probe_bpf *skel = *state;
	struct kvs_place_be be[KVS_MAX_BACKENDS];
	uint32_t maxo[KVS_MAX_BACKENDS] = { 0 }, b, f, k, zero = 0, compared = 0;
	uint64_t outst[KVS_MAX_BACKENDS] = { 0 };

	if (!skel)
		skip();
	for (f = 0; f < 100; f++) {
		uint32_t n = 1 + (uint32_t)(next() % KVS_MAX_BACKENDS);

		fleet(be, n);
		for (b = 0; b < n; b++) {
			be[b].ok = next() % 5 != 0;
			be[b].load = next() % 50000;
		}
		write_fleet(skel, be, n, maxo, outst);
		for (k = 1; k <= KVS_HOT_MAX + 2; k++) {
			struct {
				uint64_t key;
				uint32_t holder, k;
			} args = { next(), (uint32_t)(next() % n), k };
			LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &args,
				    .ctx_size_in = sizeof(args));
			uint64_t want = kvs_hot_members(args.key, args.holder, be, n, k), got = 0;
			uint32_t members = 0;

			assert_int_equal(
				bpf_prog_test_run_opts(bpf_program__fd(skel->progs.hot_probe), &o),
				0);
			assert_int_equal(o.retval, 0);
			assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.hot_out), &zero,
							     &got),
					 0);
			assert_true(got == want);
			for (b = 0; b < n; b++)
				members += (uint32_t)(want >> b & 1);
			/* k of the eligible (all of them if fewer), the holder if up */
			assert_true(members <= k && members <= KVS_HOT_MAX);
			if (be[args.holder].ok)
				assert_true(want >> args.holder & 1);
			compared++;
		}
	}
	assert_int_equal(compared, 100 * (KVS_HOT_MAX + 2));
}

/* A route's rate and the replicas it needs: a few requests a window are
 * noise however large; past noise, k follows rate x charge / share. */
static void hot_replicas_follow_the_rate(void **state)
{
	__u64 at = 0;
	__u32 cur = 0, prev = 0, i;
	uint64_t share = 10000;

	(void)state;
	/* 3 requests of 1M tokens in a window: noise, one replica */
	for (i = 0; i < 3; i++)
		kvs_hot_count(&at, &cur, &prev, 5000000000ULL + i);
	assert_int_equal(kvs_hot_replicas(kvs_hot_rate(at, cur, prev, 5000000002ULL), 1000000,
					  share, 64),
			 1);
	/* 40 requests of 1,000 tokens: 40,000 a window, 4 shares */
	for (i = 3; i < 40; i++)
		kvs_hot_count(&at, &cur, &prev, 5000000000ULL + i);
	assert_int_equal(
		kvs_hot_replicas(kvs_hot_rate(at, cur, prev, 5000000040ULL), 1000, share, 64), 4);
	assert_int_equal(kvs_hot_replicas(kvs_hot_rate(at, cur, prev, 5000000040ULL), 1000, share,
					  3),
			 3); /* no more than the backends */
	assert_int_equal(kvs_hot_replicas(kvs_hot_rate(at, cur, prev, 5000000040ULL), 1000, 0, 64),
			 1); /* share unknown */
	/* one more half a window into the next: the previous counts half */
	kvs_hot_count(&at, &cur, &prev, 6500000000ULL);
	assert_int_equal(kvs_hot_rate(at, cur, prev, 6500000000ULL), 21 * KVS_HOT_FP);
	/* two windows on, only itself */
	kvs_hot_count(&at, &cur, &prev, 8600000000ULL);
	assert_int_equal(kvs_hot_rate(at, cur, prev, 8600000000ULL), KVS_HOT_FP);
}

static int setup_probe(void **state)
{
	struct place_probe_bpf *skel;

	*state = NULL;
	if (geteuid() != 0) {
		fprintf(stderr, "test_place: not root, the BPF comparison is skipped\n");
		return 0;
	}
	skel = place_probe_bpf__open();
	assert_non_null(skel);
	if (place_probe_bpf__load(skel)) {
		place_probe_bpf__destroy(skel);
		fail_msg("the placement probe does not load: the verdict's placement code no "
			 "longer verifies as a standalone program");
	}
	*state = skel;
	return 0;
}

static int teardown_probe(void **state)
{
	place_probe_bpf__destroy(*state);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(never_above_the_load_bound),
		cmocka_unit_test(new_prefixes_spread),
		cmocka_unit_test(gateways_agree_and_keys_stay),
		cmocka_unit_test(spills_follow_the_score),
		cmocka_unit_test(new_prefixes_go_to_the_least_loaded),
		cmocka_unit_test(nobody_eligible),
		cmocka_unit_test(depth_of_the_key),
		cmocka_unit_test(hot_replicas_follow_the_rate),
		cmocka_unit_test_setup_teardown(kernel_and_userspace_agree, setup_probe,
						teardown_probe),
		cmocka_unit_test_setup_teardown(hot_members_agree, setup_probe, teardown_probe),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
