// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench sim --sweep's report: the knee, then per load each
 * policy's TTFT p90 / p99 and throughput and kvsplice's verdict, as a
 * table or JSON.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "jsonstr.h"
#include "sim_sweep.h"

/* (here, with what prints them: the sweep calls the report, not back) */
const char *const sweep_verdict_names[SV_NONE + 1] = { "best", "tied", "loses", "-" };

/* A figure, or null where it is infinite (a policy not run, saturated). */
static void num(const char *key, double v)
{
	if (isfinite(v))
		printf(",\"%s\":%.2f", key, v);
	else
		printf(",\"%s\":null", key);
}

static const char *what(const struct sim_opts *o)
{
	return o->trace ? o->trace : workload_names[o->kind];
}

/* The loads judged: up to the best policy's saturation, not it. */
static void tally(const struct sweep *s, uint32_t *judged, uint32_t *ok90, uint32_t *ok99)
{
	*judged = *ok90 = *ok99 = 0;
	for (uint32_t i = 0; i < s->nload; i++) {
		const struct sweep_load *l = &s->load[i];

		if (l->saturated || l->v90 == SV_NONE)
			continue;
		(*judged)++;
		*ok90 += l->v90 != SV_LOSES;
		*ok99 += l->v99 != SV_LOSES;
	}
}

static void print_verdict(const char *fig, enum sweep_verdict v, double gap)
{
	if (v == SV_NONE)
		return;
	printf("  %s %s", fig, sweep_verdict_names[v]);
	if (!isfinite(gap))
		printf(" (saturated)");
	else if (v != SV_BEST)
		printf(" (%+.1f%%)", gap);
	else
		printf(" (%.1f%%)", gap);
}

void sim_sweep_print(const struct sim_opts *o, const struct sweep *s)
{
	uint32_t i, j, judged, ok90, ok99;

	printf("load sweep: %s, %u backends x %u KV blocks, %u requests a run\n", what(o),
	       o->backends, o->kv_blocks, o->requests);
	printf("round robin's knee (serves under %.0f%% of what is offered%s): %.3f%s\n",
	       100 * o->sweep_served, o->sweep_knee_p90 > 0 ? ", or TTFT p90 over the limit" : "",
	       s->knee, o->trace ? "x speed" : " req/s");
	printf("TTFT p90 / p99 ms%s and req/s served; kvsplice against the best other (tied: "
	       "within %.0f%% or %.0f ms)\n\n",
	       o->sweep_warmup > 0 ? " (after each run's warm-up)" : "", o->sweep_tol_pct,
	       o->sweep_tol_ms);
	printf("%-6s %9s", "x knee", o->trace ? "speed" : "req/s");
	for (j = 0; j < s->npol; j++)
		printf(" %20s", s->load[0].pol[j].name);
	printf("  verdict\n");
	for (i = 0; i < s->nload; i++) {
		const struct sweep_load *l = &s->load[i];

		printf("%5.2fx %9.3f", l->factor, l->load);
		for (j = 0; j < s->npol; j++) {
			char cell[48];

			if (l->pol[j].skipped)
				snprintf(cell, sizeof(cell), "saturated");
			else
				snprintf(cell, sizeof(cell), "%.0f/%.0f %.2f%s", l->pol[j].p90,
					 l->pol[j].p99, l->pol[j].rps,
					 l->pol[j].served < o->sweep_served ? "*" : "");
			printf(" %20s", cell);
		}
		print_verdict("p90", l->v90, l->gap90);
		print_verdict("p99", l->v99, l->gap99);
		if (l->saturated)
			printf("  (the best saturates)");
		printf("\n");
	}
	tally(s, &judged, &ok90, &ok99);
	printf("\n*: serves under %.0f%% of what is offered; saturated: at a lower load, so not "
	       "run again.\nkvsplice best or tied at %u of %u loads on p90, %u of %u on p99\n",
	       100 * o->sweep_served, ok90, judged, ok99, judged);
}

void sim_sweep_json(const struct sim_opts *o, const struct sweep *s)
{
	uint32_t i, j, judged, ok90, ok99;

	printf("{\"workload\":\"%s\",\"trace\":", o->trace ? "trace" : workload_names[o->kind]);
	kvs_json_str(stdout, o->trace ? o->trace : "", SIZE_MAX);
	printf(",\"backends\":%u,\"kv_blocks\":%u,"
	       "\"requests\":%u,\"seed\":\"%llu\",\"load_unit\":\"%s\",\"served_threshold\":%.3f,"
	       "\"tolerance_pct\":%.2f,\"tolerance_ms\":%.2f,\"knee_p90_ms\":%.1f,"
	       "\"repeat\":%u,\"warmup\":%.2f,\"knee\":%.4f,\"knee_probes\":[",
	       o->backends, o->kv_blocks, o->requests, (unsigned long long)o->seed,
	       o->trace ? "speed" : "rps", o->sweep_served, o->sweep_tol_pct, o->sweep_tol_ms,
	       o->sweep_knee_p90, o->sweep_repeat ? o->sweep_repeat : 1, o->sweep_warmup, s->knee);
	for (i = 0; i < s->nprobe; i++)
		printf("%s{\"load\":%.4f,\"served\":%.4f,\"ttft_p90_ms\":%.2f,\"past\":%s}",
		       i ? "," : "", s->probe[i].load, s->probe[i].served, s->probe[i].p90,
		       s->probe[i].over ? "true" : "false");
	printf("],\"loads\":[");
	for (i = 0; i < s->nload; i++) {
		const struct sweep_load *l = &s->load[i];

		printf("%s{\"factor\":%.2f,\"load\":%.4f,\"offered_rps\":%.3f,\"best_served\":%.4f,"
		       "\"saturated\":%s,\"p90\":\"%s\",\"p99\":\"%s\"",
		       i ? "," : "", l->factor, l->load, l->offered_rps, l->best_served,
		       l->saturated ? "true" : "false", sweep_verdict_names[l->v90],
		       sweep_verdict_names[l->v99]);
		num("p90_gap_pct", l->gap90);
		num("p99_gap_pct", l->gap99);
		printf(",\"policies\":[");
		for (j = 0; j < s->npol; j++) {
			const struct sweep_pol *p = &l->pol[j];

			printf("%s{\"name\":\"%s\",\"skipped\":%s", j ? "," : "", p->name,
			       p->skipped ? "true" : "false");
			num("ttft_p50_ms", p->p50);
			num("ttft_p90_ms", p->p90);
			num("ttft_p99_ms", p->p99);
			printf(",\"throughput_rps\":%.3f,\"served\":%.4f,\"hit_rate\":%.4f,"
			       "\"load_max_over_mean_work\":%.3f}",
			       p->rps, p->served, p->hit, p->mm_work);
		}
		printf("]}");
	}
	tally(s, &judged, &ok90, &ok99);
	printf("],\"judged\":%u,\"kvsplice_p90_ok\":%u,\"kvsplice_p99_ok\":%u}\n", judged, ok90,
	       ok99);
}
