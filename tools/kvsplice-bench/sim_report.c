// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench sim's report: each policy's figures and their change
 * against the baseline, as a table or JSON.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonstr.h"
#include "sim_int.h"
#include "stats.h"

static double pct(double v, double base)
{
	return base ? (v - base) / base * 100 : 0;
}

/* Each figure's change is against round robin; without rr in --policies,
 * against the first policy listed (the table says which). */
uint32_t sim_baseline(const struct sim_opts *o, const struct result *res)
{
	for (uint32_t i = 0; i < o->npol; i++)
		if (o->pols[i] == P_RR)
			return i;
	return 0;
}

static const char *why_name(uint32_t w)
{
	static const char *const split[] = { "punted", "key",	  "hint",  "prefix", "kept",
					     "cold",   "shallow", "spill", "stale" };
	static const char *const ctl[] = { "controller-none",  "controller-prefix",
					   "controller-spill", "controller-shared",
					   "controller-cold",  "controller-hot" };

	if (w < sizeof(split) / sizeof(split[0]))
		return split[w];
	if (w >= 16 && w - 16 < sizeof(ctl) / sizeof(ctl[0]))
		return ctl[w - 16];
	return "other";
}

/* TTFT p50, p90 and hit rate of r's requests whose kvsplice verdict
 * (in k) was w. */
static void of_verdict(const struct result *k, const struct result *r, uint32_t n, uint32_t w,
		       double *out)
{
	double *t = malloc(sizeof(double) * (n ? n : 1));
	uint64_t prompt = 0, cached = 0;
	uint32_t i, m = 0;

	for (i = 0; i < n; i++) {
		if (k->anat.why[i] != w)
			continue;
		t[m++] = r->anat.ttft[i];
		prompt += r->anat.prompt[i];
		cached += r->anat.cached[i];
	}
	out[0] = kvs_percentile(t, m, 50);
	out[1] = kvs_percentile(t, m, 90);
	out[2] = prompt ? (double)cached / (double)prompt : 0;
	free(t);
}

/* Where the hits went (struct anatomy); for kvsplice, by verdict, with
 * what the other policies did with the same requests. */
static void print_anatomy_json(const struct sim_opts *o, const struct workload *w,
			       const struct result *res, uint32_t i)
{
	const struct anatomy *a = &res[i].anat;
	uint32_t v, j, nv = 0;
	double f[3];

	printf(",\"anatomy\":{\"held_anywhere\":%.4f,\"held_by_chosen\":%.4f,"
	       "\"lost_to_routing\":%.4f,\"duplicated\":%.4f",
	       a->held_anywhere, a->held_by_chosen, a->held_anywhere - a->held_by_chosen,
	       a->duplicated);
	if (o->pols[i] == P_KVSPLICE) {
		printf(",\"by_verdict\":{");
		for (v = 0; v < SIM_WHY_N; v++) {
			if (!a->n_by_why[v])
				continue;
			of_verdict(&res[i], &res[i], w->n, v, f);
			printf("%s\"%s\":{\"requests\":%u,\"lost\":%.4f,\"ttft_ms\":[%.2f,%.2f],"
			       "\"hit_rate\":%.4f,\"same_requests\":{",
			       nv++ ? "," : "", why_name(v), a->n_by_why[v], a->lost_by_why[v],
			       f[0], f[1], f[2]);
			for (j = 0; j < o->npol; j++) {
				if (j == i)
					continue;
				of_verdict(&res[i], &res[j], w->n, v, f);
				printf("%s\"%s\":{\"ttft_ms\":[%.2f,%.2f],\"hit_rate\":%.4f}",
				       j == 0 || (i == 0 && j == 1) ? "" : ",", res[j].name, f[0],
				       f[1], f[2]);
			}
			printf("}}");
		}
		printf("}");
	}
	printf("}");
}

/* kvsplice's index against the real caches: with --kvsplice-index-scale,
 * whether the backends' reports bring it back (kvs_policy_feedback). */
static void print_index_json(const struct sim_opts *o, const struct index_figures *x)
{
	const double *f = x->first, *l = x->last;

	printf(",\"index\":{\"scale\":%.3f,\"feedback\":%s,\"final\":%.4f,\"series\":[",
	       o->index_scale, o->feedback ? "true" : "false", x->final);
	for (uint32_t k = 0; k < SIM_INDEX_SAMPLES; k++)
		printf("%s%.4f", k ? "," : "", x->series[k]);
	printf("],\"first_third\":{\"ttft_ms\":[%.2f,%.2f,%.2f],\"hit_rate\":%.4f},"
	       "\"last_third\":{\"ttft_ms\":[%.2f,%.2f,%.2f],\"hit_rate\":%.4f}}",
	       f[0], f[1], f[2], f[3], l[0], l[1], l[2], l[3]);
}

void sim_print_json(const struct sim_opts *o, const struct workload *w, double ceiling,
		    const struct result *res, uint32_t base)
{
	const struct result *r0 = &res[base];
	uint32_t i, b;

	printf("{\"workload\":\"%s\",\"trace\":", o->trace ? "trace" : workload_names[o->kind]);
	kvs_json_str(stdout, o->trace ? o->trace : "", SIZE_MAX);
	printf(",\"speed\":%.3f,", o->speed);
	printf("\"backends\":%u,\"kv_blocks\":%u,\"requests\":%u,\"rate\":%.3f,"
	       "\"contexts\":%u,\"context_tokens\":%u,\"own_tokens\":%u,\"max_tokens\":%u,"
	       "\"seed\":\"%llu\",\"fleet_lru_hit_rate\":%.4f,\"baseline\":\"%s\",\"policies\":[",
	       o->backends, o->kv_blocks, w->n, o->rate, o->contexts, o->context_tokens,
	       o->own_tokens, o->max_tokens, (unsigned long long)o->seed, ceiling, r0->name);
	for (i = 0; i < o->npol; i++) {
		const struct result *r = &res[i];

		printf("%s{\"name\":\"%s\",\"requests\":%u,\"ttft_p50_ms\":%.2f,"
		       "\"ttft_p90_ms\":%.2f,\"ttft_p99_ms\":%.2f,\"e2e_p50_ms\":%.2f,"
		       "\"e2e_p90_ms\":%.2f,\"throughput_rps\":%.3f,\"output_tok_s\":%.1f,"
		       "\"hit_rate\":%.4f,\"load_max_over_mean\":%.3f,"
		       "\"load_max_over_mean_work\":%.3f,\"load_cv\":%.3f,"
		       "\"backend_requests\":[",
		       i ? "," : "", r->name, r->done, r->ttft_p50, r->ttft_p90, r->ttft_p99,
		       r->e2e_p50, r->e2e_p90, r->rps, r->tok_s, r->hit, r->mm, r->mm_work, r->cv);
		for (b = 0; b < o->backends; b++)
			printf("%s%.0f", b ? "," : "", r->loads[b]);
		printf("]");
		if (o->join_at_s > 0) {
			const struct join_figures *j = &r->join;

			static const char *const how[] = { "joins", "never", "always" };

			printf(",\"join\":{\"newcomer\":\"%s\",\"at_s\":%.3f,\"before\":%u,\"after\":%u,"
			       "\"newcomer_share\":%.4f,\"newcomer_share_60s\":%.4f,"
			       "\"newcomer_work_share\":%.4f,\"fair_share\":%.4f,"
			       "\"hit_rate_after\":%.4f,\"ttft_before_ms\":[%.2f,%.2f,%.2f],"
			       "\"ttft_after_ms\":[%.2f,%.2f,%.2f]",
			       how[o->newcomer], o->join_at_s, j->before, j->after, j->share,
			       j->share_60, j->work_share, 1.0 / o->backends, j->hit_after,
			       j->before_p50, j->before_p90, j->before_p99, j->after_p50,
			       j->after_p90, j->after_p99);
			printf("}");
		}
		if (o->pols[i] == P_KVSPLICE)
			print_index_json(o, &r->index);
		print_anatomy_json(o, w, res, i);
		printf(",\"vs_baseline\":{");
		/* percent change against the baseline; hit rate in points */
		printf("\"ttft_p50_pct\":%.1f,\"ttft_p90_pct\":%.1f,"
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

/* --join-at: what the newcomer got, and TTFT before and after it came. */
static void print_join(const struct sim_opts *o, const struct result *res)
{
	static const char *const how[] = { "joined", "never came (--newcomer never)",
					   "was there from the start (--newcomer always)" };

	printf("\nbackend %u %s; at %.0f s: its share of the requests that arrived after\n"
	       "(fair: %.1f%%), in the first 60 s, of the prefill work; TTFT before / after\n",
	       o->backends - 1, how[o->newcomer], o->join_at_s, 100.0 / o->backends);
	printf("%-9s %7s %7s %7s  %-20s %-20s %6s\n", "policy", "share", "60 s", "work",
	       "before p50/p90/p99", "after p50/p90/p99", "hit");
	for (uint32_t i = 0; i < o->npol; i++) {
		const struct join_figures *j = &res[i].join;
		char before[32], after[32];

		snprintf(before, sizeof(before), "%.0f/%.0f/%.0f", j->before_p50, j->before_p90,
			 j->before_p99);
		snprintf(after, sizeof(after), "%.0f/%.0f/%.0f", j->after_p50, j->after_p90,
			 j->after_p99);
		printf("%-9s %6.1f%% %6.1f%% %6.1f%%  %-20s %-20s %5.1f%%\n", res[i].name,
		       100 * j->share, 100 * j->share_60, 100 * j->work_share, before, after,
		       100 * j->hit_after);
	}
}

void sim_print_table(const struct sim_opts *o, const struct result *res, uint32_t base)
{
	const struct result *r0 = &res[base];
	uint32_t i, b;

	/* load max/mean by requests, and by prefill tokens computed (work) */
	printf("%-9s %9s %8s %8s %8s %8s %7s %8s %6s %8s %8s\n", "policy", "TTFT p50", "p90", "p99",
	       "e2e p50", "p90", "req/s", "tok/s", "hit", "max/mean", "(work)");
	for (i = 0; i < o->npol; i++)
		printf("%-9s %7.0fms %6.0fms %6.0fms %6.0fms %6.0fms %7.2f %8.0f %5.1f%% %8.2f "
		       "%8.2f\n",
		       res[i].name, res[i].ttft_p50, res[i].ttft_p90, res[i].ttft_p99,
		       res[i].e2e_p50, res[i].e2e_p90, res[i].rps, res[i].tok_s, 100 * res[i].hit,
		       res[i].mm, res[i].mm_work);
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
	if (o->join_at_s > 0)
		print_join(o, res);
	printf("\nwhere the hits went: of the prompt tokens, held by some backend as each "
	       "request was decided / by the one chosen; requests whose prefix 2+ held\n");
	for (i = 0; i < o->npol; i++)
		printf("%-9s %5.1f%% / %5.1f%%   %5.1f%%\n", res[i].name,
		       100 * res[i].anat.held_anywhere, 100 * res[i].anat.held_by_chosen,
		       100 * res[i].anat.duplicated);
	for (i = 0; i < o->npol; i++) {
		const struct index_figures *x = &res[i].index;

		if (o->pols[i] != P_KVSPLICE)
			continue;
		printf("\nkvsplice's index of each backend: %.2fx the real cache at the start "
		       "(--kvsplice-index-scale), %.2fx at the end (feedback %s)\n"
		       "first third of arrivals: TTFT p50 %.0f, p90 %.0f, p99 %.0f ms, hit "
		       "%.1f%%; last third: %.0f, %.0f, %.0f ms, %.1f%%\n",
		       o->index_scale, x->final, o->feedback ? "on" : "off", x->first[0],
		       x->first[1], x->first[2], 100 * x->first[3], x->last[0], x->last[1],
		       x->last[2], 100 * x->last[3]);
	}
}

void sim_print_header(const struct sim_opts *o, const struct workload *w, double ceiling)
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

int sim_write_dump(const char *path, const struct sim_opts *o, const struct workload *w,
		   const struct result *res)
{
	FILE *f = fopen(path, "w");
	uint32_t i, j;

	if (!f) {
		fprintf(stderr, PROG ": --dump %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "policy,request,arrival_ms,backend,why,prompt_tokens,cached_tokens,ttft_ms\n");
	for (i = 0; i < o->npol; i++) {
		const struct anatomy *a = &res[i].anat;

		for (j = 0; j < w->n; j++)
			fprintf(f, "%s,%u,%.3f,%u,%s,%u,%u,%.3f\n", res[i].name, j,
				w->arrival_ms[j] - w->arrival_ms[0], a->backend[j],
				/* only kvsplice's decisions have a verdict */
				o->pols[i] == P_KVSPLICE ? why_name(a->why[j]) : "-", a->prompt[j],
				a->cached[j], a->ttft[j]);
	}
	if (fclose(f)) {
		fprintf(stderr, PROG ": --dump %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

void sim_free_result(struct result *r)
{
	free(r->ttft);
	free(r->anat.ttft);
	free(r->anat.backend);
	free(r->anat.cached);
	free(r->anat.prompt);
	free(r->anat.why);
}
