// SPDX-License-Identifier: GPL-2.0
/*
 * kvsplice data path: an sk_skb stream parser that frames KVS1 messages and a
 * stream verdict that routes each whole frame.
 *
 *   client socket   --REQUEST-->  route map  --> upstream socket of backend
 *   upstream socket --CHUNK/END/ERROR--> client socket named by gw_conn
 *   inject socket   --frames the controller decided--> either of the above
 *
 * Anything the kernel does not route from a client (no route, saturated or
 * absent backend, PING, a malformed frame) is redirected to the punt socket,
 * which the controller reads: the slow path. The frame carries its client's
 * id in gw_conn, and a malformed one is first rewritten into an ERROR notice
 * naming the problem, so the punt stream is always well framed.
 *
 * Nothing is passed up (SK_PASS) into a client socket's own receive queue:
 * reading that queue from userspace while the strparser still holds bytes
 * that arrived before the socket joined the map stalls the stream on this
 * kernel (docs/ARCHITECTURE.md, "Bytes that predate the map").
 *
 * One file, past 800 lines, because it is one object: the parser, the
 * verdict and kvs_withdraw share their maps and the skeleton the daemon
 * loads, and the verdict's helpers must be visible to the verifier as one
 * program (splitting would need a BPF static link step that Debian 12's
 * build does not otherwise need).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "kvsplice/proto.h"
#include "kvsplice/hash.h"
#include "kvsplice/maps.h"
#include "kvsplice/place.h"

char LICENSE[] SEC("license") = "GPL";

/*
 * The strparser hands both programs an skb whose frame starts at
 * strp.offset, not at 0, whenever the previous frame ended inside the same
 * TCP skb. The offset lives in the kernel skb's control block; these are the
 * few fields we need, relocated by CO-RE against the running kernel's BTF.
 */
struct strp_msg {
	int full_len;
	int offset;
} __attribute__((preserve_access_index));

struct _strp_msg {
	struct strp_msg strp;
} __attribute__((preserve_access_index));

struct sk_skb_cb {
	struct _strp_msg strp;
} __attribute__((preserve_access_index));

struct sk_buff {
	char cb[48];
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* Set by the controller before load (rodata, frozen at load time). */
const volatile __u32 cfg_max_payload = KVS_DEFAULT_MAX_PAYLOAD;
const volatile __u32 cfg_window_blocks = KVS_MAX_WINDOW_BLOCKS;
/* A prefix match covering less than this percentage of the prompt (a system
 * prompt everybody shares) is not followed: the controller decides. */
const volatile __u32 cfg_min_match_pct = 30;
/* Release a request's prefill charge at its first CHUNK (1) rather than
 * holding the whole charge until its END (0); see release_prefill(). */
const volatile __u32 cfg_release_prefill_early = 1;
/* Requests one client connection may have in flight (0: no limit). Answers
 * to a client that stops reading pile up in the kernel's queue for its
 * socket; this caps how many can. */
const volatile __u32 cfg_client_max_inflight = 0;
/* Place requests no route covers here (1), by include/kvsplice/place.h,
 * rather than hand them to the controller (0). */
const volatile __u32 cfg_kernel_place = 1;
/* The placement's load bound, in 1/KVS_PLACE_ONE of the mean. */
const volatile __u32 cfg_balance = 1178; /* 1.15 */
/* What a recomputed token costs against a queued one (kvs_place_keep). */
const volatile __u32 cfg_recompute_weight = 16;

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* socket cookie */
	__type(value, struct kvs_conn);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KVS_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct kvs_backend);
	/* The controller mmaps it to set state fields in place, without
	 * overwriting counters the kernel is incrementing. */
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, __u64); /* prefix hash or cache-key hash */
	__type(value, struct kvs_route);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, KVS_MAX_INFLIGHT);
	__type(key, struct kvs_req_key);
	__type(value, struct kvs_inflight);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kvs_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kvs_ctl_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} ctl_stats SEC(".maps");

_Static_assert(KVS_CHAIN_MAX == KVS_MAX_WINDOW_BLOCKS, "chain holds the whole window");

/* The verdict's reports of what it decided, read by the controller. A
 * report that finds the ring full is lost (counted): the request is sent
 * all the same. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, KVS_REPORTS_RING);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} reports SEC(".maps");

_Static_assert(KVS_REPORT_MAX_GROUPS *KVS_INDEX_GROUP == KVS_MAX_WINDOW_BLOCKS,
	       "a report holds the window's groups");

#include "place.bpf.h"

/* Per-CPU scratch: the report being written, and the placement's state
 * (too large for the verdict's stack). */
struct scratch {
	struct place_walk pw;
	struct kvs_report rep;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

/* Per-CPU scratch: the chain of block hashes of the frame being routed. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kvs_chain);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} chain SEC(".maps");

/* Where the current frame starts in the skb, and how long it is. */
static __always_inline void frame_pos(struct __sk_buff *skb, __u32 *off, __u32 *len)
{
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	struct sk_skb_cb *cb = (struct sk_skb_cb *)kskb->cb;

	*off = cb->strp.strp.offset;
	*len = cb->strp.strp.full_len;
}

static __always_inline struct kvs_stats *stats_slot(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&stats, &zero);
}

/* 0 for a well-formed header of a frame_len-byte frame, else the
 * enum kvs_status naming the first problem, in the codec's order. Only the
 * first 16 bytes of h are read. */
static __always_inline int hdr_status(const struct kvs_hdr *h, __u32 frame_len)
{
	__u32 plen = bpf_ntohl(h->payload_len);

	if (h->magic != bpf_htonl(KVS_MAGIC))
		return KVS_E_BAD_MAGIC;
	if (h->version != KVS_VERSION)
		return KVS_E_BAD_VERSION;
	if (h->type < KVS_T_REQUEST || h->type > KVS_T_MAX)
		return KVS_E_BAD_TYPE;
	if (h->hdr_len != bpf_htons(KVS_HDR_LEN))
		return KVS_E_BAD_HDR_LEN;
	if (h->flags)
		return KVS_E_BAD_FLAGS;
	if (plen > cfg_max_payload)
		return KVS_E_TOO_LARGE;
	if (frame_len != KVS_HDR_LEN + plen)
		return KVS_E_BAD_HDR_LEN;
	return 0;
}

/*
 * A frame has begun and not completed: note when, once, so the controller
 * can answer a client that never finishes it (--frame-timeout-ms). The
 * strparser's own timer (SO_RCVTIMEO) is not started for a frame that
 * begins in the same skb as a complete one (its peek at the socket counts
 * the bytes of the frame before), so it cannot be relied on alone. The
 * verdict clears the mark when a frame completes.
 */
static __always_inline void mark_partial(struct __sk_buff *skb)
{
	__u64 cookie = bpf_get_socket_cookie(skb);
	struct kvs_conn *c = bpf_map_lookup_elem(&conns, &cookie);

	if (c && c->role == KVS_ROLE_CLIENT && !c->partial_since_ns)
		c->partial_since_ns = bpf_ktime_get_ns();
}

SEC("sk_skb/stream_parser")
int kvs_parser(struct __sk_buff *skb)
{
	struct kvs_hdr h;
	__u32 off, len, plen;

	frame_pos(skb, &off, &len);
	if (off > skb->len || skb->len - off < KVS_HDR_LEN ||
	    bpf_skb_load_bytes(skb, off, &h, 16)) {
		mark_partial(skb);
		return 0; /* need more bytes */
	}
	plen = bpf_ntohl(h.payload_len);
	/*
	 * A header we cannot trust is framed as a bare 64-byte message: the
	 * verdict turns it into an ERROR notice for the controller, which answers
	 * the client and closes the connection. Returning an error here instead
	 * would make the strparser abort the socket with no word to the client.
	 */
	if (hdr_status(&h, KVS_HDR_LEN + plen))
		return KVS_HDR_LEN;
	if (skb->len - off < KVS_HDR_LEN + plen)
		mark_partial(skb);
	return KVS_HDR_LEN + plen;
}

/* State of one walk over a prompt's blocks (bpf_loop callback context). */
struct hash_walk {
	struct __sk_buff *skb;
	struct kvs_chain *out;
	__u64 *groups; /* every KVS_INDEX_GROUP-th hash, for the report */
	__u64 h;
	__u32 prompt_off;
	__u32 n; /* block hashes computed so far */
};

static long hash_block(__u32 i, struct hash_walk *w)
{
	unsigned char blk[KVS_BLOCK_BYTES];

	if (i >= KVS_MAX_WINDOW_BLOCKS)
		return 1;
	if (bpf_skb_load_bytes(w->skb, w->prompt_off + i * KVS_BLOCK_BYTES, blk, sizeof(blk)))
		return 1;
	w->h = kvs_block_hash(w->h, blk);
	/* clang drops a mask it can prove redundant, then the verifier sees
	 * an unbounded index: make i opaque so the mask stays. */
	asm volatile("" : "+r"(i));
	w->out->h[i & (KVS_MAX_WINDOW_BLOCKS - 1)] = w->h;
	/* the report's copy, written here rather than by a second loop */
	if ((i & (KVS_INDEX_GROUP - 1)) == KVS_INDEX_GROUP - 1)
		w->groups[(i / KVS_INDEX_GROUP) & (KVS_REPORT_MAX_GROUPS - 1)] = w->h;
	w->n = i + 1;
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
					 __u64 seed, struct kvs_chain *out, __u64 *groups)
{
	struct hash_walk w = {
		.skb = skb,
		.out = out,
		.groups = groups,
		.h = seed,
		.prompt_off = prompt_off,
		.n = 0,
	};

	if (nblocks > cfg_window_blocks)
		nblocks = cfg_window_blocks;
	if (nblocks > KVS_MAX_WINDOW_BLOCKS)
		nblocks = KVS_MAX_WINDOW_BLOCKS;
	bpf_loop(nblocks, hash_block, &w, 0);
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
 * The backend of the route a request should follow, or -1 when there is
 * none to follow; *why says which (enum kvs_why) and *depth the matched
 * depth in blocks (0 for a cache key). Routes are looked up by the explicit
 * cache key first, then the client's prefix-length hint, then the
 * checkpoints of the chain, deepest first; a match too shallow for the
 * prompt is not followed. The prompt is hashed into ch first, whatever is
 * found: the report and the routes learned from it need the chain.
 */
static __always_inline int route_request(struct __sk_buff *skb, const struct kvs_hdr *h, __u32 off,
					 struct kvs_stats *st, struct kvs_chain *ch, __u64 *groups,
					 __u64 seed, __u32 *depth, __u32 *why)
{
	__u32 n, hint, k, plen = bpf_ntohl(h->payload_len);
	struct kvs_route *r;
	__u64 key = bpf_be64_to_cpu(h->cache_key);

	*depth = 0;
	n = hash_prompt(skb, off + KVS_HDR_LEN, plen / KVS_BLOCK_BYTES, seed, ch, groups);
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

	hint = kvs_hint_blocks(bpf_ntohl(h->prefix_len));
	if (hint > 0 && hint <= n && hint <= KVS_MAX_WINDOW_BLOCKS) {
		r = lookup_route(ch->h[(hint - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)]);
		if (r) {
			*depth = hint;
			*why = KVS_WHY_HINT;
			return follow(r, st, why);
		}
	}

	for (k = KVS_MAX_CHECKPOINTS; k > 0; k--) {
		__u32 cp = kvs_checkpoint(k - 1);

		if (cp > n)
			continue;
		r = lookup_route(ch->h[(cp - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)]);
		if (!r)
			continue;
		*depth = cp;
		if (!deep_enough(cp, plen)) {
			st->pass_shallow++;
			*why = KVS_WHY_SHALLOW;
			return -1;
		}
		*why = KVS_WHY_PREFIX;
		return follow(r, st, why);
	}
	*why = KVS_WHY_COLD;
	return -1;
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
					 struct kvs_chain *ch, struct kvs_stats *st)
{
	struct kvs_route r = {
		.backend = b,
		.gen = be->route_gen,
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
 * routes learned before stand). */
static __always_inline void learn_route(__u32 b, const struct kvs_backend *be, __u64 hash,
					__u32 depth, __u64 flags, struct kvs_stats *st)
{
	struct kvs_route r = {
		.backend = b,
		.depth_blocks = depth,
		.gen = be->route_gen,
		.installed_ns = bpf_ktime_get_ns(),
	};

	if (bpf_map_update_elem(&routes, &hash, &r, flags) == 0)
		st->routes_learned++;
}

/* What the verdict decided for a request, to the controller. */
struct decision {
	__u64 key;	 /* placement key, or the followed route's hash */
	__u64 cache_key; /* the cache key's route hash; 0: none */
	__u32 backend;
	__u32 why;
	__u32 depth;
	__u32 charge;
	__u32 gen; /* the backend's route_gen when sent (the report's) */
	__u32 pad;
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
	__u32 zero = 0, ng;
	struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
	struct kvs_report *rep;
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

/* The gateway-owned header fields, written in one store. */
struct gw_fields {
	__be32 backend;
	__be64 conn;
} __attribute__((packed));

/*
 * Redirect a request frame to an upstream socket of backend b. A client
 * always lands on the same pool slot, so its requests to one backend keep
 * their order. Returns 0 when redirected, SEND_CLIENT_LIMIT when the client
 * has --max-client-inflight requests in flight already (checked here, where
 * the count goes up), -1 otherwise. Requests the controller injects were
 * counted when punted (punt_request()) and checked by the controller: they
 * pass fast 0 and are neither checked nor counted again. (Handing them back
 * on the inject socket (SK_PASS) in numbers stalls that socket's parser for
 * good: docs/ARCHITECTURE.md, "Hazards of sockmap splicing".)
 */
#define SEND_CLIENT_LIMIT (-2)
static __always_inline int send_request(struct __sk_buff *skb, const struct kvs_hdr *h, __u32 off,
					__u32 len, __u32 b, struct kvs_backend *be, __u64 client,
					__u32 charge, int fast)
{
	__u32 out = kvs_charged_output(bpf_ntohl(h->max_tokens), be->expect_output);
	struct gw_fields gw = {
		.backend = bpf_htonl(kvs_gw_pack(b, charge)),
		.conn = bpf_cpu_to_be64(client),
	};
	struct kvs_req_key rk = { .conn = client, .req_id = bpf_be64_to_cpu(h->req_id) };
	struct kvs_inflight rec = {
		.backend = b,
		.out_tokens = out,
		.held_tokens = (__u64)charge * KVS_BLOCK_TOKENS, /* charge fits 24 bits */
	};
	struct kvs_conn *c = bpf_map_lookup_elem(&conns, &client);
	__u64 key;

	if (be->pool_size == 0 || be->pool_size > KVS_MAX_POOL)
		return -1;
	/* Two CPUs may both pass this check for one client: the limit can be
	 * exceeded by one per CPU, not more. */
	if (fast && cfg_client_max_inflight && c && c->inflight >= cfg_client_max_inflight)
		return SEND_CLIENT_LIMIT;
	key = kvs_upstream_key(b, client % be->pool_size);
	if (bpf_skb_store_bytes(skb, off + KVS_OFF_GW_BACKEND, &gw, sizeof(gw), 0))
		return -1;
	if (bpf_sk_redirect_hash(skb, &socks, &key, 0) != SK_PASS)
		return -1;
	/* The record says which backend owes this client an answer: when the
	 * backend dies, the controller answers each of its requests with an
	 * ERROR from these (kvs_dp_fail_inflight). With an early release it
	 * also keeps what the request still holds. */
	if (cfg_release_prefill_early)
		rec.prefill_tokens = kvs_prefill_charge(charge, out);
	bpf_map_update_elem(&inflight, &rk, &rec, BPF_ANY);
	if (c && fast) /* punted requests were counted as they went */
		__sync_fetch_and_add(&c->inflight, 1);
	__sync_fetch_and_add(&be->outstanding, 1);
	__sync_fetch_and_add(&be->outstanding_work, rec.held_tokens);
	__sync_fetch_and_add(&be->charged_tokens, rec.held_tokens);
	__sync_fetch_and_add(&be->req_frames, 1);
	__sync_fetch_and_add(&be->req_bytes, len);
	return 0;
}

/* Hand a client's frame to the controller through the punt socket. */
static __always_inline int punt(struct __sk_buff *skb, struct kvs_stats *st)
{
	__u64 key = KVS_PUNT_KEY;

	if (bpf_sk_redirect_hash(skb, &socks, &key, 0) != SK_PASS) {
		st->drop_punt++;
		return SK_DROP;
	}
	return SK_PASS;
}

/*
 * A client's REQUEST to the controller: it counts as in flight from here,
 * as one the kernel sends does, until its END or ERROR passes back (the
 * controller's busy or no-backend ERROR included). Whether it is over
 * --max-client-inflight is decided here, in arrival order, and marked in
 * gw_backend for the controller to answer busy: the controller reads
 * requests later than they are counted, and could not tell. The
 * controller's injected copy is not counted again.
 */
static __always_inline int punt_request(struct __sk_buff *skb, struct kvs_stats *st,
					struct kvs_conn *conn, __u32 off)
{
	__u32 mark = bpf_htonl(KVS_GW_OVER_LIMIT);

	/* Read, then add: two CPUs may both see room (one over, at most). */
	if (cfg_client_max_inflight && conn->inflight >= cfg_client_max_inflight) {
		st->pass_client_limit++;
		bpf_skb_store_bytes(skb, off + KVS_OFF_GW_BACKEND, &mark, sizeof(mark), 0);
	}
	__sync_fetch_and_add(&conn->inflight, 1);
	if (punt(skb, st) == SK_PASS)
		return SK_PASS;
	if (conn->inflight > 0)
		__sync_fetch_and_add(&conn->inflight, (__u32)-1);
	return SK_DROP;
}

/* Stamp the client's id (and no backend, or a note for the controller)
 * into a frame for the controller. */
static __always_inline int stamp_client(struct __sk_buff *skb, __u32 off, __u64 cookie,
					__u32 backend)
{
	struct gw_fields gw = {
		.backend = bpf_htonl(backend),
		.conn = bpf_cpu_to_be64(cookie),
	};

	return bpf_skb_store_bytes(skb, off + KVS_OFF_GW_BACKEND, &gw, sizeof(gw), 0);
}

/*
 * Rewrite a client's unacceptable frame into an ERROR notice for the
 * controller: same length (a malformed header was framed as 64 bytes, a
 * frame of the wrong type keeps its payload as the message), status naming
 * the problem, gw_conn naming the client.
 */
static __always_inline int punt_error(struct __sk_buff *skb, struct kvs_stats *st,
				      const struct kvs_hdr *h, __u32 off, __u32 len, __u64 cookie,
				      int status)
{
	struct kvs_hdr e = {
		.magic = bpf_htonl(KVS_MAGIC),
		.version = KVS_VERSION,
		.type = KVS_T_ERROR,
		.hdr_len = bpf_htons(KVS_HDR_LEN),
		.status = bpf_htons(status),
		.payload_len = bpf_htonl(len - KVS_HDR_LEN),
		.req_id = h->req_id,
		.gw_backend = bpf_htonl(~0u),
		.gw_conn = bpf_cpu_to_be64(cookie),
	};

	if (len < KVS_HDR_LEN || bpf_skb_store_bytes(skb, off, &e, sizeof(e), 0)) {
		st->drop_punt++;
		return SK_DROP;
	}
	st->pass_bad_frame++;
	return punt(skb, st);
}

/*
 * A CANCEL to the backend its request went to, found in the request's
 * record (client cookie, req_id): stamped as a request is (its charge 0),
 * on the pool slot the client's requests to that backend take, so that it
 * follows the request it names. 0 when sent; -1 when there is no record
 * (the request is unknown, has ended, or has not reached a backend yet) or
 * no upstream socket.
 */
static __always_inline int send_cancel(struct __sk_buff *skb, struct kvs_stats *st,
				       const struct kvs_hdr *h, __u32 off, __u64 client)
{
	struct kvs_req_key rk = { .conn = client, .req_id = bpf_be64_to_cpu(h->req_id) };
	struct kvs_inflight *rec = bpf_map_lookup_elem(&inflight, &rk);
	struct kvs_backend *be;
	struct gw_fields gw;
	__u32 b;
	__u64 key;

	if (!rec)
		return -1;
	b = rec->backend;
	be = bpf_map_lookup_elem(&backends, &b);
	if (!be || be->pool_size == 0 || be->pool_size > KVS_MAX_POOL)
		return -1;
	gw.backend = bpf_htonl(kvs_gw_pack(b, 0));
	gw.conn = bpf_cpu_to_be64(client);
	key = kvs_upstream_key(b, client % be->pool_size);
	if (bpf_skb_store_bytes(skb, off + KVS_OFF_GW_BACKEND, &gw, sizeof(gw), 0) ||
	    bpf_sk_redirect_hash(skb, &socks, &key, 0) != SK_PASS)
		return -1;
	st->cancel_frames++;
	return 0;
}

/*
 * A client's CANCEL. With no record of its request, the request may still
 * be with the controller (punted, not yet injected; the client's in-flight
 * count says so): the CANCEL follows it through the punt socket, in order,
 * and the controller injects it after the request. A client with nothing
 * in flight has nothing to cancel: dropped here.
 */
static __always_inline int client_cancel(struct __sk_buff *skb, struct kvs_stats *st,
					 const struct kvs_hdr *h, __u32 off, __u64 cookie,
					 const struct kvs_conn *conn)
{
	if (send_cancel(skb, st, h, off, cookie) == 0)
		return SK_PASS;
	if (conn->inflight == 0) {
		st->drop_cancel++;
		return SK_DROP;
	}
	st->pass_other++;
	if (stamp_client(skb, off, cookie, ~0u))
		return SK_DROP;
	return punt(skb, st);
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
	__u32 b, n, k, hint, plen, zero = 0;
	struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
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
	rb = place_pick_backend(&sc->pw, d->key, d->why == KVS_WHY_SPILL);
	if (rb < 0 || rb >= KVS_MAX_BACKENDS)
		return -1;
	b = rb;
	be = bpf_map_lookup_elem(&backends, &b);
	if (!be)
		return -1;
	/* A holder over its bound: does moving cost more than staying? */
	if (d->why == KVS_WHY_SPILL && d->backend < KVS_MAX_BACKENDS) {
		__u32 hb = d->backend;
		struct kvs_backend *hold = bpf_map_lookup_elem(&backends, &hb);

		if (hold && may_place(hold) &&
		    (hb == b ||
		     kvs_place_keep(&sc->pw.s, cfg_balance, cfg_recompute_weight,
				    kvs_prompt_tokens(plen), hold->outstanding_work,
				    (__u64)d->depth * KVS_BLOCK_TOKENS, be->outstanding_work))) {
			b = hb;
			be = hold;
			d->why = KVS_WHY_KEPT;
		}
	}
	/* Placed, nothing of it is known to be cached there. */
	d->charge =
		kvs_work_blocks(kvs_prompt_tokens(plen), d->why == KVS_WHY_KEPT ? d->depth : 0,
				kvs_charged_output(bpf_ntohl(h->max_tokens), be->expect_output));
	sent = send_request(skb, h, d->off, d->len, b, be, d->client, d->charge, 1);
	if (sent)
		return sent;
	d->backend = b;
	d->gen = be->route_gen;
	if (d->why == KVS_WHY_KEPT) {
		st->kept_holder++;
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
	struct kvs_backend *be;
	__u32 b, n, hint;

	if (!ch || !h || !d || !st)
		return -1;
	b = d->backend;
	be = bpf_map_lookup_elem(&backends, &b);
	if (!be)
		return -1;
	n = ch->n;
	if (d->why >= KVS_WHY_COLD) {
		hint = kvs_hint_blocks(bpf_ntohl(h->prefix_len));
		if (d->cache_key)
			learn_route(b, be, d->cache_key, 0,
				    d->why == KVS_WHY_STALE && !d->depth ? BPF_ANY : BPF_NOEXIST,
				    st);
		if (d->why == KVS_WHY_STALE && d->depth)
			learn_route(b, be, ch->h[(d->depth - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)],
				    d->depth, BPF_ANY, st);
		if (hint > d->depth && hint <= n && hint <= KVS_MAX_WINDOW_BLOCKS)
			learn_route(b, be, ch->h[(hint - 1) & (KVS_MAX_WINDOW_BLOCKS - 1)], hint,
				    BPF_NOEXIST, st);
	}
	if (d->depth || d->why >= KVS_WHY_COLD)
		learn_routes(b, be, d->depth, ch, st);
	return 0;
}

static __always_inline int client_frame(struct __sk_buff *skb, struct kvs_stats *st,
					const struct kvs_hdr *h, __u32 off, __u32 len, __u64 cookie,
					struct kvs_conn *conn)
{
	struct decision d = { .why = KVS_WHY_COLD };
	__u32 b, zero = 0, plen = bpf_ntohl(h->payload_len);
	__u64 seed, key = bpf_be64_to_cpu(h->cache_key);
	struct kvs_backend *be;
	struct kvs_chain *ch;
	struct scratch *sc;
	int rb, sent = 1; /* 1: not tried; 0 sent; -1, SEND_CLIENT_LIMIT */

	if (h->type == KVS_T_PING) {
		st->pass_other++;
		if (stamp_client(skb, off, cookie, ~0u))
			return SK_DROP;
		return punt(skb, st);
	}
	if (h->type == KVS_T_CANCEL)
		return client_cancel(skb, st, h, off, cookie, conn);
	if (h->type != KVS_T_REQUEST)
		return punt_error(skb, st, h, off, len, cookie, KVS_E_BAD_TYPE);
	if (cfg_client_max_inflight && conn->inflight >= cfg_client_max_inflight) {
		if (stamp_client(skb, off, cookie, ~0u))
			return SK_DROP;
		return punt_request(skb, st, conn, off);
	}
	ch = bpf_map_lookup_elem(&chain, &zero);
	sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!ch || !sc)
		goto slow;

	seed = kvs_seed(bpf_ntohl(h->model_id), bpf_be64_to_cpu(h->cache_salt));
	d.cache_key = key ? kvs_key_hash(seed, key) : 0;
	rb = route_request(skb, h, off, st, ch, sc->rep.g, seed, &d.depth, &d.why);
	if (rb >= 0 && rb < KVS_MAX_BACKENDS) {
		b = rb;
		be = bpf_map_lookup_elem(&backends, &b);
		if (be && backend_accepts(be)) {
			d.charge = kvs_work_blocks(kvs_prompt_tokens(plen), d.depth,
						   kvs_charged_output(bpf_ntohl(h->max_tokens),
								      be->expect_output));
			sent = send_request(skb, h, off, len, b, be, cookie, d.charge, 1);
			if (sent == 0) {
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
	if (stamp_client(skb, off, cookie, d.why == KVS_WHY_COLD ? KVS_GW_NO_ROUTE : ~0u)) {
		st->drop_punt++;
		return SK_DROP;
	}
	return punt_request(skb, st, conn, off);
}

/* A CHUNK/END/ERROR/PONG frame to the client named by gw_conn. ends: the
 * frame ends a request the kernel sent to a backend (its END or ERROR, or
 * the controller's ERROR for a backend that died), so the client has one
 * request fewer in flight. */
static __always_inline int to_client(struct __sk_buff *skb, struct kvs_stats *st,
				     const struct kvs_hdr *h, int ends)
{
	__u64 client = bpf_be64_to_cpu(h->gw_conn);
	struct kvs_conn *c = bpf_map_lookup_elem(&conns, &client);

	if (ends && c && c->role == KVS_ROLE_CLIENT && c->inflight > 0)
		__sync_fetch_and_add(&c->inflight, (__u32)-1); /* 32-bit: no atomic sub in BPF v2 */

	/* Only ever into a client socket: a backend echoing a forged gw_conn
	 * must not be able to write into another backend's stream. */
	if (!c || c->role != KVS_ROLE_CLIENT ||
	    bpf_sk_redirect_hash(skb, &socks, &client, 0) != SK_PASS) {
		st->drop_no_client++;
		return SK_DROP;
	}
	st->resp_frames++;
	return SK_PASS;
}

static __always_inline int is_response(__u8 type)
{
	return type == KVS_T_CHUNK || type == KVS_T_END || type == KVS_T_ERROR;
}

/*
 * Learn from an END: the backend's own count of cached prompt tokens, and how
 * far the gateway's expectation was off. What was expected cached is
 * recovered from the echoed charge (charge x 16 = uncached + output charged,
 * rounded up, so the estimate errs low); the one block a fully cached prompt
 * still recomputes is not counted as a miss.
 */
static __always_inline void account_end(struct __sk_buff *skb, struct kvs_backend *be,
					const struct kvs_hdr *h, __u32 off)
{
	struct kvs_req_key rk = { .conn = bpf_be64_to_cpu(h->gw_conn),
				  .req_id = bpf_be64_to_cpu(h->req_id) };
	struct {
		__be32 prompt_tokens, cached_tokens, output_tokens;
	} e;
	__u64 prompt, cached, output, charged_out, pred_uncached, pred;
	struct kvs_inflight *rec;

	if (bpf_skb_load_bytes(skb, off + KVS_HDR_LEN, &e, sizeof(e)))
		return;
	prompt = bpf_ntohl(e.prompt_tokens);
	cached = bpf_ntohl(e.cached_tokens);
	output = bpf_ntohl(e.output_tokens);
	__sync_fetch_and_add(&be->output_tokens, output);
	/* The charge was the uncached prompt plus the output charged then
	 * (its record says; the output itself when the record is gone). */
	rec = bpf_map_lookup_elem(&inflight, &rk);
	charged_out = rec ? rec->out_tokens : output;
	pred_uncached = (__u64)kvs_gw_charge(bpf_ntohl(h->gw_backend)) * KVS_BLOCK_TOKENS;
	pred_uncached = pred_uncached > charged_out ? pred_uncached - charged_out : 0;
	pred = prompt > pred_uncached ? prompt - pred_uncached : 0;
	__sync_fetch_and_add(&be->prompt_tokens, prompt);
	__sync_fetch_and_add(&be->cached_tokens, cached);
	__sync_fetch_and_add(&be->predicted_cached, pred);
	if (pred > cached + KVS_BLOCK_TOKENS)
		__sync_fetch_and_add(&be->mispredicted, pred - cached - KVS_BLOCK_TOKENS);
}

/* Take work off a backend's count, never below zero: a stray or forged
 * response must not wrap it and wedge the backend as saturated forever. */
static __always_inline void release_work(struct kvs_backend *be, __u64 work)
{
	if (be->outstanding_work >= work)
		__sync_fetch_and_sub(&be->outstanding_work, work);
	else
		be->outstanding_work = 0;
}

/*
 * A request's first CHUNK: its backend has computed the prompt, so the
 * prefill part of the charge could stop counting as load. Holding it until
 * the END makes a backend that has just finished a long prefill look as busy
 * as one about to start it, for the whole decode; releasing it early makes
 * the load signal mostly decode work, which the bounded-load slack then
 * hardly ever catches. Which is better depends on the prompt/output mix
 * (docs/ARCHITECTURE.md, "Load in tokens, exactly"), hence
 * --release-prefill. Only the backend the request went to can release it.
 */
static __always_inline void release_prefill(struct kvs_backend *be, const struct kvs_hdr *h,
					    __u32 b)
{
	struct kvs_req_key rk = { .conn = bpf_be64_to_cpu(h->gw_conn),
				  .req_id = bpf_be64_to_cpu(h->req_id) };
	struct kvs_inflight *rec;
	__u64 p;

	if (!cfg_release_prefill_early)
		return;
	/* One lookup per CHUNK: the record must live until the END, and
	 * nothing in a later CHUNK says the prefill was already released. */
	rec = bpf_map_lookup_elem(&inflight, &rk);
	if (!rec || rec->backend != b || rec->prefill_tokens == 0)
		return;
	/* CHUNK and END of one request come from one upstream socket, in
	 * order, under its lock: nothing races on the record. */
	p = rec->prefill_tokens;
	rec->prefill_tokens = 0;
	rec->held_tokens = rec->held_tokens > p ? rec->held_tokens - p : 0;
	release_work(be, p);
}

/* An END or ERROR: what the request still holds, from its record, or the
 * echoed charge when the record is gone (more in flight than the map). */
static __always_inline __u64 end_release(struct kvs_stats *st, const struct kvs_hdr *h, __u32 b)
{
	struct kvs_req_key rk = { .conn = bpf_be64_to_cpu(h->gw_conn),
				  .req_id = bpf_be64_to_cpu(h->req_id) };
	__u64 echoed = (__u64)kvs_gw_charge(bpf_ntohl(h->gw_backend)) * KVS_BLOCK_TOKENS;
	struct kvs_inflight *rec;
	__u64 held;

	rec = bpf_map_lookup_elem(&inflight, &rk);
	if (!rec || rec->backend != b) {
		st->inflight_lost++;
		return echoed;
	}
	held = rec->held_tokens;
	bpf_map_delete_elem(&inflight, &rk);
	return held;
}

static __always_inline int upstream_frame(struct __sk_buff *skb, struct kvs_stats *st,
					  const struct kvs_hdr *h, __u32 b, __u32 off, __u32 len)
{
	struct kvs_backend *be = bpf_map_lookup_elem(&backends, &b);

	/* The answer to the controller's health check (ping_backend()). */
	if (h->type == KVS_T_PONG)
		return punt(skb, st);
	if (!is_response(h->type)) {
		st->drop_bad_upstream++;
		return SK_DROP;
	}
	if (be) {
		__sync_fetch_and_add(&be->resp_frames, 1);
		__sync_fetch_and_add(&be->resp_bytes, len);
		if (h->type == KVS_T_CHUNK) {
			release_prefill(be, h, b);
		} else {
			__sync_fetch_and_add(&be->ends, 1);
			if (h->type == KVS_T_END && len >= KVS_HDR_LEN + sizeof(struct kvs_end))
				account_end(skb, be, h, off);
			/* A stray END must not wrap a count and wedge the
			 * backend as saturated forever. */
			if (be->outstanding > 0)
				__sync_fetch_and_sub(&be->outstanding, 1);
			release_work(be, end_release(st, h, b));
		}
	}
	return to_client(skb, st, h, h->type != KVS_T_CHUNK);
}

/* Frames the controller wrote into its inject socket: requests carry the
 * backend it chose, everything else (its own answers) the client. */
static __always_inline int inject_frame(struct __sk_buff *skb, struct kvs_stats *st,
					const struct kvs_hdr *h, __u32 off, __u32 len)
{
	struct kvs_backend *be;
	__u32 b;

	/* inject_frames is counted after a request's backend has counted it
	 * (send_request()): the controller takes "the kernel has read every
	 * frame I sent" to mean its counts include them (sync_inject()). */
	/* A health check: to the backend named (pool slot 0), not a client. */
	if (h->type == KVS_T_PING && bpf_ntohl(h->gw_backend) != ~0u) {
		__u64 key = kvs_upstream_key(kvs_gw_backend(bpf_ntohl(h->gw_backend)), 0);

		st->inject_frames++;
		if (bpf_sk_redirect_hash(skb, &socks, &key, 0) == SK_PASS)
			return SK_PASS;
		st->pass_no_upstream++;
		return SK_DROP;
	}
	/* The controller's CANCELs: a client's that came through it, and its
	 * own for clients that went away. Dropped if the request has ended. */
	if (h->type == KVS_T_CANCEL) {
		st->inject_frames++;
		if (send_cancel(skb, st, h, off, bpf_be64_to_cpu(h->gw_conn)) == 0)
			return SK_PASS;
		st->drop_cancel++;
		return SK_DROP;
	}
	/* Every ERROR of the controller's ends a request it was handed or
	 * that a dead backend owed (a client rejected for a bad frame is
	 * closing: its count no longer matters). */
	if (h->type != KVS_T_REQUEST) {
		st->inject_frames++;
		return to_client(skb, st, h, h->type == KVS_T_ERROR);
	}
	b = kvs_gw_backend(bpf_ntohl(h->gw_backend));
	be = bpf_map_lookup_elem(&backends, &b);
	if (!be || send_request(skb, h, off, len, b, be, bpf_be64_to_cpu(h->gw_conn),
				kvs_gw_charge(bpf_ntohl(h->gw_backend)), 0)) {
		/* (the controller answers it with an ERROR, which uncounts it) */
		/* Back to the controller, on the inject socket's own receive
		 * queue: it answers the client with an error. Only when the
		 * backend's socket is gone: rare, see send_request(). */
		st->pass_no_upstream++;
	}
	st->inject_frames++;
	return SK_PASS;
}

/*
 * The controller's route withdrawals, a batch per system call (BPF_PROG_RUN
 * of this program) instead of a lookup and a delete per route: its index
 * evicts about as many routes as a slow-path decision installs. Returns how
 * many were deleted.
 */
SEC("syscall")
int kvs_withdraw(struct kvs_withdraw_batch *b)
{
	int deleted = 0;
	__u32 i;

	/* Unrolled: a syscall program may read its context only at constant
	 * offsets. */
#pragma clang loop unroll(full)
	for (i = 0; i < KVS_WITHDRAW_BATCH; i++) {
		struct kvs_route *r;
		__u64 hash;

		if (i >= b->n)
			break;
		hash = b->e[i].hash;
		r = bpf_map_lookup_elem(&routes, &hash);
		if (r && r->backend == b->e[i].backend && bpf_map_delete_elem(&routes, &hash) == 0)
			deleted++;
	}
	return deleted;
}

SEC("sk_skb/stream_verdict")
int kvs_verdict(struct __sk_buff *skb)
{
	struct kvs_stats *st = stats_slot();
	__u64 cookie = bpf_get_socket_cookie(skb);
	struct kvs_conn *conn;
	struct kvs_hdr h;
	__u32 off, len;
	int bad;

	if (!st)
		return SK_DROP;
	frame_pos(skb, &off, &len);
	if (off)
		st->frames_at_offset++;
	conn = bpf_map_lookup_elem(&conns, &cookie);
	if (!conn) {
		st->drop_punt++;
		return SK_DROP;
	}
	if (bpf_skb_load_bytes(skb, off, &h, sizeof(h)))
		__builtin_memset(&h, 0, sizeof(h)); /* reported as bad magic */
	conn->frames++;
	conn->partial_since_ns = 0;
	conn->bytes += len;

	bad = hdr_status(&h, len);
	if (!bad) /* the type's own rules, as the controller's codec checks them */
		bad = kvs_type_rules(h.type, bpf_ntohs(h.status), bpf_ntohl(h.payload_len),
				     bpf_ntohl(h.prefix_len));
	if (conn->role == KVS_ROLE_CLIENT) {
		if (bad)
			return punt_error(skb, st, &h, off, len, cookie, bad);
		return client_frame(skb, st, &h, off, len, cookie, conn);
	}
	if (bad) {
		st->drop_bad_upstream++;
		return SK_DROP;
	}
	if (conn->role == KVS_ROLE_UPSTREAM)
		return upstream_frame(skb, st, &h, conn->backend, off, len);
	if (conn->role == KVS_ROLE_INJECT)
		return inject_frame(skb, st, &h, off, len);
	st->drop_bad_upstream++;
	return SK_DROP;
}
