// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench decisions: how many routing decisions the controller's
 * policy makes per second on one core, for prompts of a given size. Measures
 * the whole slow-path decision (hash every block of a prompt with a suffix of
 * its own, then decide with the policy, which indexes the new blocks), with
 * the hashing timed apart; and the decision on a prompt seen before (hashes
 * computed beforehand, every block already indexed). Pure CPU: no sockets,
 * no BPF. This machine's speed drifts (docs/EVALUATION.md), so each figure is
 * the median of --rounds alternating measurements.
 */
#include "decisions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvsplice/hash.h"
#include "netutil.h"
#include "model.h"
#include "opts.h"
#include "policy.h"
#include "prompt.h"

#define PROG "kvsplice-bench decisions"

struct dec_opts {
	uint32_t backends, prompt_tokens, template_tokens, templates, count, rounds;
	uint64_t seed;
	int json;
};

static const struct dec_opts defaults = { .backends = 7,
					  .prompt_tokens = 8000,
					  .template_tokens = 6000,
					  .templates = 64,
					  .count = 100000,
					  .rounds = 5,
					  .seed = 1 };

#define O struct dec_opts
static const struct kvs_opt rows[] = {
	{ "backends", 0, KVS_OPT_U32(O, backends, 1, KVS_MAX_BACKENDS), .arg = "N",
	  .help = "backends (default {default})" },
	{ "prompt-tokens", 0, KVS_OPT_U32(O, prompt_tokens, 16, 200000), .arg = "T",
	  .help = "tokens per prompt (default {default})" },
	{ "template-tokens", 0, KVS_OPT_U32(O, template_tokens, 0, 200000), .arg = "T",
	  .help = "of which shared with other prompts (default {default})" },
	{ "templates", 0, KVS_OPT_U32(O, templates, 1, 100000), .arg = "N",
	  .help = "distinct templates (default {default})" },
	{ "count", 0, KVS_OPT_U32(O, count, 1, 100000000), .arg = "N",
	  .help = "decisions per measurement (default {default})" },
	{ "rounds", 0, KVS_OPT_U32(O, rounds, 1, 1000), .arg = "N",
	  .help = "measurements of each kind (default {default})" },
	{ "seed", 0, KVS_OPT_U64(O, seed, 0, UINT64_MAX), .arg = "S",
	  .help = "(default {default})" },
	{ "json", 0, KVS_OPT_FLAG(O, json), .help = "JSON output" },
	KVS_OPT_ROW_HELP,
};
#undef O

static const struct kvs_optset optset = {
	.prog = PROG,
	KVS_OPT_ROWS(rows),
	.defaults = &defaults,
	.usage = "Usage: kvsplice-bench decisions [options]\n"
		 "\n"
		 "Routing decisions per second of the controller's policy on one core.\n"
		 "Each decision is a prompt of one of the templates plus its own suffix:\n"
		 "'hash + decide' hashes it (timed apart) and decides, indexing its new\n"
		 "blocks; 'seen prompt' decides on a prompt whose hashes were made and\n"
		 "indexed before. Backend loads change between decisions as requests end.\n"
		 "Each figure is the median of --rounds alternating measurements.\n"
		 "\n"
		 "Options:\n",
	.footer = "",
	.help_col = 27,
	.help_on_error = true,
	.operands = true, /* and ignored */
};

/* -1 to carry on, or the exit status (--help: 0, bad usage: 2). */
static int parse(int argc, char **argv, struct dec_opts *o)
{
	int r;

	*o = defaults;
	r = kvs_opts_argv(&optset, stderr, argc, argv, o);
	if (r)
		return r > 0 ? 0 : 2;
	if (o->template_tokens > o->prompt_tokens) {
		fprintf(stderr, PROG ": --template-tokens exceeds --prompt-tokens\n");
		return 2;
	}
	return -1;
}

/* Loads in tokens: each decision adds the request's work, and the oldest of
 * the last 32 requests per backend ends, so loads stay realistic. */
struct loads {
	uint64_t load[KVS_MAX_BACKENDS];
	uint32_t ring_b[256];
	uint64_t ring_w[256];
	uint32_t head, n;
};

static void loads_add(struct loads *l, uint32_t b, uint64_t w, uint32_t window)
{
	if (l->n == window) {
		l->load[l->ring_b[l->head]] -= l->ring_w[l->head];
		l->head = (l->head + 1) % 256;
		l->n--;
	}
	l->ring_b[(l->head + l->n) % 256] = b;
	l->ring_w[(l->head + l->n) % 256] = w;
	l->n++;
	l->load[b] += w;
}

/* One measurement of o->count decisions; hashes inline when pre is NULL
 * (the time spent hashing into *hash_s). Decisions per second. */
static double measure(const struct dec_opts *o, uint8_t **prompts, size_t len, uint64_t *pre,
		      uint32_t nblocks, double *hit, double *hash_s)
{
	const char *names[KVS_MAX_BACKENDS];
	char namebuf[KVS_MAX_BACKENDS][32];
	struct kvs_policy_params pp;
	struct kvs_policy pol;
	struct loads l = { 0 };
	uint8_t ok[KVS_MAX_BACKENDS];
	uint64_t *h = malloc(sizeof(*h) * (nblocks + 1)), rng = o->seed, t0, cached = 0, th = 0;
	uint32_t b, i, tok = kvs_prompt_tokens(len);
	struct kvs_decision d;

	for (b = 0; b < o->backends; b++) {
		snprintf(namebuf[b], sizeof(namebuf[b]), "10.0.0.%u:8000", b + 1);
		names[b] = namebuf[b];
		ok[b] = 1;
	}
	kvs_policy_defaults(&pp);
	pp.nbackends = o->backends;
	if (kvs_policy_init(&pol, &pp, names) || !h) {
		fprintf(stderr, PROG ": out of memory\n");
		exit(1);
	}
	t0 = kvs_now_ns();
	for (i = 0; i < o->count; i++) {
		uint32_t t = (uint32_t)(kvs_splitmix64(&rng) % o->templates);
		const uint64_t *hh;

		if (pre) {
			hh = pre + (size_t)t * nblocks;
		} else {
			uint64_t t1 = kvs_now_ns();

			/* a new suffix: the request number in its first bytes */
			memcpy(prompts[t] + (size_t)o->template_tokens * KVS_BYTES_PER_TOKEN, &i,
			       sizeof(i));
			kvs_prefix_hashes(kvs_seed(0, 0), prompts[t], len, h, nblocks);
			th += kvs_now_ns() - t1;
			hh = h;
		}
		kvs_policy_decide(&pol,
				  &(struct kvs_prompt){ .h = hh,
							.n = nblocks,
							.tokens = tok,
							.place_key = hh[nblocks - 1] },
				  &(struct kvs_fleet_view){ .load = l.load, .eligible = ok }, &d);
		cached += d.cached_blocks;
		loads_add(&l, (uint32_t)d.backend,
			  kvs_work_blocks(tok, d.cached_blocks, 256) * (uint64_t)KVS_BLOCK_TOKENS,
			  32 * o->backends < 256 ? 32 * o->backends : 256);
	}
	t0 = kvs_now_ns() - t0;
	*hit = (double)cached / ((double)o->count * nblocks);
	*hash_s = (double)th / 1e9;
	kvs_policy_free(&pol);
	free(h);
	return (double)o->count / ((double)t0 / 1e9);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, uint32_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bench_decisions(int argc, char **argv)
{
	struct dec_opts o;
	size_t len, tlen;
	uint8_t **prompts;
	uint64_t *pre;
	uint32_t nblocks, t, r;
	double *full, *hash_us, *seen, hit_full = 0, hit_seen = 0, unused, f, hu, sn;
	int rc = parse(argc, argv, &o);

	if (rc >= 0)
		return rc;
	len = (size_t)o.prompt_tokens * KVS_BYTES_PER_TOKEN;
	tlen = (size_t)o.template_tokens * KVS_BYTES_PER_TOKEN;
	nblocks = (uint32_t)(len / KVS_BLOCK_BYTES);
	prompts = calloc(o.templates, sizeof(*prompts));
	pre = malloc(sizeof(*pre) * (size_t)o.templates * nblocks);
	full = calloc(o.rounds, sizeof(double));
	hash_us = calloc(o.rounds, sizeof(double));
	seen = calloc(o.rounds, sizeof(double));
	if (!prompts || !pre || !full || !hash_us || !seen || nblocks == 0) {
		fprintf(stderr, PROG ": out of memory or prompt under one block\n");
		return 1;
	}
	for (t = 0; t < o.templates; t++) {
		prompts[t] = malloc(len);
		if (!prompts[t])
			return 1;
		kvs_text_fill(0x7e3a0000ull + t, prompts[t], tlen);
		kvs_text_fill(0x5f000000ull + t, prompts[t] + tlen, len - tlen);
		kvs_prefix_hashes(kvs_seed(0, 0), prompts[t], len, pre + (size_t)t * nblocks,
				  nblocks);
	}
	for (r = 0; r < o.rounds; r++) {
		double hs;

		full[r] = measure(&o, prompts, len, NULL, nblocks, &hit_full, &hs);
		hash_us[r] = hs / o.count * 1e6;
		seen[r] = measure(&o, prompts, len, pre, nblocks, &hit_seen, &unused);
		if (!o.json && o.rounds > 1)
			fprintf(stderr, "round %u/%u: %.0f and %.0f decisions/s\n", r + 1, o.rounds,
				full[r], seen[r]);
	}
	f = median(full, o.rounds);
	hu = median(hash_us, o.rounds);
	sn = median(seen, o.rounds);
	if (o.json)
		printf("{\"backends\":%u,\"prompt_tokens\":%u,\"template_tokens\":%u,\"templates\":%u,"
		       "\"count\":%u,\"rounds\":%u,\"full_per_s\":%.0f,\"seen_per_s\":%.0f,"
		       "\"full_us\":%.3f,\"hash_us\":%.3f,\"decide_us\":%.3f,\"seen_us\":%.3f}\n",
		       o.backends, o.prompt_tokens, o.template_tokens, o.templates, o.count,
		       o.rounds, f, sn, 1e6 / f, hu, 1e6 / f - hu, 1e6 / sn);
	else
		printf("%u backends, %u-token prompts (%u shared, %u templates), %u decisions, "
		       "one core, median of %u:\n"
		       "  hash + decide   %10.0f decisions/s  (%.2f us each: hashing %.2f, "
		       "deciding %.2f)\n"
		       "  seen prompt     %10.0f decisions/s  (%.2f us each)\n"
		       "  predicted cached blocks: %.0f%% (hash + decide), %.0f%% (seen)\n",
		       o.backends, o.prompt_tokens, o.template_tokens, o.templates, o.count,
		       o.rounds, f, 1e6 / f, hu, 1e6 / f - hu, sn, 1e6 / sn, 100 * hit_full,
		       100 * hit_seen);
	for (t = 0; t < o.templates; t++)
		free(prompts[t]);
	free(prompts);
	free(pre);
	free(full);
	free(hash_us);
	free(seen);
	return 0;
}
