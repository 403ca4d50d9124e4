// SPDX-License-Identifier: MIT
/* SGLang's approximate radix tree at block granularity (sim_sgltree.h). */
#include "sim_sgltree.h"

#include <stdlib.h>
#include <string.h>

#include "kvsplice/hash.h"

int sim_sgltree_init(struct sim_sgltree *t, uint32_t ntenants)
{
	memset(t, 0, sizeof(*t));
	t->ntenants = ntenants;
	return sim_bmap_init(&t->index);
}

void sim_sgltree_free(struct sim_sgltree *t)
{
	sim_bmap_free(&t->index);
	free(t->hash);
	free(t->parent);
	free(t->tenants);
	free(t->ts);
	memset(t, 0, sizeof(*t));
}

static int grow(struct sim_sgltree *t)
{
	uint32_t cap = t->cap ? t->cap * 2 : 4096;
	void *p;

#define GROW(field, per)                                                                           \
	p = realloc(t->field, sizeof(*t->field) * (size_t)cap * (per));                            \
	if (!p)                                                                                    \
		return -1;                                                                         \
	t->field = p;
	GROW(hash, 1)
	GROW(parent, 1)
	GROW(tenants, 1)
	GROW(ts, t->ntenants)
#undef GROW
	t->cap = cap;
	return 0;
}

/* The node of hash, or SIM_BMAP_NONE. A node no tenant holds is gone
 * upstream; here it stays, empty, for its hash to reuse. */
static uint32_t node_of(const struct sim_sgltree *t, uint64_t hash)
{
	uint32_t x = sim_bmap_get(&t->index, hash);

	return x != SIM_BMAP_NONE && t->tenants[x] ? x : SIM_BMAP_NONE;
}

/* The first of node x's tenants in the order of its own hash map:
 * fixed for a node and its tenants, different from node to node. */
static int first_tenant(const struct sim_sgltree *t, uint32_t x)
{
	uint64_t m = t->tenants[x], key, best = UINT64_MAX;
	int te, first = -1;

	for (; m; m &= m - 1) {
		te = __builtin_ctzll(m);
		key = kvs_fmix64(t->hash[x] + (uint64_t)te * 0x9e3779b97f4a7c15ull);
		if (key < best) {
			best = key;
			first = te;
		}
	}
	return first;
}

uint32_t sim_sgltree_match(struct sim_sgltree *t, const uint64_t *h, uint32_t n, int *tenant)
{
	uint32_t i, x = SIM_BMAP_NONE, y;

	for (i = 0; i < n && (y = node_of(t, h[i])) != SIM_BMAP_NONE; i++)
		x = y;
	*tenant = -1;
	if (x == SIM_BMAP_NONE)
		return 0;
	*tenant = first_tenant(t, x);
	t->clock++;
	/* every ancestor holds the tenant: insert() fills whole paths and
	 * eviction takes leaves first */
	for (; x != SIM_BMAP_NONE; x = t->parent[x])
		t->ts[(size_t)x * t->ntenants + (uint32_t)*tenant] = t->clock;
	return i;
}

int sim_sgltree_insert(struct sim_sgltree *t, const uint64_t *h, uint32_t n, uint32_t tenant)
{
	uint32_t i, x, up = SIM_BMAP_NONE;
	uint64_t bit = 1ull << tenant;

	t->clock++;
	for (i = 0; i < n; i++, up = x) {
		x = sim_bmap_get(&t->index, h[i]);
		if (x == SIM_BMAP_NONE) {
			if (t->nnodes == t->cap && grow(t))
				return -1;
			x = t->nnodes;
			if (sim_bmap_put(&t->index, h[i], x))
				return -1;
			t->nnodes++;
			t->hash[x] = h[i];
			t->tenants[x] = 0;
		}
		t->parent[x] = up;
		if (!(t->tenants[x] & bit)) {
			t->tenants[x] |= bit;
			t->size[tenant]++;
		}
		t->ts[(size_t)x * t->ntenants + tenant] = t->clock;
	}
	return 0;
}

/* A min-heap of (access, node), least recent on top. */
struct heap {
	uint64_t *e; /* access << 32 | node */
	uint32_t n;
};

static void heap_push(struct heap *hp, uint64_t v)
{
	uint32_t i = hp->n++;

	while (i && hp->e[(i - 1) / 2] > v) {
		hp->e[i] = hp->e[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	hp->e[i] = v;
}

static uint64_t heap_pop(struct heap *hp)
{
	uint64_t top = hp->e[0], v = hp->e[--hp->n];
	uint32_t i = 0, c;

	while ((c = 2 * i + 1) < hp->n) {
		if (c + 1 < hp->n && hp->e[c + 1] < hp->e[c])
			c++;
		if (hp->e[c] >= v)
			break;
		hp->e[i] = hp->e[c];
		i = c;
	}
	hp->e[i] = v;
	return top;
}

/* Tenant te's leaves go, least recently used first, until it fits;
 * kids[x] counts x's children that te holds. */
static void evict_tenant(struct sim_sgltree *t, uint32_t te, uint64_t max, uint32_t *kids,
			 struct heap *hp)
{
	uint64_t bit = 1ull << te;
	uint32_t x, up;

	memset(kids, 0, sizeof(*kids) * t->nnodes);
	for (x = 0; x < t->nnodes; x++)
		if ((t->tenants[x] & bit) && t->parent[x] != SIM_BMAP_NONE)
			kids[t->parent[x]]++;
	hp->n = 0;
	for (x = 0; x < t->nnodes; x++)
		if ((t->tenants[x] & bit) && !kids[x])
			heap_push(hp, (uint64_t)t->ts[(size_t)x * t->ntenants + te] << 32 | x);
	while (t->size[te] > max && hp->n) {
		x = (uint32_t)heap_pop(hp);
		t->tenants[x] &= ~bit;
		t->size[te]--;
		up = t->parent[x];
		if (up != SIM_BMAP_NONE && !--kids[up])
			heap_push(hp, (uint64_t)t->ts[(size_t)up * t->ntenants + te] << 32 | up);
	}
}

int sim_sgltree_evict(struct sim_sgltree *t, uint64_t max)
{
	struct heap hp = { 0 };
	uint32_t te, *kids = NULL;

	for (te = 0; te < t->ntenants; te++) {
		if (t->size[te] <= max)
			continue;
		if (!kids) {
			kids = malloc(sizeof(*kids) * (t->nnodes + 1));
			hp.e = malloc(sizeof(*hp.e) * (t->nnodes + 1));
			if (!kids || !hp.e) {
				free(kids);
				free(hp.e);
				return -1;
			}
		}
		evict_tenant(t, te, max, kids, &hp);
	}
	free(kids);
	free(hp.e);
	return 0;
}
