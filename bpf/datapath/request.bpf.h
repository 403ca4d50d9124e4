/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A client's frame: a REQUEST routed, or placed (include/kvsplice/place.h),
 * sent, its routes learned and reported to the controller; PINGs and
 * CANCELs; whatever the kernel cannot send goes to the controller.
 */
#ifndef KVS_DP_REQUEST_BPF_H
#define KVS_DP_REQUEST_BPF_H

#include "send.bpf.h"

/* What the verdict decided for a request, to the controller. */
struct decision {
	__u64 key;	 /* placement key, or the followed route's hash */
	__u64 cache_key; /* the cache key's route hash; 0: none */
	__u32 backend;
	__u32 why;
	__u32 depth;
	__u32 charge;
	__u32 gen;    /* the backend's route_gen when sent (the report's) */
	__u32 tenant; /* the client's tenant index (its share of the routes) */
	/* The frame's: where it starts, its length, its client, its seed
	 * (a global function takes five arguments at most). */
	__u32 off, len;
	__u64 client, seed;
};

/*
 * A global function (not inlined), like place_request(): the verifier checks
 * it once, not once per path through route_request() that reaches it,
 * which multiplied the verdict's verification past its limit.
 */
__noinline int report(struct kvs_chain *ch, const struct kvs_hdr *h, const struct decision *d)
{
	struct kvs_stats *st = stats_slot();
	struct scratch *sc = scratch_slot();
	struct kvs_report *rep;
	__u32 ng;
	__u64 size, flags;

	if (!ch || !h || !d || !st || !sc)
		return -1;
	rep = &sc->rep; /* its g[] filled as the prompt was hashed */
	ng = ch->n / KVS_INDEX_GROUP;
	rep->conn = d->client;
	rep->req_id = bpf_be64_to_cpu(h->req_id);
	rep->key = d->key;
	rep->cache_key = d->cache_key;
	rep->backend = d->backend;
	rep->why = d->why;
	rep->depth = d->depth;
	rep->blocks = ch->n;
	rep->hint = kvs_hint_blocks(bpf_ntohl(h->prefix_len));
	rep->prompt_tokens = kvs_prompt_tokens(bpf_ntohl(h->payload_len));
	rep->charge = d->charge;
	rep->gen = d->gen;
	if (ng > KVS_REPORT_MAX_GROUPS)
		ng = KVS_REPORT_MAX_GROUPS;
	rep->ngroups = ng;
	size = __builtin_offsetof(struct kvs_report, g) + (__u64)ng * sizeof(__u64);
	if (size > sizeof(*rep))
		size = sizeof(*rep);
	/*
	 * The controller is woken only when the ring is a sixteenth full; it
	 * reads the rest on its tick (100 ms). Waking it for every report
	 * doubled the verdict's time per request (15 -> 31-41 us,
	 * scripts/bench-verdict.sh): nothing it learns from a report is
	 * needed sooner.
	 */
	flags = bpf_ringbuf_query(&reports, BPF_RB_AVAIL_DATA) > KVS_REPORTS_RING / 16 ?
			BPF_RB_FORCE_WAKEUP :
			BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&reports, rep, size, flags)) {
		st->reports_lost++;
		return -1;
	}
	st->reports++;
	return 0;
}

/*
 * The frame's hot route (the scratch's, hot_route) has sent its prefix to
 * replica b: its next requests there are charged as cached. The scratch
 * looked up again: a pointer kept across the send costs the verdict a
 * stack slot, and its stack is at its 512 bytes. The bit is set without
 * an atomic (a BPF atomic or needs -mcpu=v3): one lost to a concurrent
 * write charges that replica's next request as a first one.
 */
static __always_inline void hot_replica_holds(__u32 b)
{
	struct scratch *sc = scratch_slot();
	struct kvs_route *r;

	if (sc && sc->hot_first && (r = lookup_route(sc->hot_hash)))
		r->replicas |= 1ULL << (b & 63);
}

/*
 * A request no route sends anywhere (none, too shallow, to a backend that
 * is saturated or gone): placed here by include/kvsplice/place.h on its
 * placement key (the cache key's hash, else the hinted or deepest
 * checkpoint prefix's), sent, and its routes learned, so the next request
 * sharing the prefix follows them. 0 when sent; SEND_CLIENT_LIMIT or -1 as
 * send_request() says, or -1 when no backend may take it (the controller
 * answers).
 */
__noinline int place_request(struct __sk_buff *skb, const struct kvs_hdr *h, struct kvs_chain *ch,
			     struct decision *d)
{
	struct kvs_stats *st = stats_slot();
	__u32 b, n, k, hint, plen;
	struct scratch *sc = scratch_slot();
	struct kvs_backend *be;
	int rb, sent;

	if (!h || !ch || !d || !st || !sc)
		return -1;
	n = ch->n;
	hint = kvs_hint_blocks(bpf_ntohl(h->prefix_len));
	plen = bpf_ntohl(h->payload_len);

	if (d->cache_key) {
		d->key = d->cache_key;
	} else {
		k = kvs_place_depth(hint, n);
		d->key = k ? ch->h[(k - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)] : d->seed;
	}
	rb = place_pick_backend(&sc->pw, d->key, d->why == KVS_WHY_SPILL, ~0ULL);
	if (rb < 0 || rb >= KVS_MAX_BACKENDS)
		return -1;
	b = rb;
	be = bpf_map_lookup_elem(&backends, &b);
	if (!be)
		return -1;
	/* What the holder has cached (k from here): nothing yet if it is a
	 * hot replica the route has not sent the prefix to. */
	k = sc->hot_first ? 0 : d->depth;
	/* A holder over its bound: does moving cost more than staying? */
	if (d->why == KVS_WHY_SPILL && d->backend < KVS_MAX_BACKENDS) {
		__u32 hb = d->backend;
		struct kvs_backend *hold = bpf_map_lookup_elem(&backends, &hb);

		if (hold && may_place(hold) &&
		    (hb == b ||
		     kvs_place_keep(&sc->pw.s, cfg_keep_balance, cfg_recompute_weight,
				    kvs_prompt_tokens(plen), hold->outstanding_work,
				    (__u64)k * KVS_BLOCK_TOKENS, be->outstanding_work))) {
			b = hb;
			be = hold;
			d->why = KVS_WHY_KEPT;
		}
	}
	/* Placed, nothing of it is known to be cached there. */
	d->charge =
		kvs_work_blocks(kvs_prompt_tokens(plen), d->why == KVS_WHY_KEPT ? k : 0,
				kvs_charged_output(bpf_ntohl(h->max_tokens), be->expect_output));
	sent = send_request(skb, h, d->off, d->len, b, be, d->client, d->charge, 1);
	if (sent)
		return sent;
	d->backend = b;
	d->gen = be->route_gen;
	if (d->why == KVS_WHY_KEPT) {
		st->kept_holder++;
		hot_replica_holds(b); /* a hot replica kept: it holds it now */
		return 0;
	}
	if (d->why != KVS_WHY_SPILL) /* a new prefix there */
		__sync_fetch_and_add(&be->placed, KVS_PLACE_UNIT);
	if (d->why == KVS_WHY_COLD)
		st->placed_cold++;
	else if (d->why == KVS_WHY_SHALLOW)
		st->placed_shallow++;
	else if (d->why == KVS_WHY_SPILL)
		st->placed_spill++;
	else
		st->placed_stale++;
	return 0;
}

/* The fleet's charged work and the backends up (kvs_hot_share's inputs),
 * summed as the controller sums them: every slot in use. */
struct hot_sum_ctx {
	__u64 charged;
	__u32 up, pad;
};

static long hot_sum(__u32 b, struct hot_sum_ctx *c)
{
	struct kvs_backend *be = bpf_map_lookup_elem(&backends, &b);

	if (!be)
		return 1;
	if (be->state != KVS_BE_ABSENT)
		c->charged += be->charged_tokens;
	c->up += be->state == KVS_BE_UP;
	return 0;
}

/* A request matched the route at hash: counted in its hot window. */
static __always_inline struct kvs_route *hot_count(__u64 hash, __u64 now)
{
	struct kvs_route *r = lookup_route(hash);

	if (r)
		kvs_hot_count(&r->hot_at, &r->hot_cur, &r->hot_prev, now);
	return r;
}

/*
 * Hot prefixes (include/kvsplice/place.h): the request counts in the hot
 * window of the route it matched (d->why, d->depth) and of every shallower
 * checkpoint's and hinted prefix's route on its path, so a prefix's rate
 * is that of every request sharing it, whichever deeper route it follows.
 * If the route it follows, to holder, needs k >= 2 replicas, the request
 * is placed among them by the placement rule on its own placement key.
 * Returns the replica, or -1 to follow the route as it is (global, as
 * place_request()); the caller counts the replica's placement (hot_placed)
 * once the request is sent there.
 */
__noinline int hot_route(struct kvs_chain *ch, const struct kvs_hdr *h, struct decision *d,
			 __u32 holder)
{
	__u32 j, cp, k, kd;
	struct scratch *sc = scratch_slot();
	struct kvs_route *r = NULL, *e;
	struct kvs_backend *be;
	__u64 now = bpf_ktime_get_ns(), hash = 0, rate, charge, members, key, share;
	int pick;

	if (!ch || !h || !d || !sc)
		return -1;
	if (d->why == KVS_WHY_KEY) {
		hash = d->cache_key;
		r = hot_count(hash, now);
	} else if (d->why == KVS_WHY_HINT && d->depth) {
		hash = ch->h[(d->depth - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)];
		r = hot_count(hash, now);
	} else if (d->why == KVS_WHY_PREFIX || d->why == KVS_WHY_SHALLOW) {
		KVS_UNROLL
		for (j = 0; j < KVS_MAX_CHECKPOINTS; j++) {
			cp = kvs_checkpoint(j);
			if (cp > d->depth)
				break;
			e = hot_count(ch->h[(cp - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)], now);
			if (cp == d->depth) {
				r = e;
				hash = ch->h[(cp - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)];
			}
		}
		/* a hint under the route followed: the prefix it names is on
		 * this request's path too (a hint at a checkpoint is counted) */
		kd = kvs_hint_blocks(bpf_ntohl(h->prefix_len));
		if (kd && kd < d->depth && kvs_checkpoint_after(kd - 1) != kd)
			hot_count(ch->h[(kd - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)], now);
	}
	if (!r || d->why == KVS_WHY_SHALLOW || holder >= KVS_MAX_BACKENDS)
		return -1;
	rate = kvs_hot_rate(r->hot_at, r->hot_cur, r->hot_prev, now);
	be = bpf_map_lookup_elem(&backends, &holder);
	if (!rate || !be)
		return -1;
	charge = (__u64)kvs_work_blocks(kvs_prompt_tokens(bpf_ntohl(h->payload_len)), d->depth,
					kvs_charged_output(bpf_ntohl(h->max_tokens),
							   be->expect_output)) *
		 KVS_BLOCK_TOKENS;
	/* under 4 requests a window is never hot: no pass over the fleet */
	if (rate <= 4 * KVS_HOT_FP)
		return -1;
	{
		struct hot_sum_ctx c = { 0 };

		bpf_loop(KVS_MAX_BACKENDS, hot_sum, &c, 0);
		share = kvs_hot_share(&be->hot, c.charged, now, c.up);
	}
	/* the eligible backends cap k in the member pass */
	k = kvs_hot_replicas(rate, charge, share, KVS_MAX_BACKENDS);
	if (k < 2)
		return -1;
	members = hot_members(&sc->hw, hash, holder, k);
	if (d->cache_key) {
		key = d->cache_key;
	} else {
		kd = kvs_place_depth(kvs_hint_blocks(bpf_ntohl(h->prefix_len)), ch->n);
		key = kd ? ch->h[(kd - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)] : d->seed;
	}
	pick = place_pick_backend(&sc->pw, key, 0, members);
	if (pick < 0 || pick >= KVS_MAX_BACKENDS)
		return -1;
	sc->hot_hash = hash;
	sc->hot_first = (__u32)pick != holder && !((r->replicas >> (pick & 63)) & 1);
	return pick;
}

/*
 * A hot route's replica took the request (hot_route's pick, sent): a
 * placement there, and a replica that holds the prefix from now on. Not
 * before the send: a replica over its work limit, or whose socket
 * refused, is spilled from, and a placement counted for it would steer the
 * next new prefixes away as if it had taken one.
 */
static __always_inline void hot_placed(struct kvs_stats *st, struct kvs_backend *be, __u32 b,
				       __u32 holder)
{
	__sync_fetch_and_add(&be->placed, KVS_PLACE_UNIT);
	if (b == holder)
		return;
	st->hot_replica++;
	hot_replica_holds(b);
}

/*
 * A void route replaced by the request's placement (learn_route with
 * BPF_ANY): counted as learnt for the request's tenant, so its former
 * tenant's share no longer counts it. Without this it stayed counted to
 * both until the controller's recount.
 */
static __always_inline void learn_over(__u32 b, const struct kvs_backend *be, __u64 hash,
				       __u32 depth, __u32 tenant, struct kvs_stats *st)
{
	struct kvs_route *r = lookup_route(hash);
	__u32 was = r ? (r->tenant < KVS_MAX_TENANTS ? r->tenant : 0) : KVS_MAX_TENANTS;

	if (learn_route(b, be, hash, depth, BPF_ANY, tenant, st) == 0 && was < KVS_MAX_TENANTS)
		share_uncount(was);
}

/*
 * The routes a request sent to d->backend teaches (global, as report()):
 * the backend now holds the whole prompt, so every checkpoint deeper than
 * the match routes there, and for a placement its cache key and hinted
 * prefix too. Existing routes stand (the controller's, and those learned
 * before), except a void one (its backend left), which is replaced: it
 * would send every request of its prefix through placement for good.
 */
__noinline int learn(struct kvs_chain *ch, const struct kvs_hdr *h, const struct decision *d)
{
	struct kvs_stats *st = stats_slot();
	struct kvs_route_share *rs;
	struct kvs_backend *be;
	__u32 b, n, hint, t;
	__u64 learned;

	if (!ch || !h || !d || !st)
		return -1;
	if (!d->depth && d->why < KVS_WHY_COLD) /* a cache key followed: nothing */
		return 0;
	b = d->backend;
	be = bpf_map_lookup_elem(&backends, &b);
	if (!be)
		return -1;
	/* The client's tenant's share of the routes map (struct
	 * kvs_route_share): full, the request teaches nothing (it was placed
	 * all the same). Checked once a request and counted from the stats'
	 * own count: per route, the checks multiplied the verifier's states.
	 * A request may pass a share by the routes it teaches (18 at most),
	 * one per CPU at once: the controller's reserve is far larger. */
	t = d->tenant < KVS_MAX_TENANTS ? d->tenant : 0;
	rs = bpf_map_lookup_elem(&route_shares, &t);
	if (rs && rs->share && rs->routes >= rs->share) {
		__sync_fetch_and_add(&rs->refused, 1);
		return 0;
	}
	learned = st->routes_learned;
	n = ch->n;
	if (d->why >= KVS_WHY_COLD) {
		hint = kvs_hint_blocks(bpf_ntohl(h->prefix_len));
		if (d->cache_key && d->why == KVS_WHY_STALE && !d->depth)
			learn_over(b, be, d->cache_key, 0, t, st);
		else if (d->cache_key)
			learn_route(b, be, d->cache_key, 0, BPF_NOEXIST, t, st);
		if (d->why == KVS_WHY_STALE && d->depth)
			learn_over(b, be, ch->h[(d->depth - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)],
				   d->depth, t, st);
		if (hint > d->depth && hint <= n && hint <= KVS_MAX_WINDOW_BLOCKS)
			learn_route(b, be, ch->h[(hint - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)], hint,
				    BPF_NOEXIST, t, st);
	}
	learn_routes(b, be, d->depth, ch, t, st);
	rs = bpf_map_lookup_elem(&route_shares, &t);
	if (rs && rs->share)
		__sync_fetch_and_add(&rs->routes, st->routes_learned - learned);
	return 0;
}

/* A client's request for the controller, stamped with its id and note
 * (no route, or none), or over the client's budget with the budget's mark
 * instead (the controller answers busy at once). */
static __always_inline int punt_client_request(struct __sk_buff *skb, struct kvs_stats *st,
					       struct kvs_conn *conn, __u32 off, __u64 cookie,
					       __u32 note)
{
	int budget = take_budget(conn);

	if (budget != KVS_BUDGET_OK) {
		st->pass_budget++;
		note = budget == KVS_BUDGET_CLOSE ? KVS_GW_BUDGET_CLOSE : KVS_GW_OVER_BUDGET;
	}
	if (stamp_client(skb, off, cookie, note)) {
		st->drop_punt++;
		return SK_DROP;
	}
	return punt_request(skb, st, conn, off, budget);
}

static __always_inline int client_frame(struct __sk_buff *skb, struct kvs_stats *st,
					const struct kvs_hdr *h, __u32 off, __u32 len, __u64 cookie,
					struct kvs_conn *conn)
{
	struct decision d = { .why = KVS_WHY_COLD, .tenant = conn->by_role.tenant };
	__u32 b, plen = bpf_ntohl(h->payload_len);
	__u64 seed, key = bpf_be64_to_cpu(h->cache_key);
	__u32 holder = KVS_MAX_BACKENDS;
	struct kvs_backend *be;
	struct kvs_chain *ch;
	struct scratch *sc;
	int rb, hb = -1, sent = 1; /* sent 1: not tried; 0 sent; -1, SEND_CLIENT_LIMIT */

	if (h->type == KVS_T_PING)
		return punt_budgeted(skb, st, off, cookie, conn);
	if (h->type == KVS_T_CANCEL)
		return client_cancel(skb, st, h, off, cookie, conn);
	if (h->type != KVS_T_REQUEST)
		return punt_error(skb, st, h, off, len, cookie, KVS_E_BAD_TYPE);
	if (conn_at_limit(conn)) { /* the controller answers busy */
		st->slow_path_frames++;
		return punt_client_request(skb, st, conn, off, cookie, ~0u);
	}
	ch = chain_slot(); /* this verdict's (nest) */
	sc = scratch_slot();
	if (!ch || !sc) /* every slot taken: counted by the verdict */
		goto slow;
	sc->hot_first = 0; /* set by hot_route for this frame */

	seed = kvs_seed(bpf_ntohl(h->model_id), bpf_be64_to_cpu(h->cache_salt));
	d.cache_key = key ? kvs_key_hash(seed, key) : 0;
	d.seed = seed;
	rb = route_request(skb, h, off, st, ch, sc, seed, &d.depth, &d.why);
	if (rb >= 0 || d.why == KVS_WHY_SHALLOW) {
		holder = rb >= 0 ? (__u32)rb : KVS_MAX_BACKENDS;
		hb = hot_route(ch, h, &d, holder);
		if (hb >= 0)
			rb = hb;
	}
	if (rb >= 0 && rb < KVS_MAX_BACKENDS) {
		b = rb;
		be = bpf_map_lookup_elem(&backends, &b);
		if (be && backend_accepts(be)) {
			/* a replica's first request recomputes the prefix */
			d.charge = kvs_work_blocks(
				kvs_prompt_tokens(plen), hb >= 0 && sc->hot_first ? 0 : d.depth,
				kvs_charged_output(bpf_ntohl(h->max_tokens), be->expect_output));
			sent = send_request(skb, h, off, len, b, be, cookie, d.charge, 1);
			if (sent == 0) {
				if (hb >= 0)
					hot_placed(st, be, b, holder);
				st->fast_path_frames++;
				d.backend = b;
				d.gen = be->route_gen;
				d.client = cookie;
				d.key = d.why == KVS_WHY_KEY ?
						d.cache_key :
						ch->h[(d.depth - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)];
				learn(ch, h, &d);
				report(ch, h, &d);
				return SK_PASS;
			}
			if (sent != SEND_CLIENT_LIMIT) /* (punt_request counts that) */
				st->pass_no_upstream++;
		} else {
			st->pass_saturated++;
		}
		d.why = KVS_WHY_SPILL;
		/* the holder, kept if moving costs more; not one whose upstream
		 * socket just refused the request (a second send would fail too) */
		d.backend = sent == -1 ? KVS_MAX_BACKENDS : b;
	}
	if (cfg_kernel_place && sent != SEND_CLIENT_LIMIT) {
		d.off = off;
		d.len = len;
		d.client = cookie;
		d.seed = seed;
		sent = place_request(skb, h, ch, &d);
		if (sent == 0) {
			st->fast_path_frames++;
			learn(ch, h, &d);
			report(ch, h, &d);
			return SK_PASS;
		}
	}
slow:
	/* The slow path: the controller decides, installs routes, and sends
	 * the frame on through its inject socket. */
	st->slow_path_frames++;
	return punt_client_request(skb, st, conn, off, cookie,
				   d.why == KVS_WHY_COLD ? KVS_GW_NO_ROUTE : ~0u);
}

#endif /* KVS_DP_REQUEST_BPF_H */
