// SPDX-License-Identifier: MIT
/*
 * The slow path's decision: where a request goes, the routes that let the
 * kernel take the next similar one, their withdrawal, and the bound past
 * which the kernel defers to this decision.
 */
#include "decide.h"

#include <string.h>

#include "backend.h"
#include "conn.h"
#include "kvsplice/hash.h"
#include "kvsplice/place.h"
#include "log.h"
#include "netutil.h"

/* Which hash places a cold prompt: the client's cache key, else its hinted
 * prefix, else the deepest checkpoint (the longest prefix the kernel can
 * match next time), else whatever blocks there are. */
static uint64_t placement_key(const struct kvs_msg *m, uint64_t seed, const uint64_t *h, uint32_t n,
			      uint32_t window)
{
	uint32_t k;

	if (m->cache_key)
		return kvs_key_hash(seed, m->cache_key);
	/* the kernel's key: within what it hashes */
	k = kvs_place_depth(kvs_hint_blocks(m->prefix_len), n < window ? n : window);
	return k ? h[k - 1] : seed;
}

/* Which backends may take new work, and their outstanding work in tokens.
 * Returns the code to answer with when none may. The kernel counts a
 * request the controller sends only once it has read it from the inject
 * socket: the controller adds what it sent since the last tick (counted
 * twice for a moment, so the limit errs on the safe side). */
static int fleet_state(struct gw *g, uint64_t *load, uint8_t *ok)
{
	uint32_t b, up = 0;

	for (b = 0; b < g->nslots; b++) {
		load[b] = kvs_dp_outstanding_work(&g->dp, b);
		ok[b] = gw_backend_state(g, b) == KVS_BE_UP &&
			(!g->cfg->max_outstanding ||
			 kvs_dp_outstanding(&g->dp, b) + g->be[b].unseen < g->cfg->max_outstanding);
		up += gw_backend_state(g, b) == KVS_BE_UP;
	}
	return up ? KVS_E_BUSY : KVS_E_NO_BACKEND;
}

/*
 * The kernel follows a route only while the backend's outstanding work is
 * within balance x the fleet's mean plus one typical request (the average
 * charge of the requests sent since the last refresh, smoothed; at least
 * --kernel-slack-tokens); past that, requests come to the controller, which
 * may spill them. The slack is scale-free (a fixed number of tokens never
 * binds on small prompts and always on large ones), and it is the charge a
 * request brings, not the work outstanding per request, which with prefill
 * released at the first token is mostly decode work and too small: cached
 * template requests were deferred by the dozen (docs/EVALUATION.md,
 * "Routing scenarios"). Refreshed after every decision and on every tick.
 */
void gw_publish_limits(struct gw *g)
{
	uint64_t work = 0, charged = 0, sent = 0, slack, limit;
	uint32_t b, up = 0;

	for (b = 0; b < g->nslots; b++) {
		uint64_t c, s;

		if (!g->be[b].present)
			continue;
		kvs_dp_charged(&g->dp, b, &c, &s);
		charged += c;
		sent += s;
		if (gw_backend_state(g, b) != KVS_BE_UP)
			continue;
		work += kvs_dp_outstanding_work(&g->dp, b);
		up++;
	}
	if (sent > g->seen_sent && charged >= g->seen_charged) {
		uint64_t avg = (charged - g->seen_charged) / (sent - g->seen_sent);

		g->typical_charge = g->typical_charge ? (3 * g->typical_charge + avg) / 4 : avg;
	}
	g->seen_charged = charged;
	g->seen_sent = sent;
	kvs_hot_roll(&g->hot_fleet, charged, kvs_now_ns());
	if (!up)
		return;
	slack = g->typical_charge;
	if (slack < g->cfg->kernel_slack)
		slack = g->cfg->kernel_slack;
	limit = (uint64_t)(g->cfg->balance * (double)work / up) + slack;
	/* With one backend up, a request over the bound could only go back to
	 * it through the controller, copied twice: no bound (0), and the
	 * kernel keeps it (docs/EVALUATION.md, "Data path", the detour this
	 * removed). --max-outstanding still holds. */
	if (up == 1)
		limit = 0;
	else if (!limit)
		limit = 1; /* (0 would mean none) */
	for (b = 0; b < g->nslots; b++) {
		kvs_dp_set_work_limit(&g->dp, b, limit);
		kvs_dp_set_hot(&g->dp, b, &g->hot_fleet);
	}
}

static void count_decision(struct gw *g, enum kvs_reason r)
{
	switch (r) {
	case KVS_R_PREFIX:
		g->ctl.decided_prefix++;
		break;
	case KVS_R_SPILL:
		g->ctl.decided_spill++;
		break;
	case KVS_R_SHARED:
		g->ctl.decided_shared++;
		break;
	case KVS_R_COLD:
		g->ctl.decided_cold++;
		break;
	case KVS_R_HOT:
		g->ctl.decided_hot++;
		break;
	default:
		break;
	}
}

/*
 * Routes that let the kernel take the next request sharing this prefix: its
 * cache key's, its hint's and every checkpoint's, in one system call. A
 * block's route is withdrawn when b's index evicts the block (marked); a
 * cache key is not a block: it stays until the LRU or a backend leaving
 * (route_gen) retires it.
 */
static void install_routes(struct gw *g, const struct gw_conn *c, const struct kvs_msg *m,
			   uint64_t seed, const uint64_t *h, uint32_t n, uint32_t b)
{
	uint32_t hint = kvs_hint_blocks(m->prefix_len), depth[KVS_DP_MAX_ROUTE_BATCH], k = 0, j,
		 installed;
	uint64_t key[KVS_DP_MAX_ROUTE_BATCH];

	_Static_assert(KVS_MAX_CHECKPOINTS + 2 <= KVS_DP_MAX_ROUTE_BATCH, "routes per request");
	if (m->cache_key) {
		key[k] = kvs_key_hash(seed, m->cache_key);
		depth[k++] = 0;
	}
	if (hint && hint <= n) {
		key[k] = h[hint - 1];
		depth[k++] = hint;
	}
	for (j = 0; j < KVS_MAX_CHECKPOINTS && kvs_checkpoint(j) <= n; j++) {
		key[k] = h[kvs_checkpoint(j) - 1];
		depth[k++] = kvs_checkpoint(j);
	}
	installed = kvs_dp_add_routes(&g->dp, key, depth, k, b, c->tenant);
	g->ctl.routes_installed += installed;
	for (j = 0; j < k && installed; j++)
		if (depth[j])
			kvs_policy_mark(&g->policy, b, key[j]);
}

void gw_withdraw_flush(struct gw *g)
{
	g->ctl.routes_withdrawn += kvs_dp_del_routes(&g->dp, &g->withdraw);
	g->withdraw.n = 0;
}

/* b's index evicted a block that a route of ours names: the backend will
 * have evicted it too, so the kernel should stop sending its prefix there.
 * Queued, and withdrawn with the others of the same decision (or tick): one
 * decision evicts about as many routes as it installs. */
void gw_withdraw_route(void *ctx, uint32_t b, uint64_t hash)
{
	struct gw *g = ctx;

	if (g->withdraw.n == KVS_WITHDRAW_BATCH)
		gw_withdraw_flush(g);
	g->withdraw.e[g->withdraw.n++] = (struct kvs_withdraw){ .hash = hash, .backend = b };
}

/*
 * What the kernel's routes say each backend holds of this prompt: the
 * deepest checkpoint routed to it. The kernel learns routes from requests
 * it serves alone, so this is how the controller hears of them.
 */
static void routed_depths(struct gw *g, const uint64_t *h, uint32_t n, uint32_t *known)
{
	struct kvs_route r;
	uint32_t j;

	memset(known, 0, sizeof(*known) * KVS_MAX_BACKENDS);
	for (j = 0; j < KVS_MAX_CHECKPOINTS; j++) {
		uint32_t cp = kvs_checkpoint(j);

		if (cp > n || cp > g->cfg->window_blocks)
			break;
		if (kvs_dp_get_route(&g->dp, h[cp - 1], &r) == 0 &&
		    kvs_dp_route_current(&g->dp, &r) && cp > known[r.backend])
			known[r.backend] = cp;
	}
}

static uint32_t client_limit(const struct gw *g, const struct gw_conn *c)
{
	return c->max_inflight ? c->max_inflight : g->cfg->client_max_inflight;
}

bool gw_client_at_limit(const struct gw *g, const struct gw_conn *c, uint32_t n)
{
	uint32_t lim = client_limit(g, c);

	return lim && n >= lim;
}

void gw_refuse_busy_client(struct gw *g, struct gw_conn *c, uint64_t req_id)
{
	char msg[96];

	g->ctl.busy_client++;
	snprintf(msg, sizeof(msg), "kvsplice: %u requests of this connection in flight",
		 client_limit(g, c));
	gw_send_error(g, c->cookie, req_id, KVS_E_BUSY, msg);
}

int gw_decide(struct gw *g, struct gw_conn *c, struct kvs_msg *m, const uint8_t *prompt,
	      bool kernel, uint32_t *backend)
{
	uint64_t seed = kvs_seed(m->model_id, m->cache_salt);
	uint32_t n, tokens = kvs_prompt_tokens(m->payload_len);
	uint32_t known[KVS_MAX_BACKENDS];
	uint64_t load[KVS_MAX_BACKENDS];
	struct kvs_fleet_view fleet;
	struct kvs_prompt req;
	uint8_t ok[KVS_MAX_BACKENDS];
	struct kvs_decision d;
	int why;

	n = (uint32_t)kvs_prefix_hashes(seed, prompt, m->payload_len, g->hashes,
					KVS_POLICY_MAX_BLOCKS);
	why = fleet_state(g, load, ok);
	/* The kernel's routes say what it learnt from requests it served
	 * alone; on the userspace path every request passes here and the
	 * index knows it all. When the kernel found no route for this one at
	 * all, looking again would cost up to 16 system calls for nothing. */
	if (kernel && m->gw_backend == KVS_GW_NO_ROUTE)
		memset(known, 0, sizeof(known));
	else if (kernel)
		routed_depths(g, g->hashes, n, known);
	req = (struct kvs_prompt){
		.h = g->hashes,
		.n = n,
		.tokens = tokens,
		.place_key = placement_key(m, seed, g->hashes, n, g->cfg->window_blocks),
		.hint_blocks = kvs_hint_blocks(m->prefix_len),
	};
	fleet = (struct kvs_fleet_view){ .load = load,
					 .eligible = ok,
					 .known = kernel ? known : NULL };
	kvs_policy_decide(&g->policy, &req, &fleet, &d);
	gw_withdraw_flush(g);
	if (d.backend < 0) {
		g->ctl.no_backend++;
		/* stopping, every backend is drained: busy, to try elsewhere */
		gw_send_error(g, c->cookie, m->req_id, g->stopping ? KVS_E_BUSY : why,
			      g->stopping	? "kvsplice: the gateway is stopping" :
			      why == KVS_E_BUSY ? "kvsplice: every backend is at its limit" :
						  "kvsplice: no backend is up");
		return -1;
	}
	count_decision(g, d.reason);
	/* The kernel hashes only the window: routes go at checkpoints in it. */
	if (kernel)
		install_routes(g, c, m, seed, g->hashes,
			       n < g->cfg->window_blocks ? n : g->cfg->window_blocks,
			       (uint32_t)d.backend);
	m->gw_backend =
		kvs_gw_pack((uint32_t)d.backend,
			    kvs_work_blocks(tokens, d.cached_blocks,
					    kvs_charged_output(m->max_tokens, g->expect_output)));
	m->gw_conn = c->cookie;
	*backend = (uint32_t)d.backend;
	pr_debug("event=decision conn=%llu req=%llu backend=%d reason=%s cached_blocks=%u "
		 "best_blocks=%u blocks=%u path=%s",
		 (unsigned long long)c->cookie, (unsigned long long)m->req_id, d.backend,
		 kvs_reason_name(d.reason), d.cached_blocks, d.best_blocks, n,
		 kernel ? "kernel" : "user");
	return 0;
}

/*
 * What requests have been producing: the output tokens of the ENDs since
 * the last tick, over the fleet, averaged into g->expect_output and
 * published in every backend's record, where the kernel reads it to charge
 * a request (kvs_charged_output). ENDs and ERRORs are counted together (an
 * ERROR has no output count), so it errs low while errors are frequent.
 */
static void learn_output(struct gw *g)
{
	uint64_t out = 0, ends = 0, o, e;
	uint32_t b;

	for (b = 0; b < g->nslots; b++) {
		if (!g->be[b].present)
			continue;
		kvs_dp_output_counters(&g->dp, b, &o, &e);
		out += o;
		ends += e;
	}
	if (ends >= g->seen_ends && out >= g->seen_output)
		g->expect_output = kvs_expect_output(g->expect_output, out - g->seen_output,
						     ends - g->seen_ends);
	g->seen_output = out;
	g->seen_ends = ends;
	for (b = 0; b < g->nslots; b++)
		if (g->be[b].present)
			kvs_dp_set_expect_output(&g->dp, b, g->expect_output);
}

/* Correct each backend's index from what its ENDs reported since the last
 * tick (kvs_policy_feedback), and show the result in the backends map. */
void gw_feedback(struct gw *g)
{
	learn_output(g);
	uint64_t pred, miss, surprise, work;
	uint32_t b, cap;

	/* the fleet's charged work as the last tick summed it */
	kvs_policy_observe(&g->policy, kvs_now_ns(), g->seen_charged, g->expect_output);

	for (b = 0; b < g->nslots; b++) {
		struct gw_backend *be = &g->be[b];
		struct kvs_feedback f;

		if (!be->present)
			continue;
		kvs_dp_end_counters(&g->dp, b, &pred, &miss, &surprise);
		work = kvs_dp_outstanding_work(&g->dp, b);
		if (work > be->fb_peak_work)
			be->fb_peak_work = work;
		f = (struct kvs_feedback){ .predicted = pred - be->fb_predicted,
					   .mispredicted = miss - be->fb_mispredicted,
					   .unexpected = surprise - be->fb_unexpected,
					   .peak_work = be->fb_peak_work };
		cap = kvs_policy_index_blocks(&g->policy, b);
		if (kvs_policy_feedback(&g->policy, b, &f)) {
			if (kvs_policy_index_blocks(&g->policy, b) != cap)
				pr_debug("event=index_resized backend=%s blocks=%u", be->name,
					 kvs_policy_index_blocks(&g->policy, b));
			be->fb_predicted = pred;
			be->fb_mispredicted = miss;
			be->fb_unexpected = surprise;
			be->fb_peak_work = 0;
		}
		kvs_dp_set_index_blocks(&g->dp, b, kvs_policy_index_blocks(&g->policy, b));
	}
	gw_withdraw_flush(g);
}
