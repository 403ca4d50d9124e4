// SPDX-License-Identifier: MIT
/* A prefix cache of KV blocks by chained hash, LRU like vLLM's. */
#include "prefix_cache.h"

#include <errno.h>
#include <stdlib.h>

#include "kvsplice/hash.h"

int kvs_pcache_init(struct kvs_pcache *c, uint32_t capacity_blocks)
{
	uint32_t size = 16, i;

	*c = (struct kvs_pcache){ .capacity = capacity_blocks, .max_capacity = capacity_blocks };
	if (capacity_blocks == 0 || capacity_blocks > (1u << 30))
		return -EINVAL;
	while (size < 2 * capacity_blocks)
		size *= 2;
	c->table = malloc(sizeof(*c->table) * size);
	c->nodes = malloc(sizeof(*c->nodes) * capacity_blocks);
	if (!c->table || !c->nodes) {
		kvs_pcache_free(c);
		return -ENOMEM;
	}
	for (i = 0; i < size; i++)
		c->table[i] = (struct kvs_pcache_slot){ .node = KVS_PC_NIL };
	for (i = 0; i < capacity_blocks; i++)
		c->nodes[i].next = i + 1 < capacity_blocks ? i + 1 : KVS_PC_NIL;
	c->table_mask = size - 1;
	c->free_head = 0;
	c->lru_head = c->lru_tail = KVS_PC_NIL;
	return 0;
}

void kvs_pcache_free(struct kvs_pcache *c)
{
	free(c->table);
	free(c->nodes);
	free(c->scratch);
	c->table = NULL;
	c->nodes = NULL;
	c->scratch = NULL;
	c->scratch_cap = 0;
}

static uint32_t mix_of(uint64_t hash)
{
	return (uint32_t)kvs_fmix64(hash);
}

/* Table slot holding hash, or the empty slot where it would go. */
static uint32_t find_slot(const struct kvs_pcache *c, uint64_t hash)
{
	uint32_t mix = mix_of(hash), s = mix & c->table_mask;

	for (;; s = (s + 1) & c->table_mask) {
		const struct kvs_pcache_slot *t = &c->table[s];

		if (t->node == KVS_PC_NIL || (t->mix == mix && c->nodes[t->node].hash == hash))
			return s;
	}
}

static uint32_t find(const struct kvs_pcache *c, uint64_t hash)
{
	return c->table[find_slot(c, hash)].node;
}

/* Puts node k (holding hash) into the empty slot s. */
static void table_put(struct kvs_pcache *c, uint32_t s, uint32_t k, uint64_t hash)
{
	c->table[s] = (struct kvs_pcache_slot){ .node = k, .mix = mix_of(hash) };
}

int kvs_pcache_contains(const struct kvs_pcache *c, uint64_t hash)
{
	return find(c, hash) != KVS_PC_NIL;
}

int kvs_pcache_mark(struct kvs_pcache *c, uint64_t hash)
{
	uint32_t k = find(c, hash);

	if (k == KVS_PC_NIL)
		return 0;
	c->nodes[k].marked = 1;
	return 1;
}

/* Linear probing with backward-shift deletion: no tombstones to pile up. */
static void table_remove(struct kvs_pcache *c, uint64_t hash)
{
	uint32_t s = find_slot(c, hash), j = s;

	if (c->table[s].node == KVS_PC_NIL)
		return;
	for (;;) {
		uint32_t home;

		j = (j + 1) & c->table_mask;
		if (c->table[j].node == KVS_PC_NIL)
			break;
		home = c->table[j].mix & c->table_mask;
		/* Move j's entry into the hole at s unless its home lies
		 * cyclically in (s, j]. */
		if ((j > s && (home <= s || home > j)) || (j < s && home <= s && home > j)) {
			c->table[s] = c->table[j];
			s = j;
		}
	}
	c->table[s].node = KVS_PC_NIL;
}

static void lru_unlink(struct kvs_pcache *c, uint32_t i)
{
	struct kvs_pcache_node *n = &c->nodes[i];

	if (n->prev != KVS_PC_NIL)
		c->nodes[n->prev].next = n->next;
	else
		c->lru_head = n->next;
	if (n->next != KVS_PC_NIL)
		c->nodes[n->next].prev = n->prev;
	else
		c->lru_tail = n->prev;
	n->prev = n->next = KVS_PC_NIL;
	c->evictable--;
}

static void lru_push_mru(struct kvs_pcache *c, uint32_t i)
{
	struct kvs_pcache_node *n = &c->nodes[i];

	n->prev = c->lru_tail;
	n->next = KVS_PC_NIL;
	if (c->lru_tail != KVS_PC_NIL)
		c->nodes[c->lru_tail].next = i;
	else
		c->lru_head = i;
	c->lru_tail = i;
	c->evictable++;
}

static void evict_lru(struct kvs_pcache *c)
{
	uint32_t i = c->lru_head;

	if (c->nodes[i].marked && c->on_evict)
		c->on_evict(c->evict_ctx, c->nodes[i].hash);
	lru_unlink(c, i);
	table_remove(c, c->nodes[i].hash);
	c->nodes[i].next = c->free_head;
	c->free_head = i;
	c->used--;
	c->evictions++;
}

uint32_t kvs_pcache_match(const struct kvs_pcache *c, const uint64_t *hashes, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (find(c, hashes[i]) == KVS_PC_NIL)
			break;
	return i;
}

uint32_t kvs_pcache_match_prefix(const struct kvs_pcache *c, const uint64_t *hashes, uint32_t n)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;

		if (find(c, hashes[mid - 1]) != KVS_PC_NIL)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/*
 * acquire() then release(), with each block looked up once instead of three
 * times: the node each block was found at or inserted into is remembered.
 * Pinned or freshly inserted nodes cannot be evicted or reused in between,
 * so the remembered index stays that block's. The index lookups are the
 * largest cost of a slow-path decision (docs/EVALUATION.md, "Slow path").
 */
void kvs_pcache_touch(struct kvs_pcache *c, const uint64_t *hashes, uint32_t n)
{
	uint32_t *idx, missing = 0, i;

	if (n > c->capacity)
		n = c->capacity;
	if (n > c->scratch_cap) {
		uint32_t *s = realloc(c->scratch, sizeof(*s) * n);

		if (!s) { /* the same, slower */
			if (kvs_pcache_acquire(c, hashes, n) == 0)
				kvs_pcache_release(c, hashes, n);
			return;
		}
		c->scratch = s;
		c->scratch_cap = n;
	}
	idx = c->scratch;
	/* Pin what is cached first, so that making room cannot evict it. */
	for (i = 0; i < n; i++) {
		idx[i] = find(c, hashes[i]);
		if (idx[i] == KVS_PC_NIL)
			missing++;
		else if (c->nodes[idx[i]].refs++ == 0)
			lru_unlink(c, idx[i]);
	}
	/* Only when something else is pinned: insert nothing (the found ones
	 * still count as just used, as with acquire()). */
	if (missing > c->capacity - c->used + c->evictable)
		missing = 0;
	for (i = 0; missing && i < n; i++) {
		uint32_t s, k;

		if (idx[i] != KVS_PC_NIL)
			continue;
		missing--;
		s = find_slot(c, hashes[i]);
		if (c->table[s].node != KVS_PC_NIL) { /* the same hash twice in one chain */
			idx[i] = c->table[s].node;
			continue;
		}
		if (c->used == c->capacity) {
			evict_lru(c);
			s = find_slot(c, hashes[i]); /* the eviction may shift entries */
		}
		k = c->free_head;
		c->free_head = c->nodes[k].next;
		c->nodes[k] = (struct kvs_pcache_node){
			.hash = hashes[i],
			.refs = 1,
			.prev = KVS_PC_NIL,
			.next = KVS_PC_NIL,
		};
		table_put(c, s, k, hashes[i]);
		c->used++;
		idx[i] = k;
	}
	/* Unpin tail first: the deepest block becomes the first to go. */
	for (i = n; i-- > 0;) {
		struct kvs_pcache_node *nd;

		if (idx[i] == KVS_PC_NIL)
			continue;
		nd = &c->nodes[idx[i]];
		if (nd->refs && --nd->refs == 0)
			lru_push_mru(c, idx[i]);
	}
}

int kvs_pcache_acquire(struct kvs_pcache *c, const uint64_t *hashes, uint32_t n)
{
	uint32_t missing = 0, i;

	/* Pin what is cached first, so that making room cannot evict it. */
	for (i = 0; i < n; i++) {
		uint32_t k = find(c, hashes[i]);

		if (k == KVS_PC_NIL) {
			missing++;
			continue;
		}
		if (c->nodes[k].refs++ == 0)
			lru_unlink(c, k);
	}
	if (missing > c->capacity - c->used + c->evictable) {
		kvs_pcache_release(c, hashes, n);
		return -ENOSPC;
	}
	for (i = 0; i < n; i++) {
		uint32_t k;

		if (find(c, hashes[i]) != KVS_PC_NIL)
			continue;
		if (c->used == c->capacity)
			evict_lru(c);
		k = c->free_head;
		c->free_head = c->nodes[k].next;
		c->nodes[k] = (struct kvs_pcache_node){
			.hash = hashes[i],
			.refs = 1,
			.prev = KVS_PC_NIL,
			.next = KVS_PC_NIL,
		};
		table_put(c, find_slot(c, hashes[i]), k, hashes[i]);
		c->used++;
	}
	return 0;
}

void kvs_pcache_release(struct kvs_pcache *c, const uint64_t *hashes, uint32_t n)
{
	uint32_t i;

	for (i = n; i-- > 0;) {
		uint32_t k = find(c, hashes[i]);

		if (k == KVS_PC_NIL || c->nodes[k].refs == 0)
			continue;
		if (--c->nodes[k].refs == 0)
			lru_push_mru(c, k);
	}
}

/* Room for capacity blocks: more nodes (their indices unchanged, the new
 * ones free) and, past half the table, a table twice as large, every entry
 * put back by the mixed hash it keeps (no node read). 0 or -ENOMEM (then
 * nothing changed but, perhaps, the nodes' allocation). */
static int grow(struct kvs_pcache *c, uint32_t capacity)
{
	struct kvs_pcache_node *nodes = realloc(c->nodes, sizeof(*nodes) * capacity);
	struct kvs_pcache_slot *table;
	uint32_t size = c->table_mask + 1, i;

	if (!nodes)
		return -ENOMEM;
	c->nodes = nodes;
	while (size < 2 * capacity)
		size *= 2;
	if (size != c->table_mask + 1) {
		table = malloc(sizeof(*table) * size);
		if (!table)
			return -ENOMEM;
		for (i = 0; i < size; i++)
			table[i] = (struct kvs_pcache_slot){ .node = KVS_PC_NIL };
		for (i = 0; i <= c->table_mask; i++) {
			uint32_t s = c->table[i].mix & (size - 1);

			if (c->table[i].node == KVS_PC_NIL)
				continue;
			while (table[s].node != KVS_PC_NIL)
				s = (s + 1) & (size - 1);
			table[s] = c->table[i];
		}
		free(c->table);
		c->table = table;
		c->table_mask = size - 1;
	}
	for (i = c->max_capacity; i < capacity; i++)
		c->nodes[i].next = i + 1 < capacity ? i + 1 : c->free_head;
	c->free_head = c->max_capacity;
	c->max_capacity = capacity;
	return 0;
}

uint32_t kvs_pcache_set_capacity(struct kvs_pcache *c, uint32_t capacity)
{
	if (capacity > (1u << 30))
		capacity = 1u << 30;
	if (capacity > c->max_capacity && grow(c, capacity))
		capacity = c->max_capacity;
	while (c->used > capacity && c->lru_head != KVS_PC_NIL)
		evict_lru(c);
	c->capacity = capacity > c->used ? capacity : c->used;
	return c->capacity;
}
