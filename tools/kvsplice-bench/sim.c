// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench sim: the fleet in virtual time. N batching engines
 * (user/model/engine.c, the code kvsplice-sim runs) behind a routing policy
 * (user/core/policy.c for kvsplice, the code the gateway runs), driven by a
 * Poisson workload, deterministic for a seed. Every policy sees the same
 * requests in the same order, so the table compares policies, not luck.
 *
 * Workload (the default scenario: docs/EVALUATION.md, "The fleet in virtual
 * time: the brief's default scenario"): each request is one
 * of C shared contexts plus tokens of its own; the contexts total about
 * --occupancy of the fleet's KV capacity, so they do not fit in one
 * instance but do in the fleet. Block hashes are synthesized (the same
 * context block always has the same hash; own blocks are unique), which is
 * all the caches and the policy look at.
 *
 * This file: the options and the command; the workload, the fleet and the
 * report are in sim_workload.c, sim_fleet.c and sim_report.c.
 */
#include "sim.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "model.h"
#include "plot.h"
#include "policy.h"
#include "sim_int.h"

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
			fprintf(stderr,
				PROG ": --policies: unknown policy '%s' (rr, lor, chash, "
				     "kvsplice, sglang, llmd)\n",
				tok);
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

	*o = (struct sim_opts){ .backends = 7,
				.kv_blocks = KVS_MODEL_KV_BLOCKS,
				.requests = 20000,
				.rate = 14,
				.context_tokens = 6000,
				.own_tokens = 2000,
				.max_tokens = 128,
				.occupancy = 0.7,
				.seed = 1,
				.balance = KVS_POLICY_BALANCE,
				.speed = 1,
				.recompute_weight = KVS_POLICY_RECOMPUTE_WEIGHT,
				.groups = 256,
				.question_tokens = 1000,
				.conversations = 2000,
				.turn_tokens = 600,
				.release_early = 1 };
	parse_policies("rr,lor,chash,sglang,llmd,kvsplice", o);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'P':
			if (parse_policies(optarg, o))
				return 2;
			break;
		case 'b':
			if (kvs_arg_u32(PROG, "--backends", optarg, 1, KVS_MAX_BACKENDS,
					&o->backends))
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
			if (kvs_arg_u32(PROG, "--turn-tokens", optarg, 16, 1u << 20,
					&o->turn_tokens))
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
			fprintf(stderr,
				PROG ": --groups x --per-group: at most 10,000,000 requests\n");
			return 2;
		}
		o->requests = o->groups * o->per_group;
	}
	if (o->trace && o->kind != W_CONTEXTS) {
		fprintf(stderr, PROG ": --trace and --workload do not combine\n");
		return 2;
	}
	if (!o->contexts)
		o->contexts = (uint32_t)fmax(1, o->occupancy * o->backends * (double)o->kv_blocks *
							KVS_BLOCK_TOKENS / o->context_tokens);
	return 0;
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
	if (sim_make_workload(&o, &w))
		return 1;
	ceiling = sim_fleet_lru_ceiling(&o, &w);
	for (i = 0; i < o.npol; i++)
		sim_run_policy(&o, &w, o.pols[i], &res[i]);

	base = sim_baseline(&o, res);
	if (o.json)
		sim_print_json(&o, &w, ceiling, res, base);
	else {
		sim_print_header(&o, &w, ceiling);
		sim_print_table(&o, res, base);
	}
	if (o.plot_dir) {
		struct bench_series ser[MAX_POLICIES];
		char title[512];

		for (i = 0; i < o.npol; i++)
			ser[i] = (struct bench_series){ .name = res[i].name,
							.ttft_ms = res[i].ttft,
							.n = res[i].done,
							.loads = res[i].loads,
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
	sim_free_workload(&w);
	return rc;
}
