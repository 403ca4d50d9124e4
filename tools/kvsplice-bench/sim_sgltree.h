/* SPDX-License-Identifier: MIT */
/*
 * SGLang's approximate radix tree, shared by all workers (tenants), at the
 * simulator's granularity: a node per 16-token block, named by its chained
 * hash (which names the whole prefix, so the radix tree's edges are the
 * hashes' chain). Each node keeps which tenants were routed a prompt
 * through it and when each last was; a tenant's size counts its nodes.
 * The model: sgl-model-gateway/src/policies/tree.rs (sim_baselines.c
 * names the commit).
 */
#ifndef KVS_BENCH_SIM_SGLTREE_H
#define KVS_BENCH_SIM_SGLTREE_H

#include <stdint.h>

#include "sim_bmap.h"

struct sim_sgltree {
	struct sim_bmap index; /* block hash -> node */
	uint64_t *hash;
	uint32_t *parent;  /* SIM_BMAP_NONE: a child of the root */
	uint64_t *tenants; /* bit t: tenant t holds the node */
	uint32_t *ts;	   /* [node * ntenants + t]: tenant t's last access */
	uint32_t nnodes, cap, ntenants;
	uint32_t clock;	   /* orders accesses, as the upstream's timestamps */
	uint64_t size[64]; /* nodes each tenant holds */
};

/* 0, or -1 when out of memory; ntenants <= 64. */
int sim_sgltree_init(struct sim_sgltree *t, uint32_t ntenants);
void sim_sgltree_free(struct sim_sgltree *t);
/*
 * prefix_match: how many of h[0..n) the tree holds, counting from the
 * first (for any tenant), and in *tenant the first tenant of the deepest
 * node matched in that node's hash map order (a per-node hash here), or
 * -1 when nothing matched. That tenant's path is refreshed.
 */
uint32_t sim_sgltree_match(struct sim_sgltree *t, const uint64_t *h, uint32_t n, int *tenant);
/* insert: h[0..n) for tenant, its path refreshed. 0, or -1 out of memory. */
int sim_sgltree_insert(struct sim_sgltree *t, const uint64_t *h, uint32_t n, uint32_t tenant);
/* evict_tenant_by_size: each tenant over max nodes loses its least recently
 * used leaves until it fits. 0, or -1 out of memory (nothing evicted). */
int sim_sgltree_evict(struct sim_sgltree *t, uint64_t max);

#endif
