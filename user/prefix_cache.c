// SPDX-License-Identifier: MIT
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
		c->table[i] = KVS_PC_NIL;
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
	c->table = NULL;
	c->nodes = NULL;
}

static uint32_t slot_of(const struct kvs_pcache *c, uint64_t hash)
{
	return (uint32_t)kvs_fmix64(hash) & c->table_mask;
}

/* Table slot holding hash, or the empty slot where it would go. */
static uint32_t find_slot(const struct kvs_pcache *c, uint64_t hash)
{
	uint32_t s = slot_of(c, hash);

	while (c->table[s] != KVS_PC_NIL && c->nodes[c->table[s]].hash != hash)
		s = (s + 1) & c->table_mask;
	return s;
}

static uint32_t find(const struct kvs_pcache *c, uint64_t hash)
{
	return c->table[find_slot(c, hash)];
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

	if (c->table[s] == KVS_PC_NIL)
		return;
	for (;;) {
		uint32_t home;

		j = (j + 1) & c->table_mask;
		if (c->table[j] == KVS_PC_NIL)
			break;
		home = slot_of(c, c->nodes[c->table[j]].hash);
		/* Move j's entry into the hole at s unless its home lies
		 * cyclically in (s, j]. */
		if ((j > s && (home <= s || home > j)) || (j < s && home <= s && home > j)) {
			c->table[s] = c->table[j];
			s = j;
		}
	}
	c->table[s] = KVS_PC_NIL;
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

void kvs_pcache_touch(struct kvs_pcache *c, const uint64_t *hashes, uint32_t n)
{
	if (n > c->capacity)
		n = c->capacity;
	if (kvs_pcache_acquire(c, hashes, n) == 0)
		kvs_pcache_release(c, hashes, n);
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
			.hash = hashes[i], .refs = 1, .prev = KVS_PC_NIL, .next = KVS_PC_NIL,
		};
		c->table[find_slot(c, hashes[i])] = k;
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

uint32_t kvs_pcache_set_capacity(struct kvs_pcache *c, uint32_t capacity)
{
	if (capacity > c->max_capacity)
		capacity = c->max_capacity;
	while (c->used > capacity && c->lru_head != KVS_PC_NIL)
		evict_lru(c);
	c->capacity = capacity > c->used ? capacity : c->used;
	return c->capacity;
}
