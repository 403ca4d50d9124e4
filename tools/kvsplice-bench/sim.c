// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench sim: the fleet in virtual time. N batching engines
 * (user/model/engine.c, the code kvsplice-sim runs) behind a routing policy
 * (for kvsplice, the kernel's routing as user/core/kroute.c models it over
 * user/core/policy.c's index and placement state, the code the gateway
 * runs), driven by a Poisson workload, deterministic for a seed. Every
 * policy sees the same requests in the same order, so the table compares
 * policies, not luck.
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

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "engine.h"
#include "model.h"
#include "opts.h"
#include "plot.h"
#include "policy.h"
#include "sim_int.h"
#include "sim_sweep.h"

static int parse_policies(FILE *err, const char *s, struct sim_opts *o)
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
			fprintf(err,
				PROG ": --policies: unknown policy '%s' (rr, lor, chash, "
				     "kvsplice, sglang, llmd)\n",
				tok);
			return -1;
		}
		o->pols[o->npol++] = (enum pol)i;
	}
	return o->npol ? 0 : -1;
}

static int policies_opt(FILE *err, const char *who, const struct kvs_opt *row, const char *v,
			void *dst)
{
	return parse_policies(err, v, KVS_OPT_TARGET(struct sim_opts, pols, dst));
}

#define O struct sim_opts
static const struct kvs_opt rows[] = {
	{ "policies", 0, KVS_OPT_FUNC(O, pols, policies_opt), .arg = "LIST",
	  .help = "comma-separated: rr, lor, chash, sglang, llmd,\n"
		  "kvsplice (default: all, in that order)" },
	{ "backends", 0, KVS_OPT_U32(O, backends, 1, KVS_MAX_BACKENDS), .arg = "N",
	  .help = "instances (default {default})" },
	{ "kv-blocks", 0, KVS_OPT_U32(O, kv_blocks, 64, 1u << 26), .arg = "N",
	  .help = "KV capacity per instance, 16-token blocks\n"
		  "(default {default}, ~1.3 M tokens)" },
	{ "requests", 0, KVS_OPT_U32(O, requests, 1, 10000000), .arg = "N",
	  .help = "requests (default {default})" },
	{ "rate", 0, KVS_OPT_DOUBLE(O, rate, 0.001, 1e6), KVS_OPT_GIVEN(O, rate_set), .arg = "R",
	  .help = "Poisson arrivals per second (default {default};\n"
		  "--sweep: {default} x --backends / 7)" },
	{ "context-tokens", 0, KVS_OPT_U32(O, context_tokens, 16, 1u << 20), .arg = "T",
	  .help = "shared context per request (default {default})" },
	{ "own-tokens", 0, KVS_OPT_U32(O, own_tokens, 0, 1u << 20), .arg = "T",
	  .help = "tokens of its own (default {default})" },
	{ "max-tokens", 0, KVS_OPT_U32(O, max_tokens, 1, 1u << 20), .arg = "T",
	  .help = "tokens generated (default {default})" },
	{ "declared-max-tokens", 0, KVS_OPT_U32(O, declared_max_tokens, 0, 1u << 20), .arg = "N",
	  .help = "the max_tokens each request declares to the router\n"
		  "(default {default}; 0: none), as real clients do; what it\n"
		  "generates (--max-tokens, a trace's output_length)\n"
		  "only the backend model knows" },
	{ "join-at", 0, KVS_OPT_DOUBLE(O, join_at_s, 0, 1e7), .arg = "S",
	  .help = "the last backend joins S seconds after the first\n"
		  "arrival (absent until then, as one added with\n"
		  "kvsplicectl backend add, its cache empty); the\n"
		  "report adds its share of the requests after, and\n"
		  "TTFT before and after (default 0: there from the\n"
		  "start)" },
	{ "newcomer", 0, KVS_OPT_ENUM(O, newcomer, "joins", "never", "always"), .arg = "MODE",
	  .help = "with --join-at: the last backend 'joins' then\n"
		  "(default), 'never' comes, or is there 'always': the\n"
		  "fleets it joins, for the same before and after" },
	{ "join-flush", 0, KVS_OPT_FLAG(O, join_flush),
	  .help = "kvsplice, with --join-at: void every route when the\n"
		  "backend joins, as kvsplicectl routes flush would:\n"
		  "every prefix is placed anew, the newcomer included\n"
		  "(held prefixes moved to it, at their recomputation)" },
	{ "occupancy", 0, KVS_OPT_DOUBLE(O, occupancy, 0.001, 100), .arg = "F",
	  .help = "contexts total F x the fleet's KV (default {default})" },
	{ "contexts", 0, KVS_OPT_U32(O, contexts, 1, 10000000), .arg = "N",
	  .help = "number of contexts (default: from --occupancy)" },
	{ "seed", 0, KVS_OPT_U64(O, seed, 0, UINT64_MAX), .arg = "S",
	  .help = "the workload's random numbers, 0 to 2^64-1 (default\n"
		  "{default}); --json says it as a string (\"seed\":\"S\"):\n"
		  "past 2^53 a number would not read back exactly" },
	{ "workload", 0, .type = KVS_OPT_T_ENUM, .off = offsetof(O, kind), .words = workload_names,
	  .arg = "W",
	  .help = "contexts (default: the brief's scenario, above),\n"
		  "groups, conversations or unique (nothing shared)" },
	{ "groups", 0, KVS_OPT_U32(O, groups, 1, 1u << 20), .arg = "G",
	  .help = "groups: prompt groups (default {default})" },
	{ "per-group", 0, KVS_OPT_U32(O, per_group, 1, 1u << 20), .arg = "P",
	  .help = "groups: prompts per group; sets --requests to G x P\n"
		  "(default: --requests over random groups)" },
	{ "system-tokens", 0, KVS_OPT_U32(O, system_tokens, 0, 1u << 20),
	  KVS_OPT_GIVEN(O, system_set), .arg = "T",
	  .help = "groups: each group's system prompt; conversations:\n"
		  "the one everybody shares (default 6000 / 1000)" },
	{ "question-tokens", 0, KVS_OPT_U32(O, question_tokens, 16, 1u << 20), .arg = "T",
	  .help = "groups: each prompt's own part (default {default})" },
	{ "conversations", 0, KVS_OPT_U32(O, conversations, 1, 1u << 24), .arg = "C",
	  .help = "conversations (default {default})" },
	{ "turn-tokens", 0, KVS_OPT_U32(O, turn_tokens, 16, 1u << 20), .arg = "T",
	  .help = "conversations: tokens each turn adds (default {default})" },
	{ "trace", 0, KVS_OPT_STR(O, trace), .arg = "FILE",
	  .help = "replay a JSONL trace (timestamp ms, input_length,\n"
		  "output_length, hash_ids of 512-token blocks) instead\n"
		  "of the generated workload; --requests caps it" },
	{ "speed", 0, KVS_OPT_DOUBLE(O, speed, 0.001, 1000), .arg = "X",
	  .help = "multiply the trace's arrival rate by X (default {default})" },
	{ "balance", 0, KVS_OPT_DOUBLE(O, balance, 1, 100), .fmt = "%.2f", .arg = "F",
	  .help = "kvsplice: load bound (default {default})" },
	{ "keep-balance", 0, KVS_OPT_DOUBLE(O, keep_balance, 1, 100), .fmt = "%.2f", .arg = "F",
	  .help = "kvsplice: a route's backend past the kernel's work\n"
		  "limit (the controller model: the backend with the\n"
		  "longest cached prefix, past --balance) keeps a request\n"
		  "while within F x the mean and recomputing elsewhere\n"
		  "would cost more, as kvspliced's --keep-balance\n"
		  "(default {default})" },
	{ "recompute-weight", 0, KVS_OPT_DOUBLE(O, recompute_weight, 0, 1000), .fmt = "%.1f",
	  .arg = "W", .help = "kvsplice: cost of a recomputed token (default {default})" },
	{ "kvsplice-model", 0, KVS_OPT_ENUM(O, model, "split", "controller"),
	  .arg = "split|controller",
	  .help = "kvsplice: 'split' (default), as the gateway runs:\n"
		  "the kernel follows installed routes within its work\n"
		  "limit and places every other request by the rule of\n"
		  "include/kvsplice/place.h; 'controller': the\n"
		  "controller decides every request (the model before)" },
	{ "kvsplice-window", 0, KVS_OPT_U32(O, window_blocks, 1, KVS_POLICY_MAX_BLOCKS), .arg = "N",
	  .help = "kvsplice split: blocks of a prompt the kernel hashes\n"
		  "(default {default}, the kernel's); above it, a what-if:\n"
		  "checkpoints go on every 128 blocks" },
	{ "kvsplice-index-scale", 0, KVS_OPT_DOUBLE(O, index_scale, 0.01, 100), .fmt = "%.2f",
	  .arg = "F",
	  .help = "kvsplice: size its index of each backend's cache at\n"
		  "F x the real one (default {default}): a gateway\n"
		  "configured with the wrong --backend-kv-blocks; the\n"
		  "report says where it ended and TTFT of the first and\n"
		  "last third of the requests" },
	{ "kvsplice-feedback", 0, KVS_OPT_ENUM(O, feedback, "no", "yes"), .arg = "yes|no",
	  .help = "kvsplice: correct the index from the backends' END\n"
		  "reports (cached against predicted: shrunk on misses,\n"
		  "grown on unexpected hits, within 1/1024 and 4x the\n"
		  "configured size), as the gateway's tick does\n"
		  "(default yes)" },
	{ "kvsplice-hot", 0, KVS_OPT_ENUM(O, hot, "no", "yes"), .arg = "yes|no",
	  .help = "kvsplice: replicate hot prefixes: a prefix matched by\n"
		  "more work than a backend's share goes to as many\n"
		  "replicas as its rate needs (include/kvsplice/place.h,\n"
		  "\"Hot prefixes\"; default yes, as the gateway does),\n"
		  "in the kernel's routes and in the controller's own\n"
		  "decisions; 'no': one holder, the rule before" },
	{ "release-prefill", 0, KVS_OPT_FUNC(O, release_early, kvs_opt_release_prefill),
	  .arg = "WHEN",
	  .help = "when a request's prefill work stops counting as\n"
		  "load: 'first-token' (default) or 'end', as the\n"
		  "gateway's option of the same name" },
	{ "json", 0, KVS_OPT_FLAG(O, json), .help = "JSON: a top-level \"policies\" list" },
	{ "sweep", 0, KVS_OPT_FLAG(O, sweep),
	  .help = "the load sweep instead of one run: round robin's\n"
		  "knee (the lowest load where it serves under\n"
		  "--sweep-served of what is offered), then every\n"
		  "policy from --sweep-from x the knee up until the\n"
		  "best of them saturates; per load TTFT p90 / p99,\n"
		  "req/s, and whether kvsplice is best or tied. The\n"
		  "load is --rate, or a trace's --speed; progress on\n"
		  "stderr" },
	{ "sweep-from", 0, KVS_OPT_DOUBLE(O, sweep_from, 0.01, 100), .fmt = "%.2f", .arg = "F",
	  .help = "--sweep: the first load, x the knee (default {default})" },
	{ "sweep-step", 0, KVS_OPT_DOUBLE(O, sweep_step, 0.01, 100), .fmt = "%.2f", .arg = "F",
	  .help = "--sweep: the step, x the knee (default {default})" },
	{ "sweep-max", 0, KVS_OPT_DOUBLE(O, sweep_max, 0.01, 100), .fmt = "%.2f", .arg = "F",
	  .help = "--sweep: the last load tried, x the knee, if the\n"
		  "best policy has not saturated (default {default})" },
	{ "sweep-served", 0, KVS_OPT_DOUBLE(O, sweep_served, 0.01, 1), .fmt = "%.2f", .arg = "F",
	  .help = "--sweep: a policy serving under F of what is\n"
		  "offered (the arrivals' span over the run's, to the\n"
		  "last end) is saturated (default {default})" },
	{ "sweep-knee-p90", 0, KVS_OPT_DOUBLE(O, sweep_knee_p90, 0, 1e9), .fmt = "%.0f",
	  .arg = "MS",
	  .help = "--sweep: round robin is also past its knee where\n"
		  "its TTFT p90 passes MS (default 0: served only)" },
	{ "sweep-tolerance", 0, KVS_OPT_DOUBLE(O, sweep_tol_pct, 0, 100), .fmt = "%.0f",
	  .arg = "PCT",
	  .help = "--sweep: kvsplice ties the best within PCT percent\n"
		  "(default {default}) or --sweep-tolerance-ms" },
	{ "sweep-tolerance-ms", 0, KVS_OPT_DOUBLE(O, sweep_tol_ms, 0, 1e6), .fmt = "%.0f",
	  .arg = "MS", .help = "--sweep: the same in ms (default {default})" },
	{ "sweep-warmup", 0, KVS_OPT_DOUBLE(O, sweep_warmup, 0, 0.9), .fmt = "%.2f", .arg = "F",
	  .help = "--sweep: judge TTFT on the requests after the first\n"
		  "F of each run by arrival (caches start empty: under\n"
		  "load the first requests queue behind misses that a\n"
		  "running fleet does not see; default {default}: all)" },
	{ "sweep-repeat", 0, KVS_OPT_U32(O, sweep_repeat, 1, SIM_SWEEP_MAX_REPEAT), .arg = "N",
	  .help = "--sweep: judge each load on the mean of N runs at\n"
		  "loads 0.4% apart around it (near saturation the\n"
		  "trace's p90 can double between speeds 0.6% apart:\n"
		  "docs/EVALUATION.md; default {default}, max {max};\n"
		  "N times as long)" },
	{ "plot", 0, KVS_OPT_STR(O, plot_dir), .arg = "DIR",
	  .help = "write TTFT CDFs and requests per backend as SVG\n"
		  "and PNG (gnuplot), with their data, into DIR" },
	{ "dump", 0, KVS_OPT_STR(O, dump_path), .arg = "FILE",
	  .help = "every request of every policy, one CSV line\n"
		  "each: policy, request, arrival (ms), backend,\n"
		  "kvsplice's verdict, prompt and cached tokens,\n"
		  "TTFT (ms): what a tail is made of" },
	KVS_OPT_ROW_HELP,
};
#undef O

static const struct kvs_optset optset = {
	.prog = PROG,
	KVS_OPT_ROWS(rows),
	.defaults = &sim_defaults,
	.usage = "Usage: kvsplice-bench sim [options]\n"
		 "\n"
		 "Discrete-event simulation of a fleet of batching backends behind each\n"
		 "routing policy, in virtual time, same requests for every policy.\n"
		 "\n"
		 "Options:\n",
	.footer = "",
	.help_col = 26,
	.help_on_error = true,
	.operands = true, /* and ignored */
};

/* -1 to carry on, or the exit status (--help: 0, bad usage: 2). */
static int parse(int argc, char **argv, struct sim_opts *o)
{
	int r;

	*o = sim_defaults;
	parse_policies(stderr, "rr,lor,chash,sglang,llmd,kvsplice", o);
	r = kvs_opts_argv(&optset, stderr, argc, argv, o);
	if (r)
		return r > 0 ? 0 : 2;
	if (!o->system_set)
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
	if (o->dump_path && o->sweep) {
		fprintf(stderr, PROG ": --dump is for one run, not a --sweep's dozens\n");
		return 2;
	}
	if (o->join_at_s > 0 && o->backends < 2) {
		fprintf(stderr, PROG ": --join-at needs at least 2 --backends\n");
		return 2;
	}
	if (!o->contexts)
		o->contexts = (uint32_t)fmax(1, o->occupancy * o->backends * (double)o->kv_blocks *
							KVS_BLOCK_TOKENS / o->context_tokens);
	return -1;
}

/* A request no backend could ever hold (its prompt and output past the
 * whole KV cache) would wait for ever in the engine, where a server refuses
 * it (kvsplice-sim answers too_long): such a workload is refused before
 * anything runs. 0 or -1 after saying which request and why. */
static int check_fits(const struct sim_opts *o, const struct workload *w)
{
	for (uint32_t i = 0; i < w->n; i++) {
		struct kvs_eng_req r = { .prompt_tokens = sim_prompt_tokens(o, w, i),
					 .max_tokens = w->max_tokens ? w->max_tokens[i] :
								       o->max_tokens };
		uint32_t need = kvs_engine_blocks_needed(&r);

		if (need > o->kv_blocks) {
			fprintf(stderr,
				PROG
				": request %u needs %u KV blocks (%u prompt and %u generated "
				"tokens), more than a backend holds (--kv-blocks %u): a server "
				"would refuse it; raise --kv-blocks or shorten the prompts\n",
				i, need, r.prompt_tokens, r.max_tokens, o->kv_blocks);
			return -1;
		}
	}
	return 0;
}

int bench_sim(int argc, char **argv)
{
	struct result res[MAX_POLICIES];
	struct sim_opts o;
	struct workload w;
	double ceiling;
	uint32_t i, base;
	int rc;

	/* main's handlers only raise live's stop flag, which nothing here
	 * reads: a run (a sweep can take many minutes) stops at ^C as any
	 * program does, with nothing to clean up. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	rc = parse(argc, argv, &o);
	if (rc >= 0)
		return rc;
	rc = 0;
	if (sim_make_workload(&o, &w))
		return 1;
	if (check_fits(&o, &w)) {
		sim_free_workload(&w);
		return 2;
	}
	if (o.sweep) { /* the lengths do not change with the load */
		sim_free_workload(&w);
		return sim_sweep(&o);
	}
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
	if (o.dump_path && sim_write_dump(o.dump_path, &o, &w, res))
		rc = 1;
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
		sim_free_result(&res[i]);
	sim_free_workload(&w);
	return rc;
}
