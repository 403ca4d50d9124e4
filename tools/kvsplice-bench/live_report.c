// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench live's report: the summary of a run (latency percentiles,
 * hit rate, load per backend by requests and by prefill work, prefix
 * groups split, framing errors, errors by code), printed as text or JSON,
 * per request, and plotted. The figures are the server's own (END's tokens
 * and backend id), so they mean the same under either --verify.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonstr.h"
#include "live_int.h"
#include "plot.h"
#include "stats.h"

static int backend_slot(struct summary *s, uint32_t id)
{
	uint32_t i;

	for (i = 0; i < s->nbackends; i++)
		if (s->backend_ids[i] == id)
			return (int)i;
	if (s->nbackends == MAX_BACKEND_IDS)
		return -1;
	s->backend_ids[s->nbackends] = id;
	return (int)s->nbackends++;
}

void live_summarize(const struct run *r, double wall_s, struct summary *s)
{
	uint32_t n = r->n, i, g, nloads, ngroups = live_groups(r);
	double *ttft = calloc(n ? n : 1, sizeof(double)), *e2e = calloc(n ? n : 1, sizeof(double));
	double loads[MAX_BACKEND_IDS];
	uint64_t prompt = 0, cached = 0;
	uint32_t *group_backend = calloc(ngroups ? ngroups : 1, sizeof(uint32_t));
	uint8_t *group_split = calloc(ngroups ? ngroups : 1, 1);

	memset(s, 0, sizeof(*s));
	s->wall_s = wall_s;
	for (i = 0; i < n; i++) {
		const struct req *q = &r->reqs[i];
		int slot;

		/* The codes of the ERRORs that ended requests (an answer that
		 * broke the framing afterwards still had one). */
		if (q->error)
			s->errors_by_code[q->error]++;
		s->ends += q->got_end;
		switch (q->status) {
		case RS_OK:
			ttft[s->ok] = (double)(q->first_ns - q->send_ns) / 1e6;
			e2e[s->ok] = (double)(q->end_ns - q->send_ns) / 1e6;
			s->ok++;
			prompt += q->prompt_tokens;
			cached += q->cached_tokens;
			s->output_tokens += q->output_tokens;
			slot = backend_slot(s, q->backend_id);
			if (slot >= 0) {
				s->backend_reqs[slot]++;
				s->backend_work[slot] += q->prompt_tokens - q->cached_tokens;
			}
			if (ngroups) {
				g = q->group;
				if (!group_backend[g])
					group_backend[g] = q->backend_id + 1;
				else if (group_backend[g] != q->backend_id + 1)
					group_split[g] = 1;
			}
			break;
		case RS_ERROR:
			s->errors++;
			break;
		case RS_MISMATCH:
			s->mismatches++;
			break;
		default:
			s->lost++;
		}
	}
	for (g = 0; g < ngroups; g++)
		s->groups_split += group_split[g];
	for (i = 0; i < LF_MAX; i++)
		s->framing_errors += r->faults[i];
	/* Conversations: request id's previous turn is id - conversations. */
	for (i = r->o->conversations; ngroups && r->o->conversations && i < n; i++) {
		const struct req *q = &r->reqs[i], *prev = &r->reqs[i - r->o->conversations];

		if (q->status != RS_OK || prev->status != RS_OK)
			continue;
		s->later_turns++;
		s->turn_moves += q->backend_id != prev->backend_id;
	}
	s->ttft_p50 = kvs_percentile(ttft, s->ok, 50);
	s->ttft_p90 = kvs_percentile(ttft, s->ok, 90);
	s->ttft_p99 = kvs_percentile(ttft, s->ok, 99);
	s->e2e_p50 = kvs_percentile(e2e, s->ok, 50);
	s->e2e_p90 = kvs_percentile(e2e, s->ok, 90);
	s->rps = wall_s > 0 ? s->ok / wall_s : 0;
	s->tok_s = wall_s > 0 ? (double)s->output_tokens / wall_s : 0;
	s->hit_rate = prompt ? (double)cached / (double)prompt : 0;
	s->prompt_tokens = prompt;
	s->cached_tokens = cached;
	/* Backends that served nothing are the worst imbalance of all, and
	 * no END names them: the gateway says how many there are (--fleet). */
	s->fleet = live_fleet_size(r->o, &r->fleet, &s->fleet_from);
	if (s->fleet < s->nbackends)
		s->fleet = s->nbackends;
	if (s->fleet > MAX_BACKEND_IDS)
		s->fleet = MAX_BACKEND_IDS;
	nloads = s->fleet;
	for (i = 0; i < nloads; i++)
		loads[i] = i < s->nbackends ? s->backend_reqs[i] : 0;
	s->load_max_over_mean = kvs_max_over_mean(loads, nloads);
	s->load_cv = kvs_cv(loads, nloads);
	/* By work too: requests differ in what they cost a backend, and a
	 * router may balance counts while one backend computes most prefills. */
	for (i = 0; i < nloads; i++)
		loads[i] = i < s->nbackends ? (double)s->backend_work[i] : 0;
	s->load_max_over_mean_work = kvs_max_over_mean(loads, nloads);
	s->ttft = ttft;
	free(e2e);
	free(group_backend);
	free(group_split);
}

void live_print_per_request(const struct run *r)
{
	static const char *const names[] = { "lost", "ok", "error", "mismatch" };
	uint32_t i;

	for (i = 0; i < r->n; i++) {
		const struct req *q = &r->reqs[i];

		printf("req=%u conn=%u group=%u status=%s backend=%u ttft_ms=%.3f e2e_ms=%.3f "
		       "prompt_tokens=%u cached_tokens=%u chunks=%u output_tokens=%u error=%s\n",
		       i + 1, q->conn, q->group, names[q->status], q->backend_id,
		       q->first_ns ? (double)(q->first_ns - q->send_ns) / 1e6 : 0.0,
		       q->end_ns ? (double)(q->end_ns - q->send_ns) / 1e6 : 0.0, q->prompt_tokens,
		       q->cached_tokens, q->chunks, q->output_tokens,
		       q->error ? kvs_status_name(q->error) : "none");
	}
}

static const char *const verify_names[] = {
	[LIVE_VERIFY_SIM] = "sim",
	[LIVE_VERIFY_FRAMING] = "framing",
};

/* JSON: "verify", the requests ended by an END, the framing errors in all
 * and by kind, the frames ignored after backend_gone, the connections' and
 * the requests' errors (by code name, only the codes seen). */
static void json_checks(const struct run *r, const struct summary *s)
{
	const char *sep = "";
	int i;

	printf("\"verify\":\"%s\",\"ends\":%u,\"framing_errors\":%u,\"framing\":{",
	       verify_names[r->o->verify], s->ends, s->framing_errors);
	for (i = 0; i < LF_MAX; i++)
		printf("%s\"%s\":%u", i ? "," : "", live_fault_names[i], r->faults[i]);
	printf("},\"late_frames\":%u,\"conn_errors\":%u,\"errors_by_code\":{", r->late,
	       r->conn_errors);
	for (i = 1; i <= KVS_E_MAX; i++) {
		if (!s->errors_by_code[i])
			continue;
		printf("%s\"%s\":%u", sep, kvs_status_name(i), s->errors_by_code[i]);
		sep = ",";
	}
	printf("},");
}

/* Text: the checks' line and the errors' line. */
static void text_checks(const struct run *r, const struct summary *s)
{
	const char *sep = " (";
	int i, n = 0;

	printf("verify        %s: %u ended by END, %u framing errors", verify_names[r->o->verify],
	       s->ends, s->framing_errors);
	for (i = 0; i < LF_MAX; i++) {
		if (!r->faults[i])
			continue;
		printf("%s%s %u", sep, live_fault_names[i], r->faults[i]);
		sep = ", ";
	}
	if (s->framing_errors)
		printf(")");
	if (r->late)
		printf("; %u frames after backend_gone, ignored", r->late);
	printf("\nerrors        ");
	for (i = 1; i <= KVS_E_MAX; i++) {
		if (!s->errors_by_code[i])
			continue;
		printf("%s%s %u", n++ ? ", " : "", kvs_status_name(i), s->errors_by_code[i]);
	}
	if (!n)
		printf("none");
	if (r->conn_errors)
		printf("; %u on a connection (req_id 0)", r->conn_errors);
	printf("\n");
}

/* Who said how many backends there are, how many served nothing, and
 * what the gateway sent each during the run (it counts requests, the
 * ENDs above count answers: the same, unless other clients shared it). */
static void text_fleet(const struct run *r, const struct summary *s)
{
	static const char *const from[] = {
		"gateway",  "said by the gateway",
		"backends", "the targets are the backends",
		"option",   "--fleet",
		"seen",	    "those that answered: the gateway did not say"
	};
	const char *why = s->fleet_from;
	uint32_t i;

	for (i = 0; i < sizeof(from) / sizeof(from[0]); i += 2)
		if (!strcmp(from[i], s->fleet_from))
			why = from[i + 1];
	printf("fleet         %u backends (%s), %u served nothing", s->fleet, why,
	       s->fleet - s->nbackends);
	if (!strcmp(s->fleet_from, "gateway"))
		printf("; %u in service before or after the run", r->fleet.in_service);
	printf("\n");
	if (!r->fleet.per_slot)
		return;
	printf("gateway       requests it sent during the run, by backend slot:");
	for (i = 0; i < MAX_FLEET_SLOTS; i++)
		if (live_fleet_sent(&r->fleet, i) >= 0)
			printf(" %u=%lld", i, (long long)live_fleet_sent(&r->fleet, i));
	printf("\n");
}

static void json_fleet(const struct run *r, const struct summary *s)
{
	const char *sep = "";

	printf("\"fleet\":%u,\"fleet_from\":\"%s\",\"idle_backends\":%u,", s->fleet, s->fleet_from,
	       s->fleet - s->nbackends);
	if (!strcmp(s->fleet_from, "gateway"))
		printf("\"fleet_in_service\":%u,", r->fleet.in_service);
	if (!r->fleet.per_slot)
		return;
	printf("\"gateway_slots\":[");
	for (uint32_t i = 0; i < MAX_FLEET_SLOTS; i++)
		if (live_fleet_sent(&r->fleet, i) >= 0) {
			printf("%s{\"slot\":%u,\"requests\":%lld}", sep, i,
			       (long long)live_fleet_sent(&r->fleet, i));
			sep = ",";
		}
	printf("],");
}

void live_print_summary(const struct run *r, const struct summary *s)
{
	uint32_t i;

	if (r->o->json) {
		printf("{\"mode\":\"%s\",\"offered_rps\":%.3f,\"trace\":",
		       r->o->rate > 0 || r->o->trace ? "open" : "closed", r->o->rate);
		kvs_json_str(stdout, r->o->trace ? r->o->trace : "", SIZE_MAX);
		printf(",\"speed\":%.3f,"
		       "\"requests\":%u,\"ok\":%u,\"errors\":%u,\"mismatches\":%u,\"lost\":%u,"
		       "\"wall_s\":%.3f,\"throughput_rps\":%.2f,\"output_tok_s\":%.1f,"
		       "\"ttft_p50_ms\":%.3f,"
		       "\"ttft_p90_ms\":%.3f,\"ttft_p99_ms\":%.3f,\"e2e_p50_ms\":%.3f,"
		       "\"e2e_p90_ms\":%.3f,\"hit_rate\":%.4f,\"load_max_over_mean\":%.3f,"
		       "\"load_max_over_mean_work\":%.3f,\"load_cv\":%.3f,\"prefix_groups\":%u,"
		       "\"groups_split\":%u,"
		       "\"later_turns\":%u,\"turn_moves\":%u,\"prompt_tokens\":%llu,"
		       "\"cached_tokens\":%llu,\"output_tokens\":%llu,",
		       r->o->trace ? r->o->speed : 0, r->n, s->ok, s->errors, s->mismatches,
		       s->lost, s->wall_s, s->rps, s->tok_s, s->ttft_p50, s->ttft_p90, s->ttft_p99,
		       s->e2e_p50, s->e2e_p90, s->hit_rate, s->load_max_over_mean,
		       s->load_max_over_mean_work, s->load_cv, live_groups(r), s->groups_split,
		       s->later_turns, s->turn_moves, (unsigned long long)s->prompt_tokens,
		       (unsigned long long)s->cached_tokens, (unsigned long long)s->output_tokens);
		json_checks(r, s);
		json_fleet(r, s);
		printf("\"backends\":[");
		for (i = 0; i < s->nbackends; i++)
			printf("%s{\"id\":%u,\"requests\":%u,\"prefill_tokens\":%llu}",
			       i ? "," : "", s->backend_ids[i], s->backend_reqs[i],
			       (unsigned long long)s->backend_work[i]);
		printf("]}\n");
		return;
	}
	printf("requests      %u sent, %u ok, %u errors, %u mismatched, %u lost\n", r->n, s->ok,
	       s->errors, s->mismatches, s->lost);
	text_checks(r, s);
	printf("wall time     %.3f s, %.1f requests/s, %.0f output tokens/s", s->wall_s, s->rps,
	       s->tok_s);
	if (r->o->trace)
		printf(" (trace %s at %.2fx)", r->o->trace, r->o->speed);
	else if (r->o->rate > 0)
		printf(" (open loop, %.1f offered)", r->o->rate);
	printf("\n");
	printf("TTFT          p50 %.2f ms, p90 %.2f ms, p99 %.2f ms\n", s->ttft_p50, s->ttft_p90,
	       s->ttft_p99);
	printf("end-to-end    p50 %.2f ms, p90 %.2f ms\n", s->e2e_p50, s->e2e_p90);
	printf("cache hits    %.1f%% of prompt tokens (backends' own reports)\n",
	       100 * s->hit_rate);
	if (r->o->trace)
		; /* sharing is the trace's: the hit rate says what came of it */
	else if (r->o->conversations)
		printf("conversations %u, %u of %u later turns served by another backend than "
		       "the turn before\n",
		       r->o->conversations, s->turn_moves, s->later_turns);
	else if (r->o->prefixes)
		printf("prefixes      %u groups, %u served by more than one backend\n",
		       r->o->prefixes, s->groups_split);
	printf("load          max/mean %.2f, cv %.2f:", s->load_max_over_mean, s->load_cv);
	for (i = 0; i < s->nbackends; i++)
		printf(" backend %u=%u", s->backend_ids[i], s->backend_reqs[i]);
	printf("\nwork          max/mean %.2f by prefill tokens computed:",
	       s->load_max_over_mean_work);
	for (i = 0; i < s->nbackends; i++)
		printf(" backend %u=%llu", s->backend_ids[i],
		       (unsigned long long)s->backend_work[i]);
	printf("\n");
	text_fleet(r, s);
}

/* --plot: this run's TTFT CDF and requests per backend (in the order the
 * backends first answered; those that served nothing, up to the fleet, as
 * 0). */
int live_plot(const struct run *r, const struct summary *s)
{
	double loads[MAX_BACKEND_IDS] = { 0 };
	uint32_t nloads = s->fleet, i;
	struct bench_series ser = { .name = r->o->label,
				    .ttft_ms = s->ttft,
				    .n = s->ok,
				    .loads = loads,
				    .nloads = nloads };
	char title[512];

	for (i = 0; i < s->nbackends; i++)
		loads[i] = s->backend_reqs[i];
	snprintf(title, sizeof(title), "%s, %u requests", r->o->trace ? r->o->trace : "live run",
		 r->n);
	if (bench_plot(PROG, r->o->plot_dir, title, &ser, 1))
		return -1;
	if (!r->o->json)
		printf("plots         %s/ttft_cdf.{svg,png}, %s/load.{svg,png}\n", r->o->plot_dir,
		       r->o->plot_dir);
	return 0;
}
