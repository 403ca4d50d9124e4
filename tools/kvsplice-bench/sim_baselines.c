// SPDX-License-Identifier: MIT
/* Other routers' policies, re-implemented (sim_baselines.h). */
#include "sim_baselines.h"

#include <stdlib.h>

#include "prefix_cache.h"

/*
 * Re-implementations of other routers' published policies, from their
 * public documentation, with the defaults the issue names:
 *
 * sglang: SGLang router's cache-aware policy. Each worker has an
 *   approximate prefix tree of what was routed to it (here a block index,
 *   never told of the backend's evictions; bounded at 4x the KV capacity
 *   as a stand-in for its max tree size). If the load (outstanding
 *   requests) is imbalanced, max - min > 64 and max > 1.5 x min, the least
 *   loaded worker gets the request; otherwise the worker with the highest
 *   match ratio (matched / request length) if it exceeds the cache
 *   threshold 0.3, else the worker with the smallest tree.
 * llmd: llm-d's scheduler with its prefix-cache scorer (weight 3: matched
 *   blocks / prompt blocks in its per-pod block index), queue scorer
 *   (weight 2: 1 - waiting / max waiting over pods) and KV-utilization
 *   scorer (weight 2: 1 - KV in use / capacity); highest total wins.
 */
struct sim_baseline {
	enum pol p;
	struct kvs_pcache idx[KVS_MAX_BACKENDS];
	uint32_t nb;
};

static int pick_sglang(struct sim_baseline *bi, const struct sim_bview *be, uint32_t nb,
		       const struct kvs_eng_req *r)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	uint32_t b, best = 0, n = r->nblocks, m, best_m = 0, smallest = 0;

	for (b = 0; b < nb; b++) {
		if (be[b].outstanding < lo)
			lo = be[b].outstanding;
		if (be[b].outstanding > hi)
			hi = be[b].outstanding;
	}
	if (hi - lo > 64 && (double)hi > 1.5 * (double)lo) {
		for (b = 1; b < nb; b++)
			if (be[b].outstanding < be[best].outstanding)
				best = b;
	} else {
		for (b = 0; b < nb; b++) {
			m = kvs_pcache_match_prefix(&bi->idx[b], r->hashes, n);
			if (m > best_m) {
				best_m = m;
				best = b;
			}
			if (bi->idx[b].used < bi->idx[smallest].used)
				smallest = b;
		}
		if (!n || (double)best_m / n <= 0.3)
			best = smallest;
	}
	kvs_pcache_touch(&bi->idx[best], r->hashes, n);
	return (int)best;
}

static int pick_llmd(struct sim_baseline *bi, const struct sim_bview *be, uint32_t nb,
		     const struct kvs_eng_req *r)
{
	uint32_t b, best = 0, n = r->nblocks, maxq = 0;
	double score, best_score = -1;

	for (b = 0; b < nb; b++)
		if (be[b].eng->nwaiting > maxq)
			maxq = be[b].eng->nwaiting;
	for (b = 0; b < nb; b++) {
		double prefix = n ? (double)kvs_pcache_match_prefix(&bi->idx[b], r->hashes, n) / n :
				    0;
		double queue = maxq ? 1.0 - (double)be[b].eng->nwaiting / maxq : 1.0;
		double kv = 1.0 - (double)(be[b].eng->cache.used + be[b].eng->reserved_blocks) /
					  be[b].eng->cache.max_capacity;

		score = 3 * prefix + 2 * queue + 2 * kv;
		if (score > best_score) {
			best_score = score;
			best = b;
		}
	}
	kvs_pcache_touch(&bi->idx[best], r->hashes, n);
	return (int)best;
}

struct sim_baseline *sim_baseline_new(enum pol p, const struct sim_opts *o)
{
	struct sim_baseline *s = calloc(1, sizeof(*s));
	uint32_t b;

	if (!s)
		return NULL;
	s->p = p;
	s->nb = o->backends;
	for (b = 0; b < o->backends; b++)
		if (kvs_pcache_init(&s->idx[b], p == P_SGLANG ? 4 * o->kv_blocks : o->kv_blocks)) {
			sim_baseline_free(s);
			return NULL;
		}
	return s;
}

int sim_baseline_pick(struct sim_baseline *s, const struct sim_bview *v, uint32_t nb,
		      const struct kvs_eng_req *r, double now_ms)
{
	(void)now_ms;
	if (s->p == P_SGLANG)
		return pick_sglang(s, v, nb, r);
	return pick_llmd(s, v, nb, r);
}

void sim_baseline_free(struct sim_baseline *s)
{
	uint32_t b;

	if (!s)
		return;
	for (b = 0; b < KVS_MAX_BACKENDS; b++)
		if (s->idx[b].table)
			kvs_pcache_free(&s->idx[b]);
	free(s);
}
