/* SPDX-License-Identifier: MIT */
/*
 * A prefix cache of KV blocks keyed by chained block hash, like vLLM's
 * automatic prefix caching: a fixed capacity in blocks; blocks in use by a
 * running request are pinned (reference counted); unreferenced blocks stay
 * cached and are evicted least recently used first. Pure: no I/O.
 */
#ifndef KVS_PREFIX_CACHE_H
#define KVS_PREFIX_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct kvs_pcache_node {
	uint64_t hash;
	uint32_t refs;
	uint32_t prev, next; /* evictable list, LRU first; KVS_PC_NIL ends */
	uint32_t marked;     /* the owner asked to hear when it is evicted */
};

#define KVS_PC_NIL UINT32_MAX

/* A hash-table slot: the node, and 32 bits of the mixed hash (its home slot
 * and a tag), so probing and deletion read no node until a tag matches. */
struct kvs_pcache_slot {
	uint32_t node; /* KVS_PC_NIL: empty */
	uint32_t mix;
};

struct kvs_pcache {
	uint32_t capacity;     /* blocks */
	uint32_t max_capacity; /* blocks allocated (set_capacity may grow it) */
	uint32_t used;	       /* blocks cached (pinned or not) */
	uint32_t table_mask;   /* table size - 1 (power of two) */
	struct kvs_pcache_slot *table;
	struct kvs_pcache_node *nodes;
	uint32_t free_head; /* unused nodes, linked through next */
	uint32_t lru_head, lru_tail;
	uint32_t evictable; /* blocks on the LRU list (unpinned) */
	/* Called when a marked block is evicted (not when the cache is freed). */
	void (*on_evict)(void *ctx, uint64_t hash);
	void *evict_ctx;
	uint64_t evictions;
	/* touch()'s node index per block, kept between calls (no allocation
	 * per decision) */
	uint32_t *scratch;
	uint32_t scratch_cap;
};

int kvs_pcache_init(struct kvs_pcache *c, uint32_t capacity_blocks);
void kvs_pcache_free(struct kvs_pcache *c);

/* How many of hashes[0..n) are cached, counting from the first: the length
 * of the cached prefix in blocks. No side effects. */
uint32_t kvs_pcache_match(const struct kvs_pcache *c, const uint64_t *hashes, uint32_t n);

/*
 * The same length by binary search: O(log n) lookups instead of n. Exact
 * when what the cache holds of a chain is a prefix of it, which is how
 * prefix caches fill (block i is only computed after blocks 0..i-1) and
 * empty (a prompt's tail is evicted before its head); a gateway's index of
 * a backend, which is never pinned, keeps that shape.
 */
uint32_t kvs_pcache_match_prefix(const struct kvs_pcache *c, const uint64_t *hashes, uint32_t n);

/*
 * Records hashes[0..n) as just used without pinning them, as an index of
 * what a backend holds does when a prompt is sent there: most recently
 * used, tail first in line for eviction. A prompt longer than the cache
 * keeps its head. Needs nothing pinned (it cannot then fail for room).
 */
void kvs_pcache_touch(struct kvs_pcache *c, const uint64_t *hashes, uint32_t n);

/*
 * Pins hashes[0..n) for a running request, inserting the missing ones and
 * evicting unpinned blocks LRU-first to make room. Returns 0, or -ENOSPC
 * when pinned blocks leave no room (nothing is inserted or evicted then;
 * the blocks it had found cached count as just used).
 */
int kvs_pcache_acquire(struct kvs_pcache *c, const uint64_t *hashes, uint32_t n);

/*
 * Unpins them when the request finishes. They stay cached; the deepest block
 * becomes the first to go, as vLLM frees a request's blocks tail first, so
 * a shared head outlives the private tails of the prompts that used it.
 */
void kvs_pcache_release(struct kvs_pcache *c, const uint64_t *hashes, uint32_t n);

int kvs_pcache_contains(const struct kvs_pcache *c, uint64_t hash);

/* Asks for on_evict when hash (if cached) is evicted. Returns whether it is. */
int kvs_pcache_mark(struct kvs_pcache *c, uint64_t hash);

/*
 * Changes the capacity, evicting unpinned blocks LRU-first until what is
 * cached fits; above the largest it had, its memory grows (max_capacity
 * follows; it is never given back). Returns the new capacity: it cannot
 * fall below what is pinned, nor rise where memory runs out (it stays at
 * what was allocated then), nor above 2^30.
 */
uint32_t kvs_pcache_set_capacity(struct kvs_pcache *c, uint32_t capacity);

#endif
