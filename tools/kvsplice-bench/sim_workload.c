// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench sim's workloads: the requests every policy sees, fixed by
 * the seed (contexts, groups, conversations, unique) or read from a trace;
 * their block hashes; and the hit rate one fleet-sized LRU cache would reach
 * on them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "kvsplice/hash.h"
#include "policy.h"
#include "prefix_cache.h"
#include "prompt.h"
#include "sim_int.h"
#include "trace.h"

/* kvsplice-bench sim's defaults (its --help shows them). */
const struct sim_opts sim_defaults = { .backends = 7,
				       .kv_blocks = KVS_MODEL_KV_BLOCKS,
				       .requests = 20000,
				       .rate = 14,
				       .context_tokens = 6000,
				       .own_tokens = 2000,
				       .max_tokens = 128,
				       .declared_max_tokens = 4096,
				       .index_scale = 1,
				       .feedback = 1,
				       .hot = 1,
				       .occupancy = 0.7,
				       .seed = 1,
				       .balance = KVS_POLICY_BALANCE,
				       .keep_balance = KVS_POLICY_KEEP_BALANCE,
				       .speed = 1,
				       .recompute_weight = KVS_POLICY_RECOMPUTE_WEIGHT,
				       .groups = 256,
				       .question_tokens = 1000,
				       .conversations = 2000,
				       .turn_tokens = 600,
				       .release_early = 1,
				       .model = M_SPLIT,
				       .window_blocks = KVS_MAX_WINDOW_BLOCKS,
				       .sweep_from = 0.5,
				       .sweep_step = 0.1,
				       .sweep_max = 4,
				       .sweep_served = 0.97,
				       .sweep_repeat = 1,
				       .sweep_tol_pct = 2,
				       .sweep_tol_ms = 5 };

const char *const workload_names[W_UNIQUE + 2] = { "contexts", "groups", "conversations", "unique",
						   NULL };

static void make_contexts_workload(const struct sim_opts *o, struct workload *w)
{
	uint64_t rng = o->seed;
	double t = 0;

	memset(w, 0, sizeof(*w));
	w->n = o->requests;
	w->arrival_ms = malloc(sizeof(double) * o->requests);
	w->context = malloc(sizeof(uint32_t) * o->requests);
	for (uint32_t i = 0; i < o->requests; i++) {
		double u = ((double)(kvs_splitmix64(&rng) >> 11) + 0.5) / 9007199254740992.0;

		t += -log(u) / o->rate * 1000;
		w->arrival_ms[i] = t;
		w->context[i] = (uint32_t)(kvs_splitmix64(&rng) % o->contexts);
	}
}

/*
 * The other generated workloads, as content ids of 16-token blocks (as a
 * trace, one block per id), Poisson arrivals at --rate:
 *  groups: --groups G of --per-group P prompts each, a group's prompts
 *    sharing its --system-tokens, then --question-tokens of their own; each
 *    arrival is a random group's next prompt;
 *  conversations: --conversations C, each turn's prompt is a common system
 *    prompt (--system-tokens), then the conversation so far, turn_tokens
 *    more each turn; each arrival is a random conversation's next turn (it
 *    can arrive before the previous turn has finished, as in an open loop);
 *  unique: --context-tokens + --own-tokens of nothing shared.
 */
/* Appends count block ids of content space `space`, positions 0.. */
static void blocks_of(uint64_t *ids, uint32_t *n, uint64_t space, uint32_t count)
{
	for (uint32_t j = 0; j < count; j++)
		ids[(*n)++] = space << 40 | j;
}

static void make_ids_workload(const struct sim_opts *o, struct workload *w)
{
	uint64_t rng = o->seed;
	uint32_t nkeys = 0, i;	       /* groups or conversations; unique has none */
	uint32_t *next, *order = NULL; /* turns so far; group order */
	uint32_t sys = o->system_tokens / KVS_BLOCK_TOKENS;
	double t = 0;

	if (o->kind == W_GROUPS)
		nkeys = o->groups;
	else if (o->kind == W_CONVERSATIONS)
		nkeys = o->conversations;
	next = calloc(nkeys ? nkeys : 1, sizeof(uint32_t));
	memset(w, 0, sizeof(*w));
	w->n = o->requests;
	w->id_blocks = 1;
	w->arrival_ms = malloc(sizeof(double) * w->n);
	w->prompt_tokens = malloc(sizeof(uint32_t) * w->n);
	w->max_tokens = malloc(sizeof(uint32_t) * w->n);
	w->ids = calloc(w->n, sizeof(uint64_t *));
	w->nids = calloc(w->n, sizeof(uint32_t));

	if (o->kind == W_GROUPS && o->per_group) {
		/* Exactly per_group prompts of each group, in random order. */
		order = malloc(sizeof(uint32_t) * o->requests);
		for (i = 0; i < o->requests; i++)
			order[i] = i % o->groups;
		for (i = o->requests; i > 1; i--) {
			uint32_t j = (uint32_t)(kvs_splitmix64(&rng) % i), tmp = order[i - 1];

			order[i - 1] = order[j];
			order[j] = tmp;
		}
	}
	for (i = 0; i < w->n; i++) {
		double u = ((double)(kvs_splitmix64(&rng) >> 11) + 0.5) / 9007199254740992.0;
		uint32_t key = order ? order[i] :
			       nkeys ? (uint32_t)(kvs_splitmix64(&rng) % nkeys) :
				       0;
		uint32_t n = 0, len;
		uint64_t *ids;

		t += -log(u) / o->rate * 1000;
		w->arrival_ms[i] = t;
		w->max_tokens[i] = o->max_tokens;
		if (o->kind == W_GROUPS) {
			len = sys + o->question_tokens / KVS_BLOCK_TOKENS;
			ids = malloc(sizeof(uint64_t) * len);
			blocks_of(ids, &n, 1 + (uint64_t)key, sys);
			blocks_of(ids, &n, 1ull << 23 | i, len - sys); /* its own */
		} else if (o->kind == W_CONVERSATIONS) {
			uint32_t turn = next[key]++,
				 conv = (turn + 1) * (o->turn_tokens / KVS_BLOCK_TOKENS);

			len = sys + conv;
			ids = malloc(sizeof(uint64_t) * len);
			blocks_of(ids, &n, 1, sys); /* everybody's system prompt */
			blocks_of(ids, &n, 2 + (uint64_t)key, conv);
		} else {
			len = (o->context_tokens + o->own_tokens) / KVS_BLOCK_TOKENS;
			ids = malloc(sizeof(uint64_t) * len);
			blocks_of(ids, &n, 1ull << 23 | i, len);
		}
		w->ids[i] = ids;
		w->nids[i] = n;
		w->prompt_tokens[i] = n * KVS_BLOCK_TOKENS;
	}
	free(order);
	free(next);
}

/* A JSONL trace (user/model/trace.h): the workload takes over its block ids.
 * Returns the number of requests read, or -1 with a message. */
static int load_trace(const struct sim_opts *o, struct workload *w)
{
	struct kvs_trace t;
	char err[512];
	int n = kvs_trace_load(o->trace, o->requests, o->speed, &t, err, sizeof(err));

	memset(w, 0, sizeof(*w));
	if (n < 0) {
		fprintf(stderr, PROG ": --trace: %s\n", err);
		return -1;
	}
	w->n = t.n;
	w->id_blocks = KVS_TRACE_BLOCK_TOKENS / KVS_BLOCK_TOKENS;
	w->arrival_ms = malloc(sizeof(double) * t.n);
	w->prompt_tokens = malloc(sizeof(uint32_t) * t.n);
	w->max_tokens = malloc(sizeof(uint32_t) * t.n);
	w->ids = calloc(t.n, sizeof(uint64_t *));
	w->nids = calloc(t.n, sizeof(uint32_t));
	for (uint32_t i = 0; i < t.n; i++) {
		w->arrival_ms[i] = t.reqs[i].arrival_ms;
		w->prompt_tokens[i] = t.reqs[i].input_tokens;
		w->max_tokens[i] = t.reqs[i].output_tokens;
		w->ids[i] = t.reqs[i].ids;
		w->nids[i] = t.reqs[i].nids;
		t.reqs[i].ids = NULL;
	}
	kvs_trace_free(&t);
	return n;
}

uint32_t sim_prompt_tokens(const struct sim_opts *o, const struct workload *w, uint32_t i)
{
	return w->prompt_tokens ? w->prompt_tokens[i] : o->context_tokens + o->own_tokens;
}

static uint32_t prompt_blocks_of(const struct sim_opts *o, const struct workload *w, uint32_t i)
{
	return sim_prompt_tokens(o, w, i) / KVS_BLOCK_TOKENS;
}

static uint32_t prompt_blocks(const struct sim_opts *o)
{
	return (o->context_tokens + o->own_tokens) / KVS_BLOCK_TOKENS;
}

/* Synthetic chain: context blocks shared by context, own blocks unique. */
static void fill_hashes(const struct sim_opts *o, uint32_t req, uint32_t ctx, uint64_t *h)
{
	uint32_t n = prompt_blocks(o), shared = o->context_tokens / KVS_BLOCK_TOKENS;

	for (uint32_t i = 0; i < n; i++)
		h[i] = kvs_nonzero(kvs_fmix64(i < shared ?
						      ((uint64_t)ctx << 24 | i) * KVS_P1 :
						      ((uint64_t)(req + 1) << 24 | i) * KVS_P2));
}

/* A request given as block ids (a trace, or the groups and conversations
 * workloads): id k names our blocks k x id_blocks .. (k + 1) x id_blocks - 1
 * (a trace's 512-token block is 32 of ours), and stands for their content
 * and history. */
static void fill_id_hashes(const struct workload *w, uint32_t i, uint64_t *h)
{
	uint32_t n = w->prompt_tokens[i] / KVS_BLOCK_TOKENS, j;

	for (j = 0; j < n; j++) {
		uint32_t k = j / w->id_blocks;
		uint64_t id = k < w->nids[i] ? w->ids[i][k] :
					       (1ull << 40) + i; /* missing: unique */

		h[j] = kvs_nonzero(
			kvs_fmix64(kvs_fmix64(id * KVS_P1 + KVS_P4) + (j % w->id_blocks) * KVS_P2));
	}
}

void sim_fill_request(const struct sim_opts *o, const struct workload *w, uint32_t i, uint64_t *h)
{
	if (w->ids)
		fill_id_hashes(w, i, h);
	else
		fill_hashes(o, i, w->context[i], h);
}

/* Hit rate of one LRU cache the size of the whole fleet on the same
 * requests: the ceiling under LRU eviction (docs/EVALUATION.md, "The fleet in virtual time"). */
double sim_fleet_lru_ceiling(const struct sim_opts *o, const struct workload *w)
{
	uint64_t *h = NULL, cached = 0, prompt = 0;
	struct kvs_pcache c;
	uint32_t i, cap = 0;

	kvs_pcache_init(&c, o->kv_blocks * o->backends);
	for (i = 0; i < w->n; i++) {
		uint32_t n = prompt_blocks_of(o, w, i), tokens = sim_prompt_tokens(o, w, i), hit;
		uint32_t max_cached = kvs_max_cached_blocks(tokens);

		if (n + 1 > cap) {
			uint64_t *nh = realloc(h, sizeof(*h) * (n + 1));

			if (!nh)
				break; /* out of memory: the ceiling of what was seen */
			h = nh;
			cap = n + 1;
		}
		sim_fill_request(o, w, i, h);
		hit = kvs_pcache_match(&c, h, n);
		cached += (hit < max_cached ? hit : max_cached) * (uint64_t)KVS_BLOCK_TOKENS;
		prompt += tokens;
		kvs_pcache_touch(&c, h, n);
	}
	kvs_pcache_free(&c);
	free(h);
	return prompt ? (double)cached / (double)prompt : 0;
}

int sim_make_workload(const struct sim_opts *o, struct workload *w)
{
	if (o->trace)
		return load_trace(o, w) > 0 ? 0 : -1;
	if (o->kind != W_CONTEXTS)
		make_ids_workload(o, w);
	else
		make_contexts_workload(o, w);
	return 0;
}

void sim_free_workload(struct workload *w)
{
	for (uint32_t i = 0; w->ids && i < w->n; i++)
		free(w->ids[i]);
	free(w->ids);
	free(w->nids);
	free(w->prompt_tokens);
	free(w->max_tokens);
	free(w->arrival_ms);
	free(w->context);
}
