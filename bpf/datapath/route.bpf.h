/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A request's prompt hashed in the window, the route it should follow (cache
 * key, hint, checkpoints), and the routes a request teaches.
 */
#ifndef KVS_DP_ROUTE_BPF_H
#define KVS_DP_ROUTE_BPF_H

#include "frame.bpf.h"

/* State of one walk over a prompt's blocks (bpf_loop callback context). */
struct hash_walk {
	struct __sk_buff *skb;
	struct kvs_chain *out;
	__u64 *groups; /* every KVS_INDEX_GROUP-th hash, for the report */
	__u64 *blocks; /* KVS_HASH_BATCH blocks' bytes (struct scratch) */
	__u64 h;
	__u32 prompt_off;
	__u32 nblocks; /* to hash */
	__u32 n;       /* block hashes computed so far */
	__u32 base;    /* the batch's first block */
};

/* Block base + j of the batch read. */
static long hash_block(__u32 j, struct hash_walk *w)
{
	__u32 k = (w->base + j) & (KVS_MAX_WINDOW_BLOCKS - 1);

	/* j < KVS_HASH_BATCH already: the mask is for the verifier */
	w->h = kvs_block_hash_words(w->h,
				    w->blocks + (j & (KVS_HASH_BATCH - 1)) * (KVS_BLOCK_BYTES / 8));
	w->out->h[k] = w->h;
	/* the report's copy, written here rather than by a second loop */
	if ((k & (KVS_INDEX_GROUP - 1)) == KVS_INDEX_GROUP - 1)
		w->groups[(k / KVS_INDEX_GROUP) & (KVS_REPORT_MAX_GROUPS - 1)] = w->h;
	return 0;
}

/*
 * Batch i: its blocks read in one bpf_skb_load_bytes, then hashed one by
 * one. A read a block (until 2026-12-03) spent more than a third of the
 * walk's time in the helper (perf: bpf_skb_load_bytes and skb_copy_bits
 * against the callback's own code); docs/EVALUATION.md, "The prompt read
 * a batch at a time", has the figures.
 */
static long hash_batch(__u32 i, struct hash_walk *w)
{
	__u32 base = i * KVS_HASH_BATCH, cnt, len;

	if (base >= w->nblocks || base >= KVS_MAX_WINDOW_BLOCKS)
		return 1;
	cnt = w->nblocks - base;
	if (cnt > KVS_HASH_BATCH)
		cnt = KVS_HASH_BATCH;
	/* cnt is 1..KVS_HASH_BATCH already; said with a mask, which the
	 * verifier follows into the read's length (a compare clang kept on
	 * a copy of the register) */
	len = (((cnt - 1) & (KVS_HASH_BATCH - 1)) + 1) * KVS_BLOCK_BYTES;
	if (bpf_skb_load_bytes(w->skb, w->prompt_off + base * KVS_BLOCK_BYTES, w->blocks, len))
		return 1;
	w->base = base;
	bpf_loop(cnt, hash_block, w, 0);
	w->n = base + cnt;
	return 0;
}

/*
 * Hash the prompt's full blocks, within the window, into the scratch chain
 * (and every fourth into groups); returns how many were hashed. bpf_loop
 * rather than an open-coded loop: the verifier checks the callback once,
 * instead of following each of the 1024 possible exits into the lookups
 * after it (which exceeds its limit).
 */
static __always_inline __u32 hash_prompt(struct __sk_buff *skb, __u32 prompt_off, __u32 nblocks,
					 __u64 seed, struct kvs_chain *out, struct scratch *sc)
{
	struct hash_walk w = {
		.skb = skb,
		.out = out,
		.groups = sc->rep.g,
		.blocks = sc->blocks,
		.h = seed,
		.prompt_off = prompt_off,
		.n = 0,
	};

	if (nblocks > cfg_window_blocks)
		nblocks = cfg_window_blocks;
	if (nblocks > KVS_MAX_WINDOW_BLOCKS)
		nblocks = KVS_MAX_WINDOW_BLOCKS;
	w.nblocks = nblocks;
	bpf_loop((nblocks + KVS_HASH_BATCH - 1) / KVS_HASH_BATCH, hash_batch, &w, 0);
	return w.n;
}

static __always_inline struct kvs_route *lookup_route(__u64 hash)
{
	return bpf_map_lookup_elem(&routes, &hash);
}

/*
 * The backend of the route the kernel is about to follow, or -1 if the route
 * is void: routes of a backend that left (whose route_gen has moved on
 * since) are void, so withdrawing all of a backend's routes is one
 * increment, not a scan of the map. Checked once, on the match chosen:
 * checking on every lookup multiplies the verifier's work (docs/
 * EVALUATION.md, "Slow path", has the figure).
 */
static __always_inline int follow(struct kvs_route *r, struct kvs_stats *st, __u32 *why)
{
	__u32 b = r->backend;
	struct kvs_backend *be = bpf_map_lookup_elem(&backends, &b);

	if (!be || be->route_gen != r->gen) {
		st->pass_stale++;
		*why = KVS_WHY_STALE;
		return -1;
	}
	__sync_fetch_and_add(&r->hits, 1);
	return (int)b;
}

/*
 * Whether a match `depth` blocks deep decides the route of a prompt of plen
 * bytes. Measured against what the kernel sees, the window: a prompt longer
 * than it that matches at the window's end matches all the kernel can
 * tell, and placing it anew threw away the longest prefixes of all (the
 * public trace's prompts reach 191k tokens, the window is 16k: 7 points of
 * hit rate live, docs/EVALUATION.md, "The kernel places every request").
 */
static __always_inline int deep_enough(__u32 depth, __u32 plen)
{
	__u64 seen = (__u64)cfg_window_blocks * KVS_BLOCK_BYTES;

	if (seen > plen)
		seen = plen;
	return (__u64)depth * KVS_BLOCK_BYTES * 100 >= (__u64)cfg_min_match_pct * seen;
}

/*
 * The route of a prompt's deepest match, by depth (route_request): the
 * checkpoints deeper than the client's prefix-length hint, the hint, the
 * checkpoints under it. A match at the hint's depth or deeper is followed
 * however little of the prompt it covers (the client named that much as
 * worth routing by); a shallower one too shallow for the prompt is not.
 * The hint is not looked up first: a hint names a prefix many prompts
 * share (a template, a system prompt), and the deeper route that a
 * conversation's earlier turn taught names where more of this prompt is,
 * which the hint's route would take it away from (a deeper route to a
 * backend that left falls back to the hint's). A global function, like
 * report(): inlined, its lookups took the verdict's stack past 512 bytes.
 * Returns as route_request.
 */
__noinline int route_by_depth(struct kvs_chain *ch, const struct kvs_hdr *h, __u32 *depth,
			      __u32 *why)
{
	struct kvs_stats *st = stats_slot();
	struct kvs_route *r = NULL, *hinted;
	__u32 k, n, hint, plen;
	int b;

	if (!ch || !h || !depth || !why || !st)
		return -1;
	n = ch->n;
	plen = bpf_ntohl(h->payload_len);
	hint = kvs_hint_blocks(bpf_ntohl(h->prefix_len));
	if (hint > 0 && hint <= n && hint <= KVS_MAX_WINDOW_BLOCKS)
		r = lookup_route(ch->h[(hint - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)]);
	else
		hint = 0;
	hinted = r;
	for (k = KVS_MAX_CHECKPOINTS; k > 0; k--) {
		__u32 cp = kvs_checkpoint(k - 1);

		if (cp > n)
			continue;
		if (cp <= hint && hinted)
			break;
		r = lookup_route(ch->h[(cp - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)]);
		if (!r)
			continue;
		*depth = cp;
		if ((cp <= hint || !hint) && !deep_enough(cp, plen)) {
			st->pass_shallow++;
			*why = KVS_WHY_SHALLOW;
			return -1;
		}
		*why = KVS_WHY_PREFIX;
		b = follow(r, st, why);
		/* a deeper route of a backend that left: the hint's, if any,
		 * before the request is placed anew */
		if (b >= 0 || !hinted)
			return b;
		break;
	}
	if (hinted) {
		*depth = hint;
		*why = KVS_WHY_HINT;
		return follow(hinted, st, why);
	}
	*why = KVS_WHY_COLD;
	return -1;
}

/*
 * The backend of the route a request should follow, or -1 when there is
 * none to follow; *why says which (enum kvs_why) and *depth the matched
 * depth in blocks (0 for a cache key). The explicit cache key's route
 * first, then route_by_depth. The prompt is hashed into ch first, whatever
 * is found: the report and the routes learned from it need the chain.
 */
static __always_inline int route_request(struct __sk_buff *skb, const struct kvs_hdr *h, __u32 off,
					 struct kvs_stats *st, struct kvs_chain *ch,
					 struct scratch *sc, __u64 seed, __u32 *depth, __u32 *why)
{
	__u32 n, plen = bpf_ntohl(h->payload_len);
	struct kvs_route *r;
	__u64 key = bpf_be64_to_cpu(h->cache_key);

	*depth = 0;
	n = hash_prompt(skb, off + KVS_HDR_LEN, plen / KVS_BLOCK_BYTES, seed, ch, sc);
	ch->req_id = bpf_be64_to_cpu(h->req_id);
	ch->n = n;
	if (key) {
		r = lookup_route(kvs_key_hash(seed, key));
		if (r) {
			st->cache_key_hits++;
			*why = KVS_WHY_KEY;
			return follow(r, st, why);
		}
	}
	return route_by_depth(ch, h, depth, why);
}

/* A route of tenant's withdrawn: its share's count goes down. */
static __always_inline void share_uncount(__u32 tenant)
{
	struct kvs_route_share *rs = bpf_map_lookup_elem(&route_shares, &tenant);

	if (rs && rs->share && rs->routes)
		__sync_fetch_and_add(&rs->routes, -1);
}

/*
 * The backend now serving a prompt will hold all of it: route the prompt's
 * checkpoints deeper than the match to it too, so the next turn of a
 * conversation (the prompt so far plus a little) matches deep instead of at
 * the first turn's depth. Never overrides a route that exists (the
 * controller's decisions stand); the controller reads these routes when it
 * decides, so it knows what the fast path taught the backends.
 */
static __always_inline void learn_routes(__u32 b, const struct kvs_backend *be, __u32 depth,
					 struct kvs_chain *ch, __u32 tenant, struct kvs_stats *st)
{
	struct kvs_route r = {
		.backend = b,
		.gen = be->route_gen,
		.tenant = tenant,
		.installed_ns = bpf_ktime_get_ns(),
	};
	__u32 k, n = ch->n;

	for (k = 0; k < KVS_MAX_CHECKPOINTS; k++) {
		__u32 cp = kvs_checkpoint(k);

		if (cp <= depth)
			continue;
		if (cp > n)
			break;
		r.depth_blocks = cp;
		/* The key in place, in the chain: the kernel hashes it, then
		 * copies it into the element, so it must not change in between.
		 * It cannot, as the chain is this verdict's own slot (nest, in
		 * maps.bpf.h). With one chain a CPU a nested verdict rewrote it
		 * there: an element filed under one key's hash holding another
		 * key, which no lookup finds and no eviction takes, and on which
		 * a bpf_map_get_next_key walk cycles for good. */
		if (bpf_map_update_elem(&routes, &ch->h[(cp - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)], &r,
					BPF_NOEXIST) == 0)
			st->routes_learned++;
	}
}

static __always_inline int backend_accepts(const struct kvs_backend *be)
{
	return be->state == KVS_BE_UP &&
	       (be->max_outstanding == 0 || be->outstanding < be->max_outstanding) &&
	       (be->work_limit == 0 || be->outstanding_work <= be->work_limit);
}

/* One route, unless the key has one (the controller's decisions and the
 * routes learned before stand). 0 if written. */
static __always_inline int learn_route(__u32 b, const struct kvs_backend *be, __u64 hash,
				       __u32 depth, __u64 flags, __u32 tenant, struct kvs_stats *st)
{
	struct kvs_route r = {
		.backend = b,
		.depth_blocks = depth,
		.gen = be->route_gen,
		.tenant = tenant,
		.installed_ns = bpf_ktime_get_ns(),
	};

	if (bpf_map_update_elem(&routes, &hash, &r, flags))
		return -1;
	st->routes_learned++;
	return 0;
}

#endif /* KVS_DP_ROUTE_BPF_H */
