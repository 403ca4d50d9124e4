// SPDX-License-Identifier: MIT
/* Other routers' policies, re-implemented (sim_baselines.h). */
#include "sim_baselines.h"

#include <stdlib.h>
#include <string.h>

#include "kvsplice/hash.h"
#include "prefix_cache.h"
#include "sim_bmap.h"
#include "sim_sgltree.h"

/*
 * Each baseline follows its upstream source, read at the commit named,
 * with that source's defaults.
 *
 * sglang: sgl-project/sglang, sgl-model-gateway/src/policies/cache_aware.rs
 *   (b93974f140de1e545d9134d87e77f0bd1fbf3014; 053b63ff26df reads the
 *   same) and policies/tree.rs (24ce7f6c91a1b0fc65534cedf959e22423920b75);
 *   defaults from sgl-model-gateway/src/main.rs
 *   (f47e04e04c2a9408b8b106fb62612daa45d4b067): cache_threshold 0.3,
 *   balance_abs_threshold 64, balance_rel_threshold 1.5, eviction every
 *   120 s to max_tree_size 2^26 characters per worker. Load is the
 *   worker's requests in flight. Imbalanced (max - min > 64 and max >
 *   1.5 x min): the least loaded worker, the first of equals. Otherwise the
 *   shared tree's deepest match: its worker if matched / prompt > 0.3,
 *   else the least loaded worker (not the smallest tree: that was the
 *   older sgl-router's rule). The prompt is then inserted for the worker
 *   chosen, either way. The tree is of text; here of 16-token blocks
 *   (sim_sgltree.h), sizes at 4 characters a token.
 * llmd: llm-d/llm-d-inference-scheduler (module llm-d-router) at
 *   520af47896e5f06e43d09aca281a1149187b0ffd: the sample
 *   deploy/config/epp-precise-prefix-cache-config.yaml, precise prefix
 *   cache 2.0, kv-cache-utilization 1.0, queue 1.0, max-score picker.
 *   Under pkg/epp/framework/plugins/scheduling/: prefix = blocks the
 *   pod's cache holds from the first / the prompt's blocks
 *   (scorer/preciseprefixcache/utils.go; its index follows the engines'
 *   KV events, so here the engine's own cache); queue = (max - waiting) /
 *   (max - min) over pods, 1 when all equal (scorer/queuedepth/queue.go);
 *   KV = 1 - usage, vLLM's kv_cache_usage_perc: blocks held by requests,
 *   not cached free ones (scorer/kvcacheutilization); highest total,
 *   equals shuffled (picker/maxscore/picker.go).
 * dynamo: ai-dynamo/dynamo, lib/llm/src/kv_router/scheduler.rs
 *   (db19bd2a659d4cb04998fb4101cd0dbfbbeba9d4) and sequence.rs
 *   (581ee33e434f3f99b84f6ea99fcf0a3fda26a685); KvRouterConfig's defaults
 *   overlap_score_weight 1.0, router_temperature 0. cost = 1.0 x
 *   prefill blocks + decode blocks, lowest wins; equals go to the
 *   smallest indexer tree, then at random. Prefill blocks: the worker's
 *   prompt tokens still to prefill (each routed request's prompt less
 *   what its worker had cached, until its first token) plus this one's,
 *   over the block size. Decode blocks: distinct blocks of the worker's
 *   requests in flight plus this prompt's blocks not among them. Cached
 *   blocks come from the KV events' index: the engine's cache here.
 */

#define SGL_CACHE_THRESHOLD 0.3
#define SGL_BALANCE_ABS 64
#define SGL_BALANCE_REL 1.5
#define SGL_EVICT_MS 120000.0
/* max_tree_size 2^26 characters, at 4 a token, in 16-token nodes */
#define SGL_MAX_TREE_BLOCKS ((1ull << 26) / 4 / KVS_BLOCK_TOKENS)

#define LLMD_W_PREFIX 2.0
#define LLMD_W_KV 1.0
#define LLMD_W_QUEUE 1.0

#define DYN_OVERLAP_WEIGHT 1.0

/* A request dynamo's router tracks until it ends. */
struct dyn_req {
	uint64_t *h;
	uint32_t n, backend, new_tokens, seen;
	uint8_t live, prefilling;
};

/* dynamo's ActiveSequences for one worker. */
struct dyn_worker {
	struct sim_bmap refs; /* block -> its requests in flight */
	uint64_t prefill_tokens;
	uint32_t *ids, nids, cap;
};

struct sim_baseline {
	enum pol p;
	uint32_t nb;
	uint64_t rnd;
	struct sim_sgltree tree; /* sglang */
	double next_evict_ms;
	struct dyn_worker dw[KVS_MAX_BACKENDS]; /* dynamo */
	struct dyn_req *req;			/* by request id */
	uint64_t nreq;
	uint32_t epoch;
};

static uint64_t next_rand(struct sim_baseline *s)
{
	s->rnd += 0x9e3779b97f4a7c15ull;
	return kvs_fmix64(s->rnd);
}

/* The least loaded backend, the first of equals (Rust's min_by_key). */
static uint32_t least_loaded(const struct sim_bview *v, uint32_t nb)
{
	uint32_t b, best = 0;

	for (b = 1; b < nb; b++)
		if (v[b].outstanding < v[best].outstanding)
			best = b;
	return best;
}

static int pick_sglang(struct sim_baseline *s, const struct sim_bview *v, uint32_t nb,
		       const struct kvs_eng_req *r, double now_ms)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	uint32_t b, best, m;
	int tenant;

	while (now_ms >= s->next_evict_ms) {
		sim_sgltree_evict(&s->tree, SGL_MAX_TREE_BLOCKS);
		s->next_evict_ms += SGL_EVICT_MS;
	}
	for (b = 0; b < nb; b++) {
		lo = v[b].outstanding < lo ? v[b].outstanding : lo;
		hi = v[b].outstanding > hi ? v[b].outstanding : hi;
	}
	best = least_loaded(v, nb);
	if (!(hi - lo > SGL_BALANCE_ABS && (double)hi > SGL_BALANCE_REL * (double)lo)) {
		m = sim_sgltree_match(&s->tree, r->hashes, r->nblocks, &tenant);
		/* the text's length counts the partial last block too */
		if (r->prompt_tokens && tenant >= 0 && (uint32_t)tenant < nb &&
		    (double)m * KVS_BLOCK_TOKENS / r->prompt_tokens > SGL_CACHE_THRESHOLD)
			best = (uint32_t)tenant;
	}
	sim_sgltree_insert(&s->tree, r->hashes, r->nblocks, best);
	return (int)best;
}

/* vLLM's kv_cache_usage_perc: blocks requests hold, cached free ones not. */
static double kv_usage(const struct kvs_engine *e)
{
	double held = (double)(e->cache.used - e->cache.evictable) + e->reserved_blocks;

	return held >= e->cache.max_capacity ? 1.0 : held / e->cache.max_capacity;
}

static int pick_llmd(struct sim_baseline *s, const struct sim_bview *v, uint32_t nb,
		     const struct kvs_eng_req *r)
{
	uint32_t b, best = 0, ties = 0, n = r->nblocks, minq = UINT32_MAX, maxq = 0, q;
	double score, best_score = -1;

	for (b = 0; b < nb; b++) {
		q = v[b].eng->nwaiting;
		minq = q < minq ? q : minq;
		maxq = q > maxq ? q : maxq;
	}
	for (b = 0; b < nb; b++) {
		const struct kvs_engine *e = v[b].eng;
		double prefix = n ? (double)kvs_pcache_match(&e->cache, r->hashes, n) / n : 0;
		double queue = maxq == minq ? 1.0 : (double)(maxq - e->nwaiting) / (maxq - minq);

		score = LLMD_W_PREFIX * prefix + LLMD_W_KV * (1.0 - kv_usage(e)) +
			LLMD_W_QUEUE * queue;
		if (score > best_score) {
			best_score = score;
			best = b;
			ties = 1;
		} else if (score == best_score && next_rand(s) % ++ties == 0) {
			best = b; /* each of the equals alike */
		}
	}
	return (int)best;
}

/* A request leaves dynamo's view of its worker. */
static void dyn_end(struct dyn_worker *w, struct dyn_req *q)
{
	uint32_t i, c;

	if (q->prefilling)
		w->prefill_tokens -= q->new_tokens;
	for (i = 0; i < q->n; i++) {
		c = sim_bmap_get(&w->refs, q->h[i]);
		if (c <= 1)
			sim_bmap_del(&w->refs, q->h[i]);
		else
			sim_bmap_put(&w->refs, q->h[i], c - 1);
	}
	free(q->h);
	memset(q, 0, sizeof(*q));
}

static void dyn_seen(struct sim_baseline *s, struct dyn_worker *w, uint32_t b,
		     const struct kvs_eng_req *r)
{
	struct dyn_req *q = r->id < s->nreq ? &s->req[r->id] : NULL;

	if (!q || !q->live || q->backend != b)
		return;
	q->seen = s->epoch;
	/* the first token ends the prefill (mark_prefill_completed) */
	if (q->prefilling && r->state >= KVS_ENG_DECODE) {
		w->prefill_tokens -= q->new_tokens;
		q->prefilling = 0;
	}
}

/* What the worker's responses told the router since: first tokens, and
 * requests that ended (no longer in its engine). */
static void dyn_refresh(struct sim_baseline *s, const struct kvs_engine *e, uint32_t b)
{
	struct dyn_worker *w = &s->dw[b];
	const struct kvs_eng_req *r;
	uint32_t i, k = 0;

	s->epoch++;
	for (r = e->wait_head; r; r = r->next)
		dyn_seen(s, w, b, r);
	for (r = e->running; r; r = r->next)
		dyn_seen(s, w, b, r);
	for (i = 0; i < w->nids; i++) {
		struct dyn_req *q = &s->req[w->ids[i]];

		if (q->seen == s->epoch)
			w->ids[k++] = w->ids[i];
		else
			dyn_end(w, q);
	}
	w->nids = k;
}

/* dynamo's add_request: 0, or -1 when out of memory. */
static int dyn_add(struct sim_baseline *s, uint32_t b, const struct kvs_eng_req *r,
		   uint32_t new_tokens)
{
	struct dyn_worker *w = &s->dw[b];
	struct dyn_req *q;
	uint32_t i;

	if (r->id >= s->nreq) {
		uint64_t n = r->id + 1 > 2 * s->nreq ? r->id + 1 : 2 * s->nreq;
		void *p = realloc(s->req, sizeof(*s->req) * n);

		if (!p)
			return -1;
		s->req = p;
		memset(s->req + s->nreq, 0, sizeof(*s->req) * (n - s->nreq));
		s->nreq = n;
	}
	if (w->nids == w->cap) {
		uint32_t cap = w->cap ? 2 * w->cap : 64;
		void *p = realloc(w->ids, sizeof(*w->ids) * cap);

		if (!p)
			return -1;
		w->ids = p;
		w->cap = cap;
	}
	q = &s->req[r->id];
	q->h = malloc(sizeof(*q->h) * (r->nblocks + 1));
	if (!q->h)
		return -1;
	memcpy(q->h, r->hashes, sizeof(*q->h) * r->nblocks);
	q->n = r->nblocks;
	q->backend = b;
	q->new_tokens = new_tokens;
	q->seen = s->epoch;
	q->live = q->prefilling = 1;
	w->prefill_tokens += new_tokens;
	w->ids[w->nids++] = (uint32_t)r->id;
	for (i = 0; i < q->n; i++) {
		uint32_t c = sim_bmap_get(&w->refs, q->h[i]);

		sim_bmap_put(&w->refs, q->h[i], c == SIM_BMAP_NONE ? 1 : c + 1);
	}
	return 0;
}

static double dyn_cost(const struct sim_baseline *s, const struct kvs_engine *e, uint32_t b,
		       const struct kvs_eng_req *r, uint32_t *new_tokens)
{
	const struct dyn_worker *w = &s->dw[b];
	uint32_t cached = kvs_pcache_match(&e->cache, r->hashes, r->nblocks) * KVS_BLOCK_TOKENS;
	uint32_t i, fresh = 0;

	*new_tokens = r->prompt_tokens > cached ? r->prompt_tokens - cached : 0;
	for (i = 0; i < r->nblocks; i++)
		fresh += sim_bmap_get(&w->refs, r->hashes[i]) == SIM_BMAP_NONE;
	return DYN_OVERLAP_WEIGHT * (double)(w->prefill_tokens + *new_tokens) / KVS_BLOCK_TOKENS +
	       (double)(w->refs.n + fresh);
}

static int pick_dynamo(struct sim_baseline *s, const struct sim_bview *v, uint32_t nb,
		       const struct kvs_eng_req *r)
{
	uint32_t b, best = 0, ties = 0, nt, best_nt = 0;
	double cost, best_cost = 0;

	for (b = 0; b < nb; b++)
		dyn_refresh(s, v[b].eng, b);
	for (b = 0; b < nb; b++) {
		cost = dyn_cost(s, v[b].eng, b, r, &nt);
		if (!b || cost < best_cost ||
		    (cost == best_cost && v[b].eng->cache.used < v[best].eng->cache.used)) {
			best_cost = cost;
			best = b;
			best_nt = nt;
			ties = 1;
		} else if (cost == best_cost && v[b].eng->cache.used == v[best].eng->cache.used &&
			   next_rand(s) % ++ties == 0) {
			best = b;
			best_nt = nt;
		}
	}
	dyn_add(s, best, r, best_nt); /* out of memory: the request goes unseen */
	return (int)best;
}

struct sim_baseline *sim_baseline_new(enum pol p, const struct sim_opts *o)
{
	struct sim_baseline *s = calloc(1, sizeof(*s));
	uint32_t b;
	int err = 0;

	if (!s)
		return NULL;
	s->p = p;
	s->nb = o->backends;
	s->rnd = kvs_fmix64(o->seed + p);
	s->next_evict_ms = SGL_EVICT_MS;
	if (p == P_SGLANG)
		err = sim_sgltree_init(&s->tree, o->backends);
	for (b = 0; p == P_DYNAMO && b < o->backends; b++)
		err |= sim_bmap_init(&s->dw[b].refs);
	if (err) {
		sim_baseline_free(s);
		return NULL;
	}
	return s;
}

int sim_baseline_pick(struct sim_baseline *s, const struct sim_bview *v, uint32_t nb,
		      const struct kvs_eng_req *r, double now_ms)
{
	if (s->p == P_SGLANG)
		return pick_sglang(s, v, nb, r, now_ms);
	if (s->p == P_DYNAMO)
		return pick_dynamo(s, v, nb, r);
	return pick_llmd(s, v, nb, r);
}

void sim_baseline_free(struct sim_baseline *s)
{
	uint64_t i;
	uint32_t b;

	if (!s)
		return;
	sim_sgltree_free(&s->tree);
	for (b = 0; b < KVS_MAX_BACKENDS; b++) {
		sim_bmap_free(&s->dw[b].refs);
		free(s->dw[b].ids);
	}
	for (i = 0; i < s->nreq; i++)
		free(s->req[i].h);
	free(s->req);
	free(s);
}
