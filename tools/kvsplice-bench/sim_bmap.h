/* SPDX-License-Identifier: MIT */
/*
 * A map from block hash to a 32-bit value, growing as it fills: the
 * baselines' own indexes (sim_baselines.c, sim_sgltree.c) hold any number
 * of blocks, where kvs_pcache has a fixed capacity and evicts.
 */
#ifndef KVS_BENCH_SIM_BMAP_H
#define KVS_BENCH_SIM_BMAP_H

#include <stdint.h>

#define SIM_BMAP_NONE UINT32_MAX /* no value: what get() returns for a missing key */

struct sim_bmap {
	uint64_t *keys;
	uint32_t *vals; /* SIM_BMAP_NONE: an empty slot */
	uint32_t mask, n;
};

/* 0, or -1 when out of memory. */
int sim_bmap_init(struct sim_bmap *m);
void sim_bmap_free(struct sim_bmap *m);
uint32_t sim_bmap_get(const struct sim_bmap *m, uint64_t key);
/* Sets key to v (not SIM_BMAP_NONE). 0, or -1 when out of memory. */
int sim_bmap_put(struct sim_bmap *m, uint64_t key, uint32_t v);
void sim_bmap_del(struct sim_bmap *m, uint64_t key);

#endif
