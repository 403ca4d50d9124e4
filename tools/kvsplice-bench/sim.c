// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench sim: the fleet in virtual time. N batching engines
 * (user/engine.c, the code kvsplice-sim runs) behind a routing policy
 * (user/policy.c for kvsplice, the code the gateway runs), driven by a
 * Poisson workload, deterministic for a seed. Every policy sees the same
 * requests in the same order, so the table compares policies, not luck.
 *
 * Workload (DESIGN.md section 7, the default scenario): each request is one
 * of C shared contexts plus tokens of its own; the contexts total about
 * --occupancy of the fleet's KV capacity, so they do not fit in one
 * instance but do in the fleet. Block hashes are synthesized (the same
 * context block always has the same hash; own blocks are unique), which is
 * all the caches and the policy look at.
 */
#include "sim.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "plot.h"
#include "chash.h"
#include "engine.h"
#include "kvsplice/hash.h"
#include "policy.h"
#include "prompt.h"
#include "stats.h"
#include "trace.h"

#define PROG "kvsplice-bench sim"
#define MAX_POLICIES 8

enum pol { P_RR, P_LOR, P_CHASH, P_KVSPLICE, P_SGLANG, P_LLMD };
static const char *const pol_names[] = { "rr", "lor", "chash", "kvsplice", "sglang", "llmd" };

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
struct baseline_index {
	struct kvs_pcache idx[KVS_MAX_BACKENDS];
};

enum workload_kind { W_CONTEXTS, W_GROUPS, W_CONVERSATIONS, W_UNIQUE };
static const char *const workload_names[] = { "contexts", "groups", "conversations", "unique" };

struct sim_opts {
	uint32_t backends, kv_blocks, requests, context_tokens, own_tokens, max_tokens, contexts;
	double rate, occupancy;
	double balance, recompute_weight; /* kvsplice policy */
	int release_early;                /* prefill charge off at the first token */
	const char *trace;                /* replay this JSONL trace instead */
	enum workload_kind kind;
	uint32_t groups, per_group, system_tokens, question_tokens; /* groups */
	uint32_t conversations, turn_tokens;                          /* conversations */
	double speed;                     /* trace arrival-rate factor */
	uint64_t seed;
	int json;
	const char *plot_dir;
	uint32_t npol;
	enum pol pols[MAX_POLICIES];
};

struct sreq {
	struct kvs_eng_req eng; /* first: engine events point here */
	uint32_t context, backend;
	uint64_t work;         /* tokens charged to the backend */
	uint64_t prefill_work; /* of which prefill, until the first token */
	uint64_t *h;
};

struct backend {
	struct kvs_engine eng;
	bool stepping;
	double step_end;
	uint64_t work, outstanding, served;
};

struct result {
	const char *name;
	double ttft_p50, ttft_p90, ttft_p99, e2e_p50, e2e_p90, rps, tok_s, hit, mm, cv;
	uint32_t done;
	double *ttft; /* sorted, done of them: for --plot */
	double loads[KVS_MAX_BACKENDS]; /* requests each backend served */
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: kvsplice-bench sim [options]\n"
		"\n"
		"Discrete-event simulation of a fleet of batching backends behind each\n"
		"routing policy, in virtual time, same requests for every policy.\n"
		"\n"
		"Options:\n"
		"      --policies LIST     comma-separated: rr, lor, chash, sglang, llmd,\n"
		"                          kvsplice (default: all, in that order)\n"
		"      --backends N        instances (default 7)\n"
		"      --kv-blocks N       KV capacity per instance, 16-token blocks\n"
		"                          (default 81250, ~1.3 M tokens)\n"
		"      --requests N        requests (default 20000)\n"
		"      --rate R            Poisson arrivals per second (default 14)\n"
		"      --context-tokens T  shared context per request (default 6000)\n"
		"      --own-tokens T      tokens of its own (default 2000)\n"
		"      --max-tokens T      tokens generated (default 128)\n"
		"      --occupancy F       contexts total F x the fleet's KV (default 0.7)\n"
		"      --contexts N        number of contexts (default: from --occupancy)\n"
		"      --seed S            (default 1)\n"
		"      --workload W        contexts (default: the brief's scenario, above),\n"
		"                          groups, conversations or unique (nothing shared)\n"
		"      --groups G          groups: prompt groups (default 256)\n"
		"      --per-group P       groups: prompts per group; sets --requests to G x P\n"
		"                          (default: --requests over random groups)\n"
		"      --system-tokens T   groups: each group's system prompt; conversations:\n"
		"                          the one everybody shares (default 6000 / 1000)\n"
		"      --question-tokens T groups: each prompt's own part (default 1000)\n"
		"      --conversations C   conversations (default 2000)\n"
		"      --turn-tokens T     conversations: tokens each turn adds (default 600)\n"
		"      --trace FILE        replay a JSONL trace (timestamp ms, input_length,\n"
		"                          output_length, hash_ids of 512-token blocks) instead\n"
		"                          of the generated workload; --requests caps it\n"
		"      --speed X           multiply the trace's arrival rate by X (default 1)\n"
		"      --balance F         kvsplice: load bound (default %.2f)\n"
		"      --recompute-weight W  kvsplice: cost of a recomputed token (default %.1f)\n"
		"      --release-prefill WHEN  when a request's prefill work stops counting as\n"
		"                          load: 'first-token' (default) or 'end', as the\n"
		"                          gateway's option of the same name\n"
		"      --json              JSON: a top-level \"policies\" list\n"
		"      --plot DIR          write TTFT CDFs and requests per backend as SVG\n"
		"                          and PNG (gnuplot), with their data, into DIR\n"
		"  -h, --help              this text\n",
		KVS_POLICY_BALANCE, KVS_POLICY_RECOMPUTE_WEIGHT);
}

static int parse_policies(const char *s, struct sim_opts *o)
{
	char buf[256], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	o->npol = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint32_t i;

		for (i = 0; i < sizeof(pol_names) / sizeof(pol_names[0]); i++)
			if (!strcmp(tok, pol_names[i]))
				break;
		if (i == sizeof(pol_names) / sizeof(pol_names[0]) || o->npol == MAX_POLICIES) {
			fprintf(stderr, PROG ": --policies: unknown policy '%s' (rr, lor, chash, "
					"kvsplice, sglang, llmd)\n", tok);
			return -1;
		}
		o->pols[o->npol++] = (enum pol)i;
	}
	return o->npol ? 0 : -1;
}

static int parse(int argc, char **argv, struct sim_opts *o)
{
	static const struct option opts[] = {
		{ "policies", required_argument, NULL, 'P' },
		{ "backends", required_argument, NULL, 'b' },
		{ "kv-blocks", required_argument, NULL, 'k' },
		{ "requests", required_argument, NULL, 'n' },
		{ "rate", required_argument, NULL, 'r' },
		{ "context-tokens", required_argument, NULL, 'c' },
		{ "own-tokens", required_argument, NULL, 'o' },
		{ "max-tokens", required_argument, NULL, 'm' },
		{ "occupancy", required_argument, NULL, 'O' },
		{ "contexts", required_argument, NULL, 'C' },
		{ "seed", required_argument, NULL, 's' },
		{ "balance", required_argument, NULL, 'B' },
		{ "trace", required_argument, NULL, 'T' },
		{ "speed", required_argument, NULL, 'S' },
		{ "recompute-weight", required_argument, NULL, 'W' },
		{ "release-prefill", required_argument, NULL, 'R' },
		{ "workload", required_argument, NULL, 'w' },
		{ "groups", required_argument, NULL, 'g' },
		{ "per-group", required_argument, NULL, 'p' },
		{ "system-tokens", required_argument, NULL, 'y' },
		{ "question-tokens", required_argument, NULL, 'q' },
		{ "conversations", required_argument, NULL, 'v' },
		{ "turn-tokens", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "plot", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int opt, system_set = 0;

	*o = (struct sim_opts){ .backends = 7, .kv_blocks = KVS_MODEL_KV_BLOCKS, .requests = 20000,
				.rate = 14, .context_tokens = 6000, .own_tokens = 2000,
				.max_tokens = 128, .occupancy = 0.7, .seed = 1,
				.balance = KVS_POLICY_BALANCE, .speed = 1,
				.recompute_weight = KVS_POLICY_RECOMPUTE_WEIGHT,
				.groups = 256, .question_tokens = 1000, .conversations = 2000,
				.turn_tokens = 600, .release_early = 1 };
	parse_policies("rr,lor,chash,sglang,llmd,kvsplice", o);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'P':
			if (parse_policies(optarg, o))
				return 2;
			break;
		case 'b':
			if (kvs_arg_u32(PROG, "--backends", optarg, 1, KVS_MAX_BACKENDS, &o->backends))
				return 2;
			break;
		case 'k':
			if (kvs_arg_u32(PROG, "--kv-blocks", optarg, 64, 1u << 26, &o->kv_blocks))
				return 2;
			break;
		case 'n':
			if (kvs_arg_u32(PROG, "--requests", optarg, 1, 10000000, &o->requests))
				return 2;
			break;
		case 'r':
			if (kvs_arg_double(PROG, "--rate", optarg, 0.001, 1e6, &o->rate))
				return 2;
			break;
		case 'c':
			if (kvs_arg_u32(PROG, "--context-tokens", optarg, 16, 1u << 20,
					&o->context_tokens))
				return 2;
			break;
		case 'o':
			if (kvs_arg_u32(PROG, "--own-tokens", optarg, 0, 1u << 20, &o->own_tokens))
				return 2;
			break;
		case 'm':
			if (kvs_arg_u32(PROG, "--max-tokens", optarg, 1, 1u << 20, &o->max_tokens))
				return 2;
			break;
		case 'O':
			if (kvs_arg_double(PROG, "--occupancy", optarg, 0.001, 100, &o->occupancy))
				return 2;
			break;
		case 'C':
			if (kvs_arg_u32(PROG, "--contexts", optarg, 1, 10000000, &o->contexts))
				return 2;
			break;
		case 's':
			if (kvs_arg_u64(PROG, "--seed", optarg, 0, UINT64_MAX, &o->seed))
				return 2;
			break;
		case 'B':
			if (kvs_arg_double(PROG, "--balance", optarg, 1, 100, &o->balance))
				return 2;
			break;
		case 'T':
			o->trace = optarg;
			break;
		case 'S':
			if (kvs_arg_double(PROG, "--speed", optarg, 0.001, 1000, &o->speed))
				return 2;
			break;
		case 'W':
			if (kvs_arg_double(PROG, "--recompute-weight", optarg, 0, 1000,
					   &o->recompute_weight))
				return 2;
			break;
		case 'w':
			for (o->kind = 0; o->kind <= W_UNIQUE; o->kind++)
				if (!strcmp(optarg, workload_names[o->kind]))
					break;
			if (o->kind > W_UNIQUE) {
				fprintf(stderr,
					PROG ": --workload: '%s' is not contexts, groups, "
					     "conversations or unique\n",
					optarg);
				return 2;
			}
			break;
		case 'g':
			if (kvs_arg_u32(PROG, "--groups", optarg, 1, 1u << 20, &o->groups))
				return 2;
			break;
		case 'p':
			if (kvs_arg_u32(PROG, "--per-group", optarg, 1, 1u << 20, &o->per_group))
				return 2;
			break;
		case 'y':
			if (kvs_arg_u32(PROG, "--system-tokens", optarg, 0, 1u << 20,
					&o->system_tokens))
				return 2;
			system_set = 1;
			break;
		case 'q':
			if (kvs_arg_u32(PROG, "--question-tokens", optarg, 16, 1u << 20,
					&o->question_tokens))
				return 2;
			break;
		case 'v':
			if (kvs_arg_u32(PROG, "--conversations", optarg, 1, 1u << 24,
					&o->conversations))
				return 2;
			break;
		case 't':
			if (kvs_arg_u32(PROG, "--turn-tokens", optarg, 16, 1u << 20, &o->turn_tokens))
				return 2;
			break;
		case 'R':
			if (kvs_arg_release_prefill(PROG, optarg, &o->release_early))
				return 2;
			break;
		case 'j':
			o->json = 1;
			break;
		case 'L':
			o->plot_dir = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!system_set)
		o->system_tokens = o->kind == W_GROUPS ? 6000 : 1000;
	if (o->kind == W_GROUPS && o->per_group) {
		if ((uint64_t)o->groups * o->per_group > 10000000) {
			fprintf(stderr, PROG ": --groups x --per-group: at most 10,000,000 requests\n");
			return 2;
		}
		o->requests = o->groups * o->per_group;
	}
	if (o->trace && o->kind != W_CONTEXTS) {
		fprintf(stderr, PROG ": --trace and --workload do not combine\n");
		return 2;
	}
	if (!o->contexts)
		o->contexts = (uint32_t)fmax(1, o->occupancy * o->backends *
						       (double)o->kv_blocks * KVS_BLOCK_TOKENS /
						       o->context_tokens);
	return 0;
}

/* The workload, fixed by the seed (or the trace): per request its arrival,
 * and either a context (generated) or the trace's lengths and block ids. */
struct workload {
	uint32_t n;
	double *arrival_ms;
	uint32_t *context;
	uint32_t *prompt_tokens, *max_tokens;
	uint64_t **ids; /* trace, groups, conversations: content ids of blocks */
	uint32_t *nids;
	uint32_t id_blocks; /* our 16-token blocks per id: 32 in a trace, else 1 */
};

static void make_workload(const struct sim_opts *o, struct workload *w)
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
	uint32_t nkeys = 0, i; /* groups or conversations; unique has none */
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
		uint32_t key = order ? order[i] : nkeys ? (uint32_t)(kvs_splitmix64(&rng) % nkeys) : 0;
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
			uint32_t turn = next[key]++, conv = (turn + 1) * (o->turn_tokens / KVS_BLOCK_TOKENS);

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

/* A JSONL trace (user/trace.h): the workload takes over its block ids.
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

static uint32_t prompt_tokens_of(const struct sim_opts *o, const struct workload *w, uint32_t i)
{
	return w->prompt_tokens ? w->prompt_tokens[i] : o->context_tokens + o->own_tokens;
}

static uint32_t prompt_blocks_of(const struct sim_opts *o, const struct workload *w, uint32_t i)
{
	return prompt_tokens_of(o, w, i) / KVS_BLOCK_TOKENS;
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
		h[i] = kvs_nonzero(kvs_fmix64(i < shared ? ((uint64_t)ctx << 24 | i) * KVS_P1
							 : ((uint64_t)(req + 1) << 24 | i) * KVS_P2));
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
		uint64_t id = k < w->nids[i] ? w->ids[i][k] : (1ull << 40) + i; /* missing: unique */

		h[j] = kvs_nonzero(
			kvs_fmix64(kvs_fmix64(id * KVS_P1 + KVS_P4) + (j % w->id_blocks) * KVS_P2));
	}
}

static void fill_request(const struct sim_opts *o, const struct workload *w, uint32_t i,
			 uint64_t *h)
{
	if (w->ids)
		fill_id_hashes(w, i, h);
	else
		fill_hashes(o, i, w->context[i], h);
}

/* Hit rate of one LRU cache the size of the whole fleet on the same
 * requests: the ceiling under LRU eviction (DESIGN.md section 8). */
static double fleet_lru_ceiling(const struct sim_opts *o, const struct workload *w)
{
	uint64_t *h = NULL, cached = 0, prompt = 0;
	struct kvs_pcache c;
	uint32_t i, cap = 0;

	kvs_pcache_init(&c, o->kv_blocks * o->backends);
	for (i = 0; i < w->n; i++) {
		uint32_t n = prompt_blocks_of(o, w, i), tokens = prompt_tokens_of(o, w, i), hit;
		uint32_t max_cached = kvs_max_cached_blocks(tokens);

		if (n + 1 > cap) {
			uint64_t *nh = realloc(h, sizeof(*h) * (n + 1));

			if (!nh)
				break; /* out of memory: the ceiling of what was seen */
			h = nh;
			cap = n + 1;
		}
		fill_request(o, w, i, h);
		hit = kvs_pcache_match(&c, h, n);
		cached += (hit < max_cached ? hit : max_cached) * (uint64_t)KVS_BLOCK_TOKENS;
		prompt += tokens;
		kvs_pcache_touch(&c, h, n);
	}
	kvs_pcache_free(&c);
	free(h);
	return prompt ? (double)cached / (double)prompt : 0;
}

static int pick_sglang(const struct sim_opts *o, struct backend *be, struct baseline_index *bi,
		       const struct sreq *r)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	uint32_t b, best = 0, n = r->eng.nblocks, m, best_m = 0, smallest = 0;

	for (b = 0; b < o->backends; b++) {
		if (be[b].outstanding < lo)
			lo = be[b].outstanding;
		if (be[b].outstanding > hi)
			hi = be[b].outstanding;
	}
	if (hi - lo > 64 && (double)hi > 1.5 * (double)lo) {
		for (b = 1; b < o->backends; b++)
			if (be[b].outstanding < be[best].outstanding)
				best = b;
	} else {
		for (b = 0; b < o->backends; b++) {
			m = kvs_pcache_match_prefix(&bi->idx[b], r->eng.hashes, n);
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
	kvs_pcache_touch(&bi->idx[best], r->eng.hashes, n);
	return (int)best;
}

static int pick_llmd(const struct sim_opts *o, struct backend *be, struct baseline_index *bi,
		     const struct sreq *r)
{
	uint32_t b, best = 0, n = r->eng.nblocks, maxq = 0;
	double score, best_score = -1;

	for (b = 0; b < o->backends; b++)
		if (be[b].eng.nwaiting > maxq)
			maxq = be[b].eng.nwaiting;
	for (b = 0; b < o->backends; b++) {
		double prefix = n ? (double)kvs_pcache_match_prefix(&bi->idx[b], r->eng.hashes, n) / n : 0;
		double queue = maxq ? 1.0 - (double)be[b].eng.nwaiting / maxq : 1.0;
		double kv = 1.0 - (double)(be[b].eng.cache.used + be[b].eng.reserved_blocks) /
					  be[b].eng.cache.max_capacity;

		score = 3 * prefix + 2 * queue + 2 * kv;
		if (score > best_score) {
			best_score = score;
			best = b;
		}
	}
	kvs_pcache_touch(&bi->idx[best], r->eng.hashes, n);
	return (int)best;
}

static int pick(const struct sim_opts *o, enum pol p, struct backend *be, struct kvs_policy *pol,
		struct kvs_chash *ring, struct baseline_index *bi, uint32_t *rr, struct sreq *r,
		uint32_t *cached_blocks)
{
	uint64_t load[KVS_MAX_BACKENDS];
	uint8_t ok[KVS_MAX_BACKENDS];
	struct kvs_decision d;
	uint32_t b, best = 0, n = r->eng.nblocks, key_block;
	/* a prompt under one block has nothing to route by: any key will do */
	uint64_t last = n ? r->eng.hashes[n - 1] : kvs_fmix64(r->eng.id + 1);

	*cached_blocks = 0;
	for (b = 0; b < o->backends; b++)
		ok[b] = 1;
	switch (p) {
	case P_RR:
		return (int)((*rr)++ % o->backends);
	case P_LOR:
		for (b = 1; b < o->backends; b++)
			if (be[b].outstanding < be[best].outstanding)
				best = b;
		return (int)best;
	case P_CHASH:
		/* bounded-load consistent hashing of the first 1,024 tokens */
		for (b = 0; b < o->backends; b++)
			load[b] = be[b].outstanding;
		key_block = n < 64 ? n : 64;
		return kvs_chash_pick(ring, n ? r->eng.hashes[key_block - 1] : last, load, ok, 1.25);
	case P_KVSPLICE:
		for (b = 0; b < o->backends; b++)
			load[b] = be[b].work;
		kvs_policy_decide(pol, r->eng.hashes, n, last, r->eng.prompt_tokens, load, ok, NULL,
				  &d);
		*cached_blocks = d.cached_blocks;
		return d.backend;
	case P_SGLANG:
		return pick_sglang(o, be, bi, r);
	case P_LLMD:
		return pick_llmd(o, be, bi, r);
	}
	return 0;
}

static void run_policy(const struct sim_opts *o, const struct workload *w, enum pol p,
		       struct result *res)
{
	struct kvs_model_params m;
	struct backend *be = calloc(o->backends, sizeof(*be));
	struct kvs_policy_params pp;
	struct kvs_policy pol;
	struct kvs_chash ring;
	const char *names[KVS_MAX_BACKENDS];
	char namebuf[KVS_MAX_BACKENDS][24];
	double *ttft = malloc(sizeof(double) * w->n), *e2e = malloc(sizeof(double) * w->n);
	double last_end = 0;
	uint64_t prompt = 0, cached = 0, out_tokens = 0;
	uint32_t next = 0, done = 0, rr = 0, b, reported = 0;
	struct baseline_index *bi;

	kvs_model_defaults(&m);
	m.kv_blocks = o->kv_blocks;
	for (b = 0; b < o->backends; b++) {
		kvs_engine_init(&be[b].eng, &m, 0);
		snprintf(namebuf[b], sizeof(namebuf[b]), "10.0.0.%u:8000", b + 1);
		names[b] = namebuf[b];
	}
	kvs_policy_defaults(&pp);
	pp.nbackends = o->backends;
	pp.index_blocks = o->kv_blocks;
	pp.balance = o->balance;
	pp.recompute_weight = o->recompute_weight;
	kvs_policy_init(&pol, &pp, names);
	kvs_chash_build(&ring, names, o->backends, KVS_CHASH_VNODES);
	bi = calloc(1, sizeof(*bi));
	for (b = 0; b < o->backends; b++)
		kvs_pcache_init(&bi->idx[b], p == P_SGLANG ? 4 * o->kv_blocks : o->kv_blocks);

	while (done < w->n) {
		double t_arr = next < w->n ? w->arrival_ms[next] : INFINITY, t_step = INFINITY;
		int sb = -1;

		for (b = 0; b < o->backends; b++)
			if (be[b].stepping && be[b].step_end < t_step) {
				t_step = be[b].step_end;
				sb = (int)b;
			}
		if (t_arr <= t_step) { /* an arrival: route it */
			struct sreq *r = calloc(1, sizeof(*r));
			uint32_t cb;
			int pb;

			r->eng.id = next;
			r->eng.nblocks = prompt_blocks_of(o, w, next);
			r->h = malloc(sizeof(uint64_t) * (r->eng.nblocks + 1));
			fill_request(o, w, next, r->h);
			r->eng.hashes = r->h;
			r->eng.prompt_tokens = prompt_tokens_of(o, w, next);
			r->eng.max_tokens = w->max_tokens ? w->max_tokens[next] : o->max_tokens;
			r->eng.arrival_ms = t_arr;
			pb = pick(o, p, be, &pol, &ring, bi, &rr, r, &cb);
			r->backend = (uint32_t)(pb < 0 ? 0 : pb);
			r->work = kvs_work_blocks(r->eng.prompt_tokens, cb, r->eng.max_tokens) *
				  (uint64_t)KVS_BLOCK_TOKENS;
			r->prefill_work = kvs_prefill_charge((uint32_t)(r->work / KVS_BLOCK_TOKENS),
							     r->eng.max_tokens);
			be[r->backend].work += r->work;
			be[r->backend].outstanding++;
			kvs_engine_submit(&be[r->backend].eng, &r->eng);
			next++;
			b = r->backend;
			if (!be[b].stepping) { /* an idle engine starts now */
				struct kvs_eng_event *ev;
				uint32_t nev;
				double dur = kvs_engine_step(&be[b].eng, t_arr, &ev, &nev);

				be[b].stepping = dur > 0;
				be[b].step_end = t_arr + dur;
			}
			continue;
		}
		/* A step ends: account its events, start the next. */
		{
			struct backend *k = &be[sb];
			struct kvs_eng_event *ev;
			uint32_t nev = k->eng.nevents_last, i;
			double now = k->step_end, dur;

			for (i = 0; i < nev; i++) {
				struct sreq *r = (struct sreq *)k->eng.events[i].req;

				/* As the kernel does at the first CHUNK. */
				if (o->release_early && r->eng.emitted >= 1 && r->prefill_work) {
					k->work -= r->prefill_work;
					r->work -= r->prefill_work;
					r->prefill_work = 0;
				}
				if (!k->eng.events[i].done)
					continue;
				ttft[done] = r->eng.first_ms - r->eng.arrival_ms;
				e2e[done] = r->eng.end_ms - r->eng.arrival_ms;
				done++;
				prompt += r->eng.prompt_tokens;
				cached += r->eng.cached_tokens;
				out_tokens += r->eng.emitted;
				k->work -= r->work;
				k->outstanding--;
				k->served++;
				last_end = now;
				free(r->h);
				free(r);
			}
			dur = kvs_engine_step(&k->eng, now, &ev, &nev);
			k->stepping = dur > 0;
			k->step_end = now + dur;
		}
		if (!o->json && done / 2000 != reported) {
			reported = done / 2000;
			fprintf(stderr, "\r" PROG ": %s: %u/%u done", pol_names[p], done, w->n);
		}
	}
	if (!o->json)
		fprintf(stderr, "\r%60s\r", "");

	res->name = pol_names[p];
	res->done = done;
	res->ttft_p50 = kvs_percentile(ttft, done, 50);
	res->ttft_p90 = kvs_percentile(ttft, done, 90);
	res->ttft_p99 = kvs_percentile(ttft, done, 99);
	res->e2e_p50 = kvs_percentile(e2e, done, 50);
	res->e2e_p90 = kvs_percentile(e2e, done, 90);
	res->rps = done / ((last_end - w->arrival_ms[0]) / 1000);
	res->tok_s = (double)out_tokens / ((last_end - w->arrival_ms[0]) / 1000);
	res->hit = prompt ? (double)cached / (double)prompt : 0;
	for (b = 0; b < o->backends; b++)
		res->loads[b] = (double)be[b].served;
	res->mm = kvs_max_over_mean(res->loads, o->backends);
	res->cv = kvs_cv(res->loads, o->backends);
	res->ttft = ttft; /* sorted by the percentiles */

	for (b = 0; b < o->backends; b++)
		kvs_engine_free(&be[b].eng);
	kvs_policy_free(&pol);
	kvs_chash_free(&ring);
	for (b = 0; b < o->backends; b++)
		kvs_pcache_free(&bi->idx[b]);
	free(bi);
	free(be);
	free(e2e);
}

static double pct(double v, double base)
{
	return base ? (v - base) / base * 100 : 0;
}

/* Each figure's change is against round robin; without rr in --policies,
 * against the first policy listed (the table says which). */
static uint32_t baseline_of(const struct sim_opts *o, const struct result *res)
{
	for (uint32_t i = 0; i < o->npol; i++)
		if (o->pols[i] == P_RR)
			return i;
	return 0;
}

static void print_json(const struct sim_opts *o, const struct workload *w, double ceiling,
		       const struct result *res, uint32_t base)
{
	const struct result *r0 = &res[base];
	uint32_t i, b;

	printf("{\"workload\":\"%s\",\"trace\":\"%s\",\"speed\":%.3f,",
	       o->trace ? "trace" : workload_names[o->kind], o->trace ? o->trace : "", o->speed);
	printf("\"backends\":%u,\"kv_blocks\":%u,\"requests\":%u,\"rate\":%.3f,"
	       "\"contexts\":%u,\"context_tokens\":%u,\"own_tokens\":%u,\"max_tokens\":%u,"
	       "\"seed\":%llu,\"fleet_lru_hit_rate\":%.4f,\"baseline\":\"%s\",\"policies\":[",
	       o->backends, o->kv_blocks, w->n, o->rate, o->contexts, o->context_tokens,
	       o->own_tokens, o->max_tokens, (unsigned long long)o->seed, ceiling, r0->name);
	for (i = 0; i < o->npol; i++) {
		const struct result *r = &res[i];

		printf("%s{\"name\":\"%s\",\"requests\":%u,\"ttft_p50_ms\":%.2f,"
		       "\"ttft_p90_ms\":%.2f,\"ttft_p99_ms\":%.2f,\"e2e_p50_ms\":%.2f,"
		       "\"e2e_p90_ms\":%.2f,\"throughput_rps\":%.3f,\"output_tok_s\":%.1f,"
		       "\"hit_rate\":%.4f,\"load_max_over_mean\":%.3f,\"load_cv\":%.3f,"
		       "\"backend_requests\":[",
		       i ? "," : "", r->name, r->done, r->ttft_p50, r->ttft_p90, r->ttft_p99,
		       r->e2e_p50, r->e2e_p90, r->rps, r->tok_s, r->hit, r->mm, r->cv);
		for (b = 0; b < o->backends; b++)
			printf("%s%.0f", b ? "," : "", r->loads[b]);
		/* percent change against the baseline; hit rate in points */
		printf("],\"vs_baseline\":{\"ttft_p50_pct\":%.1f,\"ttft_p90_pct\":%.1f,"
		       "\"ttft_p99_pct\":%.1f,\"e2e_p50_pct\":%.1f,\"e2e_p90_pct\":%.1f,"
		       "\"throughput_rps_pct\":%.1f,\"output_tok_s_pct\":%.1f,"
		       "\"hit_rate_points\":%.2f,\"load_max_over_mean_pct\":%.1f}}",
		       pct(r->ttft_p50, r0->ttft_p50), pct(r->ttft_p90, r0->ttft_p90),
		       pct(r->ttft_p99, r0->ttft_p99), pct(r->e2e_p50, r0->e2e_p50),
		       pct(r->e2e_p90, r0->e2e_p90), pct(r->rps, r0->rps), pct(r->tok_s, r0->tok_s),
		       100 * (r->hit - r0->hit), pct(r->mm, r0->mm));
	}
	printf("]}\n");
}

static void print_table(const struct sim_opts *o, const struct result *res, uint32_t base)
{
	const struct result *r0 = &res[base];
	uint32_t i, b;

	printf("%-9s %9s %8s %8s %8s %8s %7s %8s %6s %8s\n", "policy", "TTFT p50", "p90", "p99",
	       "e2e p50", "p90", "req/s", "tok/s", "hit", "max/mean");
	for (i = 0; i < o->npol; i++)
		printf("%-9s %7.0fms %6.0fms %6.0fms %6.0fms %6.0fms %7.2f %8.0f %5.1f%% %8.2f\n",
		       res[i].name, res[i].ttft_p50, res[i].ttft_p90, res[i].ttft_p99,
		       res[i].e2e_p50, res[i].e2e_p90, res[i].rps, res[i].tok_s, 100 * res[i].hit,
		       res[i].mm);
	printf("\nchange against %s (hit rate in points)\n", r0->name);
	for (i = 0; i < o->npol; i++) {
		if (i == base)
			continue;
		printf("%-9s %8.0f%% %7.0f%% %7.0f%% %7.0f%% %7.0f%% %6.0f%% %7.0f%% %+6.1f %7.0f%%\n",
		       res[i].name, pct(res[i].ttft_p50, r0->ttft_p50),
		       pct(res[i].ttft_p90, r0->ttft_p90), pct(res[i].ttft_p99, r0->ttft_p99),
		       pct(res[i].e2e_p50, r0->e2e_p50), pct(res[i].e2e_p90, r0->e2e_p90),
		       pct(res[i].rps, r0->rps), pct(res[i].tok_s, r0->tok_s),
		       100 * (res[i].hit - r0->hit), pct(res[i].mm, r0->mm));
	}
	printf("\nrequests per backend\n");
	for (i = 0; i < o->npol; i++) {
		printf("%-9s", res[i].name);
		for (b = 0; b < o->backends; b++)
			printf(" %6.0f", res[i].loads[b]);
		printf("\n");
	}
}

static void print_header(const struct sim_opts *o, const struct workload *w, double ceiling)
{
	if (o->trace)
		printf("%u backends x %u KV blocks; %u requests of %s at %.2fx speed\n",
		       o->backends, o->kv_blocks, w->n, o->trace, o->speed);
	else if (o->kind == W_GROUPS)
		printf("%u backends x %u KV blocks; %u requests at %.1f/s; %u groups, system "
		       "prompts of %u tokens + %u of their own; %u generated; seed %llu\n",
		       o->backends, o->kv_blocks, w->n, o->rate, o->groups, o->system_tokens,
		       o->question_tokens, o->max_tokens, (unsigned long long)o->seed);
	else if (o->kind == W_CONVERSATIONS)
		printf("%u backends x %u KV blocks; %u requests at %.1f/s; %u conversations, "
		       "%u-token system prompt, +%u tokens a turn; %u generated; seed %llu\n",
		       o->backends, o->kv_blocks, w->n, o->rate, o->conversations, o->system_tokens,
		       o->turn_tokens, o->max_tokens, (unsigned long long)o->seed);
	else if (o->kind == W_UNIQUE)
		printf("%u backends x %u KV blocks; %u requests at %.1f/s of %u tokens, nothing "
		       "shared; %u generated; seed %llu\n",
		       o->backends, o->kv_blocks, w->n, o->rate, o->context_tokens + o->own_tokens,
		       o->max_tokens, (unsigned long long)o->seed);
	else
		printf("%u backends x %u KV blocks; %u requests at %.1f/s; %u contexts of %u "
		       "tokens + %u own; %u generated; seed %llu\n",
		       o->backends, o->kv_blocks, w->n, o->rate, o->contexts, o->context_tokens,
		       o->own_tokens, o->max_tokens, (unsigned long long)o->seed);
	printf("one LRU cache the size of the fleet would hit %.1f%% of prompt tokens\n\n",
	       100 * ceiling);
}

int bench_sim(int argc, char **argv)
{
	struct result res[MAX_POLICIES];
	struct sim_opts o;
	struct workload w;
	double ceiling;
	uint32_t i, base;
	int rc = parse(argc, argv, &o);

	if (rc)
		return rc;
	if (o.trace) {
		if (load_trace(&o, &w) <= 0)
			return 1;
	} else if (o.kind != W_CONTEXTS) {
		make_ids_workload(&o, &w);
	} else {
		make_workload(&o, &w);
	}
	ceiling = fleet_lru_ceiling(&o, &w);
	for (i = 0; i < o.npol; i++)
		run_policy(&o, &w, o.pols[i], &res[i]);

	base = baseline_of(&o, res);
	if (o.json)
		print_json(&o, &w, ceiling, res, base);
	else {
		print_header(&o, &w, ceiling);
		print_table(&o, res, base);
	}
	if (o.plot_dir) {
		struct bench_series ser[MAX_POLICIES];
		char title[512];

		for (i = 0; i < o.npol; i++)
			ser[i] = (struct bench_series){ .name = res[i].name, .ttft_ms = res[i].ttft,
							.n = res[i].done, .loads = res[i].loads,
							.nloads = o.backends };
		snprintf(title, sizeof(title), "%s, %u backends, %u requests",
			 o.trace ? o.trace : workload_names[o.kind], o.backends, w.n);
		if (bench_plot(PROG, o.plot_dir, title, ser, o.npol))
			rc = 1;
		else if (!o.json)
			printf("\nplots: %s/ttft_cdf.{svg,png}, %s/load.{svg,png}\n", o.plot_dir,
			       o.plot_dir);
	}
	for (i = 0; i < o.npol; i++)
		free(res[i].ttft);
	for (i = 0; w.ids && i < w.n; i++)
		free(w.ids[i]);
	free(w.ids);
	free(w.nids);
	free(w.prompt_tokens);
	free(w.max_tokens);
	free(w.arrival_ms);
	free(w.context);
	return rc;
}
