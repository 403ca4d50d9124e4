// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench sim's fleet: N batching engines in virtual time behind one
 * routing policy (ours, or a re-implementation of another router's), the
 * event loop that routes each arrival and steps the engines, and the
 * figures of the run.
 *
 * kvsplice runs as the gateway splits the work (--kvsplice-model split):
 * the kernel's verdict for every request and the controller's reading of
 * its reports (user/core/kroute.h), the controller refreshing the kernel's
 * work limit every KR_TICK_MS of virtual time as its tick does; it decides
 * nothing itself, since the kernel places whatever no route takes. With
 * --kvsplice-model controller, the controller decides every request
 * (kvs_policy_decide) and no routes exist.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "chash.h"
#include "engine.h"
#include "kroute.h"
#include "kvsplice/hash.h"
#include "policy.h"
#include "sim_baselines.h"
#include "sim_int.h"
#include "stats.h"

const char *const pol_names[P_DYNAMO + 1] = { "rr",	"lor",	"chash", "kvsplice",
					      "sglang", "llmd", "dynamo" };

struct sreq {
	struct kvs_eng_req eng; /* first: engine events point here */
	uint32_t context, backend;
	uint64_t work;			/* tokens charged to the backend */
	uint64_t prefill_work;		/* of which prefill, until the first token */
	uint32_t out;			/* output tokens charged (kvs_charged_output) */
	uint32_t pred_cached;		/* prompt tokens the router expected cached */
	uint32_t held_any, held_chosen; /* blocks: the anatomy (struct anatomy) */
	uint8_t why;
	bool dup;
	uint64_t *h;
};

/* --join-at: what the requests that arrived before and after the join saw. */
struct join_acc {
	double *ttft_before, *ttft_after;
	uint32_t before, after, newcomer;
	uint32_t after_60, newcomer_60; /* arrived in the join's first 60 s */
	uint64_t prompt, cached;	/* of the requests after */
	uint64_t work, newcomer_work;	/* prefill tokens computed after */
};

struct backend {
	struct kvs_engine eng;
	bool stepping;
	double step_end;
	uint64_t work, outstanding, served;
	uint64_t prefilled;	/* prompt tokens it computed (not from cache) */
	struct kvs_feedback fb; /* END reports since the last correction */
};

/* What the fleet held of r's prompt as it was decided (struct anatomy):
 * the longest prefix on any backend present, on the chosen one, and
 * whether another backend held at least half as much as the best. */
static void held(const struct backend *be, uint32_t nb, struct sreq *r)
{
	uint32_t m[KVS_MAX_BACKENDS] = { 0 }, b, best = 0, n = 0;

	for (b = 0; b < nb; b++) {
		m[b] = kvs_pcache_match(&be[b].eng.cache, r->eng.hashes, r->eng.nblocks);
		if (m[b] > best)
			best = m[b];
	}
	for (b = 0; b < nb; b++)
		n += best && 2 * m[b] >= best;
	r->held_any = best;
	r->held_chosen = r->backend < nb ? m[r->backend] : 0;
	r->dup = n >= 2;
}

/* What each request saw, by arrival, for the index figures. */
struct index_acc {
	double *ttft;
	uint32_t *prompt, *cached;
	uint32_t samples;
};

/* TTFT percentiles and hit rate of requests [from, to) by arrival. */
static void index_part(const struct index_acc *a, uint32_t from, uint32_t to, double *out)
{
	double *t = malloc(sizeof(double) * (to > from ? to - from : 1));
	uint64_t prompt = 0, cached = 0;
	uint32_t i, n = 0;

	for (i = from; i < to; i++) {
		t[n++] = a->ttft[i];
		prompt += a->prompt[i];
		cached += a->cached[i];
	}
	out[0] = kvs_percentile(t, n, 50);
	out[1] = kvs_percentile(t, n, 90);
	out[2] = kvs_percentile(t, n, 99);
	out[3] = prompt ? (double)cached / (double)prompt : 0;
	free(t);
}

/* The mean index size over the backends, against the real capacity. */
static double index_ratio(const struct kvs_policy *pol, uint32_t nb, uint32_t kv_blocks)
{
	double sum = 0;

	for (uint32_t b = 0; b < nb; b++)
		sum += kvs_policy_index_blocks(pol, b);
	return sum / nb / kv_blocks;
}

static void join_count(struct join_acc *a, const struct sim_opts *o, const struct sreq *r,
		       double join_ms, double ttft)
{
	bool newcomer = r->backend == o->backends - 1;
	uint64_t work = r->eng.prompt_tokens - r->eng.cached_tokens;

	if (r->eng.arrival_ms < join_ms) {
		a->ttft_before[a->before++] = ttft;
		return;
	}
	a->ttft_after[a->after++] = ttft;
	a->newcomer += newcomer;
	if (r->eng.arrival_ms < join_ms + 60000) {
		a->after_60++;
		a->newcomer_60 += newcomer;
	}
	a->prompt += r->eng.prompt_tokens;
	a->cached += r->eng.cached_tokens;
	a->work += work;
	a->newcomer_work += newcomer ? work : 0;
}

static void join_result(struct join_acc *a, struct result *res)
{
	struct join_figures *j = &res->join;

	j->before = a->before;
	j->after = a->after;
	j->before_p50 = kvs_percentile(a->ttft_before, a->before, 50);
	j->before_p90 = kvs_percentile(a->ttft_before, a->before, 90);
	j->before_p99 = kvs_percentile(a->ttft_before, a->before, 99);
	j->after_p50 = kvs_percentile(a->ttft_after, a->after, 50);
	j->after_p90 = kvs_percentile(a->ttft_after, a->after, 90);
	j->after_p99 = kvs_percentile(a->ttft_after, a->after, 99);
	j->share = a->after ? (double)a->newcomer / a->after : 0;
	j->share_60 = a->after_60 ? (double)a->newcomer_60 / a->after_60 : 0;
	j->work_share = a->work ? (double)a->newcomer_work / (double)a->work : 0;
	j->hit_after = a->prompt ? (double)a->cached / (double)a->prompt : 0;
	free(a->ttft_before);
	free(a->ttft_after);
}

/* The backends the router may send to at time t: all of them, or with
 * --join-at, all but the last until it joins. */
static uint32_t present(const struct sim_opts *o, double join_ms, double t)
{
	if (o->join_at_s <= 0 || o->newcomer == J_ALWAYS)
		return o->backends;
	return o->newcomer == J_NEVER || t < join_ms ? o->backends - 1 : o->backends;
}

/* nb: the backends present (be[0..nb)); the rest are not in the fleet yet. */
static int pick(const struct sim_opts *o, enum pol p, struct backend *be, uint32_t nb,
		struct kvs_policy *pol, struct kvs_chash *ring, struct sim_baseline *bl,
		uint32_t *rr, struct sreq *r, uint32_t *cached_blocks, uint8_t *why)
{
	uint64_t load[KVS_MAX_BACKENDS];
	uint8_t ok[KVS_MAX_BACKENDS];
	struct kvs_decision d;
	uint32_t b, best = 0, n = r->eng.nblocks, key_block;
	/* a prompt under one block has nothing to route by: any key will do */
	uint64_t last = n ? r->eng.hashes[n - 1] : kvs_fmix64(r->eng.id + 1);

	*cached_blocks = 0;
	for (b = 0; b < o->backends; b++)
		ok[b] = b < nb;
	switch (p) {
	case P_RR:
		return (int)((*rr)++ % nb);
	case P_LOR:
		for (b = 1; b < nb; b++)
			if (be[b].outstanding < be[best].outstanding)
				best = b;
		return (int)best;
	case P_CHASH:
		/* bounded-load consistent hashing of the first 1,024 tokens */
		for (b = 0; b < o->backends; b++)
			load[b] = be[b].outstanding;
		key_block = n < 64 ? n : 64;
		return kvs_chash_pick(ring, n ? r->eng.hashes[key_block - 1] : last, load, ok,
				      1.25);
	case P_KVSPLICE:
		for (b = 0; b < o->backends; b++)
			load[b] = be[b].work;
		kvs_policy_decide(pol,
				  &(struct kvs_prompt){ .h = r->eng.hashes,
							.n = n,
							.tokens = r->eng.prompt_tokens,
							.place_key = last },
				  &(struct kvs_fleet_view){ .load = load, .eligible = ok }, &d);
		*cached_blocks = d.cached_blocks;
		*why = (uint8_t)(16 + d.reason);
		return d.backend;
	case P_SGLANG:
	case P_LLMD:
	case P_DYNAMO: {
		struct sim_bview v[KVS_MAX_BACKENDS];

		for (b = 0; b < nb; b++)
			v[b] = (struct sim_bview){ .eng = &be[b].eng,
						   .outstanding = be[b].outstanding };
		return sim_baseline_pick(bl, v, nb, &r->eng, r->eng.arrival_ms);
	}
	}
	return 0;
}

#define KR_TICK_MS 100.0 /* the controller's tick (user/kvspliced) */

/* The fleet as the kernel's backends map has it: be[0..nb), the first
 * npresent of them up (a backend not added yet is a slot not up). */
static void fleet_load(const struct backend *be, uint32_t nb, uint32_t npresent, uint64_t *load,
		       uint64_t *out, uint8_t *up)
{
	for (uint32_t b = 0; b < nb; b++) {
		load[b] = be[b].work;
		out[b] = be[b].outstanding;
		up[b] = b < npresent;
	}
}

/* kvsplice split: the verdict, then the controller's reading of its
 * report. *work is what the kernel charged. */
static int pick_split(struct kvs_kr *kr, const struct backend *be, uint32_t nb, uint32_t npresent,
		      const struct sreq *r, uint32_t charged_out, uint64_t *work, uint8_t *why)
{
	uint64_t load[KVS_MAX_BACKENDS], out[KVS_MAX_BACKENDS];
	uint8_t up[KVS_MAX_BACKENDS];
	struct kvs_kr_decision d;
	/* no cache keys or hints in these workloads; model 0, no salt */
	struct kvs_kr_req q = { .h = r->eng.hashes,
				.n = r->eng.nblocks,
				.prompt_tokens = r->eng.prompt_tokens,
				.max_tokens = charged_out, /* what the kernel charges */
				.seed = kvs_seed(0, 0),
				.now_ns = (uint64_t)(r->eng.arrival_ms * 1e6) };

	fleet_load(be, nb, npresent, load, out, up);
	kvs_kr_decide(kr, &q, load, out, up, &d);
	kvs_kr_report(kr, &q, &d);
	*work = d.charge;
	*why = (uint8_t)d.why;
	return d.backend;
}

/* The gateway's tick: each index corrected from its backend's END reports
 * (gw_feedback). */
static void feedback(struct kvs_policy *pol, struct backend *be, uint32_t nb)
{
	for (uint32_t b = 0; b < nb; b++) {
		if (be[b].work > be[b].fb.peak_work)
			be[b].fb.peak_work = be[b].work;
		if (kvs_policy_feedback(pol, b, &be[b].fb))
			be[b].fb = (struct kvs_feedback){ 0 };
	}
}

static void refresh_limit(struct kvs_kr *kr, const struct backend *be, uint32_t nb,
			  uint32_t npresent)
{
	uint64_t load[KVS_MAX_BACKENDS], out[KVS_MAX_BACKENDS];
	uint8_t up[KVS_MAX_BACKENDS];

	fleet_load(be, nb, npresent, load, out, up);
	kvs_kr_refresh(kr, load, up);
}

void sim_run_policy(const struct sim_opts *o, const struct workload *w, enum pol p,
		    struct result *res)
{
	struct kvs_model_params m;
	struct backend *be = calloc(o->backends, sizeof(*be));
	struct kvs_policy_params pp;
	struct kvs_policy pol;
	struct kvs_kr_params kp;
	struct kvs_kr kroute, *kr = NULL;
	struct kvs_chash ring;
	const char *names[KVS_MAX_BACKENDS];
	char namebuf[KVS_MAX_BACKENDS][24];
	double *ttft = malloc(sizeof(double) * w->n), *e2e = malloc(sizeof(double) * w->n);
	double last_end = 0, next_tick = KR_TICK_MS;
	uint64_t prompt = 0, cached = 0, out_tokens = 0;
	/* what the gateway learns of output lengths (kvs_expect_output) */
	uint64_t expect = KVS_EXPECT_OUTPUT_INIT, tick_out = 0, tick_ends = 0, charged_total = 0;
	uint32_t next = 0, done = 0, rr = 0, b, reported = 0;
	struct sim_baseline *bl = NULL;
	bool flushed = false;
	/* --join-at: the last backend joins at join_ms */
	double join_ms = w->n ? w->arrival_ms[0] + o->join_at_s * 1000 : 0;
	struct join_acc ja = { .ttft_before = malloc(sizeof(double) * w->n),
			       .ttft_after = malloc(sizeof(double) * w->n) };
	struct index_acc ia = { .ttft = calloc(w->n ? w->n : 1, sizeof(double)),
				.prompt = calloc(w->n ? w->n : 1, sizeof(uint32_t)),
				.cached = calloc(w->n ? w->n : 1, sizeof(uint32_t)) };
	double span = w->n ? w->arrival_ms[w->n - 1] - w->arrival_ms[0] : 0;
	struct {
		uint64_t held_any, held_chosen, with_holder, dup;
	} an = { 0 };
	/* what a prediction can cover: the kernel's window, or the index's */
	uint64_t window =
		(uint64_t)(o->model == M_SPLIT ? o->window_blocks : KVS_POLICY_MAX_BLOCKS) *
		KVS_BLOCK_TOKENS;

	res->anat = (struct anatomy){ .why = calloc(w->n ? w->n : 1, 1),
				      .backend = calloc(w->n ? w->n : 1, 1) };
	kvs_model_defaults(&m);
	m.kv_blocks = o->kv_blocks;
	for (b = 0; b < o->backends; b++) {
		kvs_engine_init(&be[b].eng, &m, 0);
		snprintf(namebuf[b], sizeof(namebuf[b]), "10.0.0.%u:8000", b + 1);
		names[b] = namebuf[b];
	}
	kvs_policy_defaults(&pp);
	pp.nbackends = o->backends;
	pp.index_blocks = (uint32_t)fmax(1, o->index_scale * o->kv_blocks);
	pp.balance = o->balance;
	pp.keep_balance = o->keep_balance;
	pp.recompute_weight = o->recompute_weight;
	pp.hot = o->hot;
	kvs_policy_init(&pol, &pp, names);
	if (p == P_KVSPLICE && o->model == M_SPLIT) {
		kvs_kr_defaults(&kp, o->balance);
		kp.keep_balance = o->keep_balance;
		kp.window_blocks = o->window_blocks;
		kp.recompute_weight = (uint32_t)lround(o->recompute_weight);
		kp.hot = o->hot;
		if (kvs_kr_init(&kroute, &kp, &pol) == 0)
			kr = &kroute;
		else
			fprintf(stderr, PROG ": out of memory for the route map: "
					     "the controller decides every request\n");
	}
	kvs_chash_build(&ring, names, o->backends, KVS_CHASH_VNODES);
	if (p == P_SGLANG || p == P_LLMD || p == P_DYNAMO)
		bl = sim_baseline_new(p, o);

	while (done < w->n) {
		double t_arr = next < w->n ? w->arrival_ms[next] : INFINITY, t_step = INFINITY;
		int sb = -1;

		for (b = 0; b < o->backends; b++)
			if (be[b].stepping && be[b].step_end < t_step) {
				t_step = be[b].step_end;
				sb = (int)b;
			}
		if (next == w->n && sb < 0) {
			/* Nothing to arrive, no engine stepping, requests
			 * waiting: none of them can be admitted. bench_sim
			 * refuses such workloads first; stop, never read past
			 * the requests. */
			fprintf(stderr, "kvsplice-bench sim: %u requests never served\n",
				w->n - done);
			break;
		}
		if (p == P_KVSPLICE && next_tick < t_arr && next_tick < t_step) {
			if (kr) {
				kr->clock_ns = (uint64_t)(next_tick * 1e6);
				refresh_limit(kr, be, o->backends, present(o, join_ms, next_tick));
			}
			expect = kvs_expect_output(expect, tick_out, tick_ends);
			kvs_policy_observe(&pol, (uint64_t)(next_tick * 1e6), charged_total,
					   expect);
			if (o->feedback)
				feedback(&pol, be, o->backends);
			while (ia.samples < SIM_INDEX_SAMPLES &&
			       next_tick - w->arrival_ms[0] >=
				       span * (ia.samples + 1) / SIM_INDEX_SAMPLES)
				res->index.series[ia.samples++] =
					index_ratio(&pol, o->backends, o->kv_blocks);
			tick_out = tick_ends = 0;
			next_tick += KR_TICK_MS;
			continue;
		}
		if (kr && o->join_flush && !flushed && t_arr >= join_ms && t_arr <= t_step) {
			for (b = 0; b < o->backends; b++) /* routes flush at the add */
				kvs_kr_backend_left(kr, b);
			flushed = true;
		}
		if (t_arr <= t_step) { /* an arrival: route it */
			struct sreq *r = calloc(1, sizeof(*r));
			uint32_t cb;
			int pb;

			r->eng.id = next;
			r->eng.nblocks = sim_prompt_tokens(o, w, next) / KVS_BLOCK_TOKENS;
			r->h = malloc(sizeof(uint64_t) * (r->eng.nblocks + 1));
			sim_fill_request(o, w, next, r->h);
			r->eng.hashes = r->h;
			r->eng.prompt_tokens = sim_prompt_tokens(o, w, next);
			r->eng.max_tokens = w->max_tokens ? w->max_tokens[next] : o->max_tokens;
			r->eng.arrival_ms = t_arr;
			/* the router knows the declared bound, not the length */
			r->out = kvs_charged_output(o->declared_max_tokens, expect);
			if (kr) {
				pb = pick_split(kr, be, o->backends, present(o, join_ms, t_arr), r,
						r->out, &r->work, &r->why);
			} else {
				pb = pick(o, p, be, present(o, join_ms, t_arr), &pol, &ring, bl,
					  &rr, r, &cb, &r->why);
				r->work = kvs_work_blocks(r->eng.prompt_tokens, cb, r->out) *
					  (uint64_t)KVS_BLOCK_TOKENS;
			}
			r->backend = (uint32_t)(pb < 0 ? 0 : pb);
			held(be, present(o, join_ms, t_arr), r);
			r->prefill_work =
				kvs_prefill_charge((uint32_t)(r->work / KVS_BLOCK_TOKENS), r->out);
			/* what the charge says was expected cached (account_end) */
			{
				uint64_t unc = r->work > r->out ? r->work - r->out : 0;

				r->pred_cached = r->eng.prompt_tokens > unc ?
							 (uint32_t)(r->eng.prompt_tokens - unc) :
							 0;
			}
			be[r->backend].work += r->work;
			charged_total += r->work;
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
				if (o->join_at_s > 0)
					join_count(&ja, o, r, join_ms, ttft[done]);
				done++;
				prompt += r->eng.prompt_tokens;
				cached += r->eng.cached_tokens;
				out_tokens += r->eng.emitted;
				tick_out += r->eng.emitted;
				tick_ends++;
				k->prefilled += r->eng.prompt_tokens - r->eng.cached_tokens;
				ia.ttft[r->eng.id] = ttft[done - 1];
				an.held_any += (uint64_t)r->held_any * KVS_BLOCK_TOKENS;
				an.held_chosen += (uint64_t)r->held_chosen * KVS_BLOCK_TOKENS;
				an.with_holder += r->held_any > 0;
				an.dup += r->dup;
				if (r->why < SIM_WHY_N) {
					res->anat.lost_by_why[r->why] +=
						(double)(r->held_any -
							 (r->held_chosen < r->held_any ?
								  r->held_chosen :
								  r->held_any)) *
						KVS_BLOCK_TOKENS;
					res->anat.n_by_why[r->why]++;
				}
				res->anat.why[r->eng.id] = r->why;
				res->anat.backend[r->eng.id] = (uint8_t)r->backend;
				ia.prompt[r->eng.id] = r->eng.prompt_tokens;
				ia.cached[r->eng.id] = r->eng.cached_tokens;
				/* as the kernel's account_end() counts it */
				k->fb.predicted += r->pred_cached;
				if (r->pred_cached > r->eng.cached_tokens + KVS_BLOCK_TOKENS)
					k->fb.mispredicted += r->pred_cached -
							      r->eng.cached_tokens -
							      KVS_BLOCK_TOKENS;
				k->fb.unexpected += kvs_unexpected_cached(
					r->pred_cached, r->eng.cached_tokens, window);
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
		if (!o->json && !o->quiet && done / 2000 != reported) {
			reported = done / 2000;
			fprintf(stderr, "\r" PROG ": %s: %u/%u done", pol_names[p], done, w->n);
		}
	}
	if (!o->json && !o->quiet)
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
	{
		double work[KVS_MAX_BACKENDS];

		for (b = 0; b < o->backends; b++)
			work[b] = (double)be[b].prefilled;
		res->mm_work = kvs_max_over_mean(work, o->backends);
	}
	res->cv = kvs_cv(res->loads, o->backends);
	res->ttft = ttft; /* sorted by the percentiles */
	join_result(&ja, res);
	res->index.final = index_ratio(&pol, o->backends, o->kv_blocks);
	while (ia.samples < SIM_INDEX_SAMPLES) /* the run ended before the last tick */
		res->index.series[ia.samples++] = res->index.final;
	index_part(&ia, 0, w->n / 3, res->index.first);
	index_part(&ia, w->n - w->n / 3, w->n, res->index.last);
	res->anat.held_anywhere = prompt ? (double)an.held_any / (double)prompt : 0;
	res->anat.held_by_chosen = prompt ? (double)an.held_chosen / (double)prompt : 0;
	res->anat.duplicated = an.with_holder ? (double)an.dup / (double)an.with_holder : 0;
	for (b = 0; b < SIM_WHY_N; b++)
		res->anat.lost_by_why[b] = prompt ? res->anat.lost_by_why[b] / (double)prompt : 0;
	res->anat.ttft = ia.ttft; /* by arrival, kept for the cross comparison */
	res->anat.cached = ia.cached;
	res->anat.prompt = ia.prompt;

	for (b = 0; b < o->backends; b++)
		kvs_engine_free(&be[b].eng);
	if (kr)
		kvs_kr_free(kr);
	kvs_policy_free(&pol);
	kvs_chash_free(&ring);
	sim_baseline_free(bl);
	free(be);
	free(e2e);
}
