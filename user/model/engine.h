/* SPDX-License-Identifier: MIT */
/*
 * A vLLM-like inference engine, in model time: continuous batching with
 * chunked prefill under a per-step token budget, decode steps, automatic
 * prefix caching on 16-token blocks (kvs_pcache: blocks of running requests
 * pinned, others evicted LRU, a prompt's tail first), KV for generated tokens
 * reserved from the same capacity, and the per-step time model of model.h.
 * Pure: kvsplice-sim runs it against the clock, the discrete-event simulator
 * in virtual time.
 *
 * Each step, in order: every running request that is decoding generates one
 * token; requests part-way through their prefill continue; then waiting
 * requests are admitted, first come first served, while the token budget,
 * the sequence limit and the KV capacity allow. A step that completes a
 * request's prefill also produces its first token. A prompt's full blocks
 * are cached as the step computing them is planned, as vLLM v1 caches
 * them when it allocates them: a request admitted after another in the
 * same step hits what that one computes in it. (Until 2026-12-03 the code
 * admitted every waiting request before planning anything, budget or not,
 * and cached blocks only after: two requests for a new prompt in one step
 * both computed it; docs/EVALUATION.md, "Caching as vLLM v1 schedules".)
 */
#ifndef KVS_ENGINE_H
#define KVS_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "kvsplice/hash.h"
#include "model.h"
#include "prefix_cache.h"

/* Blocks of a prompt that can be served from cache: like vLLM, a prompt
 * cached in full still computes its last block, since the first token needs
 * a forward pass. */
static inline uint32_t kvs_max_cached_blocks(uint32_t prompt_tokens)
{
	return prompt_tokens ? (prompt_tokens - 1) / KVS_BLOCK_TOKENS : 0;
}

enum kvs_eng_state {
	KVS_ENG_WAITING = 0,
	KVS_ENG_PREFILL,
	KVS_ENG_DECODE,
	KVS_ENG_DONE,
};

struct kvs_eng_req {
	/* set by the caller */
	uint64_t id;
	const uint64_t *hashes; /* the prompt's full-block hashes */
	uint32_t nblocks;
	uint32_t prompt_tokens;
	uint32_t max_tokens; /* at least 1 is generated */
	double arrival_ms;
	void *user;
	/* kept by the engine */
	enum kvs_eng_state state;
	uint32_t cached_tokens; /* served from the prefix cache */
	uint32_t computed;	/* prompt tokens computed so far (cached included) */
	uint32_t emitted;	/* tokens generated */
	uint32_t reserved;	/* KV blocks reserved for its generation */
	double start_ms, first_ms, end_ms;
	struct kvs_eng_req *next; /* waiting queue, or running list */
};

/* What a step produced, delivered when it ends. */
struct kvs_eng_event {
	struct kvs_eng_req *req;
	bool done; /* this token is the request's last */
};

struct kvs_engine {
	struct kvs_model_params model;
	uint32_t max_seqs; /* most requests running at once */
	struct kvs_pcache cache;
	struct kvs_eng_req *wait_head, *wait_tail;
	struct kvs_eng_req *running;
	uint32_t nrunning, nwaiting;
	uint32_t reserved_blocks; /* KV held for generated tokens */
	struct kvs_eng_event *events;
	uint32_t events_cap;
	uint32_t nevents_last; /* events of the last step, in events[] */
	uint64_t steps;
};

#define KVS_ENGINE_MAX_SEQS 256

int kvs_engine_init(struct kvs_engine *e, const struct kvs_model_params *m, uint32_t max_seqs);
void kvs_engine_free(struct kvs_engine *e);

/* KV blocks a request needs in all, prompt and output (saturating). */
static inline uint32_t kvs_engine_blocks_needed(const struct kvs_eng_req *r)
{
	uint64_t t = ((uint64_t)r->prompt_tokens + r->max_tokens + KVS_BLOCK_TOKENS - 1) /
		     KVS_BLOCK_TOKENS;

	return t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

/* Whether r could ever be admitted: one that needs more blocks than the
 * whole cache would wait at the head of the queue for ever, and everything
 * behind it too (vLLM refuses such a request up front). */
static inline bool kvs_engine_fits(const struct kvs_engine *e, const struct kvs_eng_req *r)
{
	return kvs_engine_blocks_needed(r) <= e->cache.max_capacity;
}

/* Queue a request (its fields above "kept by the engine" are reset). */
void kvs_engine_submit(struct kvs_engine *e, struct kvs_eng_req *r);

/*
 * Run one step starting at now_ms: choose the batch, account for it, and
 * return its duration in model milliseconds (0 when there is nothing to do).
 * *events receives the tokens the step produces (valid until the next call),
 * *nevents their number; they are to be delivered at now_ms + duration.
 * Requests that finish are released (their blocks stay cached) and can be
 * freed by the caller once their events are delivered.
 */
double kvs_engine_step(struct kvs_engine *e, double now_ms, struct kvs_eng_event **events,
		       uint32_t *nevents);

bool kvs_engine_idle(const struct kvs_engine *e);

/*
 * Stop r at once, wherever it is (waiting, prefilling, decoding, or done
 * in the last step and not yet delivered): it leaves the queue or the
 * batch, its pinned blocks are released (those it computed stay cached, as
 * when it finishes) and its reservation returned, and its events of the
 * last step are removed (nevents_last shrinks). The caller may free r
 * afterwards. A request the engine does not hold is left alone.
 */
void kvs_engine_cancel(struct kvs_engine *e, struct kvs_eng_req *r);

#endif
