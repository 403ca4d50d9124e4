// SPDX-License-Identifier: MIT
/* The prefix cache: hit counting, LRU eviction order, pinning, and
 * tail-first release like vLLM. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "prefix_cache.h"

static void prefix_match_counts_from_the_start(void **state)
{
	struct kvs_pcache c;
	uint64_t a[4] = { 11, 12, 13, 14 }, b[4] = { 11, 12, 99, 14 };

	(void)state;
	assert_int_equal(kvs_pcache_init(&c, 8), 0);
	assert_int_equal(kvs_pcache_match(&c, a, 4), 0);
	assert_int_equal(kvs_pcache_acquire(&c, a, 4), 0);
	kvs_pcache_release(&c, a, 4);
	assert_int_equal(kvs_pcache_match(&c, a, 4), 4);
	/* 14 is cached, but after a miss it does not count. */
	assert_int_equal(kvs_pcache_match(&c, b, 4), 2);
	assert_int_equal(c.used, 4);
	kvs_pcache_free(&c);
}

/* The binary search agrees with the linear count on caches that hold a
 * prefix of each chain, including after tail-first eviction. */
static void binary_prefix_match_agrees(void **state)
{
	struct kvs_pcache c;
	uint64_t a[40], b[40];
	uint32_t i, n;

	(void)state;
	for (i = 0; i < 40; i++) {
		a[i] = 1000 + i;
		b[i] = 2000 + i;
	}
	assert_int_equal(kvs_pcache_init(&c, 64), 0);
	for (n = 0; n <= 40; n++)
		assert_int_equal(kvs_pcache_match_prefix(&c, a, n), 0);
	kvs_pcache_touch(&c, a, 40);
	for (n = 0; n <= 40; n++)
		assert_int_equal(kvs_pcache_match_prefix(&c, a, n), n);
	kvs_pcache_touch(&c, b, 40); /* 16 of a's blocks go, its tail first */
	assert_int_equal(kvs_pcache_match(&c, a, 40), 24);
	assert_int_equal(kvs_pcache_match_prefix(&c, a, 40), 24);
	assert_int_equal(kvs_pcache_match_prefix(&c, b, 40), 40);
	kvs_pcache_free(&c);
}

/* touch: unpinned, most recently used; a prompt longer than the cache keeps
 * its head. */
static void touch_keeps_the_head(void **state)
{
	struct kvs_pcache c;
	uint64_t a[12];
	uint32_t i;

	(void)state;
	for (i = 0; i < 12; i++)
		a[i] = 500 + i;
	assert_int_equal(kvs_pcache_init(&c, 8), 0);
	kvs_pcache_touch(&c, a, 12);
	assert_int_equal(c.used, 8);
	assert_int_equal(c.evictable, 8);
	assert_int_equal(kvs_pcache_match(&c, a, 12), 8);
	kvs_pcache_free(&c);
}

static void lru_eviction_order(void **state)
{
	struct kvs_pcache c;
	uint64_t a[2] = { 1, 2 }, b[2] = { 3, 4 }, d[2] = { 5, 6 };

	(void)state;
	assert_int_equal(kvs_pcache_init(&c, 4), 0);
	kvs_pcache_acquire(&c, a, 2);
	kvs_pcache_release(&c, a, 2);
	kvs_pcache_acquire(&c, b, 2);
	kvs_pcache_release(&c, b, 2);
	/* Touch a: now b is least recently used. */
	kvs_pcache_acquire(&c, a, 2);
	kvs_pcache_release(&c, a, 2);
	kvs_pcache_acquire(&c, d, 2);
	kvs_pcache_release(&c, d, 2);
	assert_int_equal(kvs_pcache_match(&c, a, 2), 2);
	assert_false(kvs_pcache_contains(&c, 3));
	assert_false(kvs_pcache_contains(&c, 4));
	assert_int_equal(kvs_pcache_match(&c, d, 2), 2);
	assert_int_equal(c.evictions, 2);
	kvs_pcache_free(&c);
}

/* Released tail first: under pressure the deepest block of a prompt goes
 * before its head, so a shared head survives. */
static void release_tail_first(void **state)
{
	struct kvs_pcache c;
	uint64_t a[3] = { 1, 2, 3 }, x[1] = { 9 };

	(void)state;
	assert_int_equal(kvs_pcache_init(&c, 3), 0);
	kvs_pcache_acquire(&c, a, 3);
	kvs_pcache_release(&c, a, 3);
	kvs_pcache_acquire(&c, x, 1);
	assert_false(kvs_pcache_contains(&c, 3));
	assert_true(kvs_pcache_contains(&c, 1));
	assert_true(kvs_pcache_contains(&c, 2));
	kvs_pcache_free(&c);
}

static void pinned_blocks_are_not_evicted(void **state)
{
	struct kvs_pcache c;
	uint64_t a[3] = { 1, 2, 3 }, b[2] = { 4, 5 }, d[1] = { 6 }, e[1] = { 7 };

	(void)state;
	assert_int_equal(kvs_pcache_init(&c, 4), 0);
	assert_int_equal(kvs_pcache_acquire(&c, a, 3), 0);
	/* Room for one more, and nothing evictable: two do not fit. */
	assert_int_equal(kvs_pcache_acquire(&c, b, 2), -ENOSPC);
	assert_int_equal(c.used, 3);
	assert_int_equal(kvs_pcache_acquire(&c, d, 1), 0);
	kvs_pcache_release(&c, d, 1);
	/* Full; only 6 is evictable: two blocks still do not fit, one does. */
	assert_int_equal(kvs_pcache_acquire(&c, b, 2), -ENOSPC);
	assert_int_equal(kvs_pcache_acquire(&c, e, 1), 0);
	assert_false(kvs_pcache_contains(&c, 6));
	assert_int_equal(kvs_pcache_match(&c, a, 3), 3);
	/* Unpin a: 4,5 now fit by evicting a's tail (3, then 2), not its head. */
	kvs_pcache_release(&c, a, 3);
	assert_int_equal(kvs_pcache_acquire(&c, b, 2), 0);
	assert_int_equal(kvs_pcache_match(&c, a, 3), 1);
	assert_true(kvs_pcache_contains(&c, 7));
	kvs_pcache_free(&c);
}

/* Many inserts and evictions keep the table consistent (backward-shift
 * deletion must not lose entries that probed past a deleted one). */
static void churn_keeps_table_consistent(void **state)
{
	struct kvs_pcache c;
	uint64_t h;
	uint32_t i, j;

	(void)state;
	assert_int_equal(kvs_pcache_init(&c, 64), 0);
	for (i = 0; i < 5000; i++) {
		h = (uint64_t)i * 0x9E3779B97F4A7C15ull + 1;
		assert_int_equal(kvs_pcache_acquire(&c, &h, 1), 0);
		kvs_pcache_release(&c, &h, 1);
		if (i >= 64) {
			/* exactly the 64 most recent are present */
			for (j = i - 63; j <= i; j++) {
				uint64_t k = (uint64_t)j * 0x9E3779B97F4A7C15ull + 1;

				assert_true(kvs_pcache_contains(&c, k));
			}
			h = (uint64_t)(i - 64) * 0x9E3779B97F4A7C15ull + 1;
			assert_false(kvs_pcache_contains(&c, h));
		}
	}
	assert_int_equal(c.used, 64);
	kvs_pcache_free(&c);
}

static uint64_t evicted[16];
static int nevicted;

static void record_evict(void *ctx, uint64_t hash)
{
	(void)ctx;
	evicted[nevicted++] = hash;
}

/* Only marked blocks are reported, when evicted (not when freed). */
static void eviction_of_marked_blocks_is_reported(void **state)
{
	struct kvs_pcache c;
	uint64_t a[3] = { 1, 2, 3 }, b[3] = { 4, 5, 6 };

	(void)state;
	nevicted = 0;
	assert_int_equal(kvs_pcache_init(&c, 3), 0);
	c.on_evict = record_evict;
	kvs_pcache_acquire(&c, a, 3);
	kvs_pcache_release(&c, a, 3);
	assert_true(kvs_pcache_mark(&c, 1));
	assert_true(kvs_pcache_mark(&c, 3));
	assert_false(kvs_pcache_mark(&c, 99));
	kvs_pcache_acquire(&c, b, 3);
	kvs_pcache_release(&c, b, 3);
	assert_int_equal(nevicted, 2); /* 1 and 3, not 2 */
	assert_true((evicted[0] == 3 && evicted[1] == 1) || (evicted[0] == 1 && evicted[1] == 3));
	kvs_pcache_mark(&c, 5);
	kvs_pcache_free(&c);
	assert_int_equal(nevicted, 2);
}

/* Two caches hold the same blocks in the same LRU order, with the same
 * counts, and the same blocks pinned as often. */
static void assert_same_cache(const struct kvs_pcache *a, const struct kvs_pcache *b)
{
	uint32_t i = a->lru_head, j = b->lru_head;

	assert_int_equal(a->used, b->used);
	assert_int_equal(a->evictable, b->evictable);
	assert_int_equal(a->evictions, b->evictions);
	while (i != KVS_PC_NIL && j != KVS_PC_NIL) {
		assert_true(a->nodes[i].hash == b->nodes[j].hash);
		i = a->nodes[i].next;
		j = b->nodes[j].next;
	}
	assert_int_equal(i, KVS_PC_NIL);
	assert_int_equal(j, KVS_PC_NIL);
	for (i = 0; i <= a->table_mask; i++) {
		uint32_t k = a->table[i].node;

		if (k == KVS_PC_NIL)
			continue;
		assert_true(kvs_pcache_contains(b, a->nodes[k].hash));
	}
}

/*
 * touch() looks each block up once and remembers where it is; it must leave
 * the cache exactly as acquire() then release() do (what it was before),
 * through eviction, chains that share heads, a hash twice in one chain, and
 * other requests' pinned blocks leaving no room.
 */
static void touch_equals_acquire_then_release(void **state)
{
	struct kvs_pcache a, b;
	uint64_t h[64], pinned[40], rng = 12345;
	uint32_t round, i;

	(void)state;
	assert_int_equal(kvs_pcache_init(&a, 100), 0);
	assert_int_equal(kvs_pcache_init(&b, 100), 0);
	for (i = 0; i < 40; i++)
		pinned[i] = 900000 + i;
	for (round = 0; round < 3000; round++) {
		uint32_t n, head;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		n = 1 + (uint32_t)(rng >> 33) % 64;
		head = (uint32_t)(rng >> 20) % 8; /* one of 8 shared heads */
		for (i = 0; i < n; i++)
			h[i] = i < n / 2 ? 1000 * (head + 1) + i : (rng >> 7) + i;
		if (round % 97 == 0 && n > 2)
			h[n - 1] = h[0]; /* the same hash twice in one chain */
		if (round == 1000) {	 /* another request pins 40 of the 100 blocks */
			assert_int_equal(kvs_pcache_acquire(&a, pinned, 40), 0);
			assert_int_equal(kvs_pcache_acquire(&b, pinned, 40), 0);
		}
		if (round == 2000) {
			kvs_pcache_release(&a, pinned, 40);
			kvs_pcache_release(&b, pinned, 40);
		}
		kvs_pcache_touch(&a, h, n);
		if (kvs_pcache_acquire(&b, h, n > b.capacity ? b.capacity : n) == 0)
			kvs_pcache_release(&b, h, n > b.capacity ? b.capacity : n);
		assert_same_cache(&a, &b);
	}
	kvs_pcache_free(&a);
	kvs_pcache_free(&b);
}

/* Growing past the size it was made with keeps what it holds, in LRU
 * order, and the new room is used before anything is evicted; shrinking
 * back evicts LRU-first. */
static void grows_past_its_first_size(void **state)
{
	struct kvs_pcache c;
	uint64_t h[300];
	uint32_t i;

	(void)state;
	for (i = 0; i < 300; i++)
		h[i] = 1000 + i;
	assert_int_equal(kvs_pcache_init(&c, 8), 0);
	for (i = 0; i < 8; i++)
		kvs_pcache_touch(&c, &h[i], 1); /* h[0] least recent */
	assert_int_equal(kvs_pcache_set_capacity(&c, 300), 300);
	assert_int_equal(c.max_capacity, 300);
	assert_true(c.table_mask + 1 >= 600);
	for (i = 0; i < 8; i++)
		assert_true(kvs_pcache_contains(&c, h[i]));
	for (i = 8; i < 300; i++)
		kvs_pcache_touch(&c, &h[i], 1);
	assert_int_equal(c.used, 300);
	assert_int_equal(c.evictions, 0);
	for (i = 0; i < 300; i++)
		assert_true(kvs_pcache_contains(&c, h[i]));
	assert_int_equal(kvs_pcache_set_capacity(&c, 100), 100);
	assert_int_equal(c.evictions, 200);
	assert_false(kvs_pcache_contains(&c, h[199]));
	assert_true(kvs_pcache_contains(&c, h[200]));
	kvs_pcache_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(prefix_match_counts_from_the_start),
		cmocka_unit_test(binary_prefix_match_agrees),
		cmocka_unit_test(touch_keeps_the_head),
		cmocka_unit_test(touch_equals_acquire_then_release),
		cmocka_unit_test(lru_eviction_order),
		cmocka_unit_test(release_tail_first),
		cmocka_unit_test(pinned_blocks_are_not_evicted),
		cmocka_unit_test(churn_keeps_table_consistent),
		cmocka_unit_test(eviction_of_marked_blocks_is_reported),
		cmocka_unit_test(grows_past_its_first_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
