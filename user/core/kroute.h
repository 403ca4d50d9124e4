/* SPDX-License-Identifier: MIT */
/*
 * The kernel's routing as kvsplice-bench sim runs it: a pure model of what
 * the verdict (bpf/kvsplice.bpf.c) decides for each request, and of what
 * the controller does with its report (user/kvspliced/reports.c), so the
 * simulator evaluates the split the gateway runs rather than the
 * controller deciding every request.
 *
 * The kernel (kvs_kr_decide):
 *   - looks the prompt up in the route map: the cache key's route, else
 *     deepest first the checkpoints deeper than the hinted prefix, the
 *     hinted prefix's, the checkpoints under it; a match under the hint
 *     covering under min_match_pct of the prompt is shallow, not followed;
 *   - follows a route while its backend accepts: up, under max_outstanding,
 *     and its outstanding work within the work limit the controller
 *     publishes (kvs_kr_refresh, gw_publish_limits); a hot route (followed
 *     by more work than a backend's share, include/kvsplice/place.h, "Hot
 *     prefixes") to the rule's pick among its replicas instead;
 *   - otherwise places the request by include/kvsplice/place.h on its
 *     placement key, through the policy's placement state, charging it as
 *     if nothing were cached; a holder past the limit keeps it where
 *     moving would cost more (kvs_place_keep, charged for its route);
 *   - learns routes, never replacing one but a stale one: after a followed
 *     route, every checkpoint deeper than it; after a placement, the cache
 *     key's, the hint's and every checkpoint deeper than the match.
 * The controller (kvs_kr_report): records the prompt's groups in the
 * chosen backend's index and marks the routes the kernel learned, so that
 * the index evicting one withdraws the route (if it still names that
 * backend).
 *
 * The route map is an LRU hash in the kernel; here an exact LRU (a lookup
 * that finds a route counts as a use), bounded the same. Only what the
 * kernel hashes is seen: the first window_blocks blocks of a prompt.
 */
#ifndef KVS_KROUTE_H
#define KVS_KROUTE_H

#include <stdint.h>

#include "kvsplice/maps.h"
#include "kvsplice/place.h"
#include "policy.h"

/* The kernel's route map (bpf/kvsplice.bpf.c, `routes`). */
#define KVS_KR_ROUTES 262144
/* --kernel-slack-tokens' default (user/kvspliced/config.c). */
#define KVS_KR_KERNEL_SLACK 512

struct kvs_kr_params {
	uint32_t routes; /* route map entries */
	/* Blocks the kernel hashes (KVS_MAX_WINDOW_BLOCKS). A larger window is
	 * a what-if: checkpoints go on every 128 blocks past 1,024. */
	uint32_t window_blocks;
	uint32_t min_match_pct;	   /* a shallower checkpoint route is not followed */
	uint32_t kernel_slack;	   /* least slack of the work limit, tokens */
	uint32_t max_outstanding;  /* requests per backend; 0: none */
	uint32_t recompute_weight; /* kvs_place_keep's (cfg_recompute_weight) */
	double balance;		   /* the work limit's (the policy's own) */
	double keep_balance;	   /* a holder keeps a request within it (kvs_place_keep) */
	int hot;		   /* replicate hot prefixes (the kernel does) */
};

/* One request as the verdict sees it. */
struct kvs_kr_req {
	const uint64_t *h;	/* block hashes of the prompt */
	uint32_t n;		/* full blocks of the prompt (the window applies) */
	uint32_t prompt_tokens; /* the prompt's bytes / KVS_BYTES_PER_TOKEN */
	uint32_t max_tokens;
	uint64_t seed;	    /* the chain's seed: places a prompt under one block */
	uint64_t cache_key; /* the cache key's route hash (kvs_key_hash); 0: none */
	uint32_t hint;	    /* kvs_hint_blocks of the client's prefix_len */
	uint64_t now_ns;    /* its arrival (the routes' hot windows) */
};

struct kvs_kr_decision {
	int backend;	  /* -1: none may take it (punted) */
	enum kvs_why why; /* 0 when punted; below KVS_WHY_COLD, a route followed */
	uint32_t depth;	  /* blocks of the route matched (0: none, or a key) */
	uint32_t blocks;  /* blocks hashed */
	uint64_t key;	  /* the placement key, or the followed route's hash */
	uint64_t charge;  /* work charged to the backend, tokens */
	uint32_t learned; /* routes the kernel installed */
};

struct kvs_kr_route;

struct kvs_kr {
	struct kvs_kr_params p;
	struct kvs_policy *pol; /* its index and placement state; not owned */
	uint32_t ncp;		/* checkpoints within the window */
	/* the route map: open addressing over node indices, and an LRU list
	 * through the nodes, most recently used first */
	uint32_t *table, mask;
	struct kvs_kr_route *node;
	uint32_t used, free_head, lru_head, lru_tail;
	uint32_t gen[KVS_MAX_BACKENDS]; /* route_gen: routes of an older one are stale */
	uint64_t *g;			/* a report's group hashes (window / group) */
	/* the work limit and the controller's state behind it */
	uint64_t work_limit; /* tokens; 0: none */
	/* the controller's hot windows (kvs_hot_roll), rolled at each refresh
	 * at clock_ns (the caller's clock); hot_share fixes the share (a test's
	 * fleet), 0: measured (kvs_hot_share) */
	struct kvs_hot_fleet hot_fleet;
	uint64_t clock_ns, hot_share;
	uint64_t typical; /* smoothed charge per request */
	uint64_t charged, sent, seen_charged, seen_sent;
	/* what happened, for the curious */
	uint64_t why[KVS_WHY_MAX + 1]; /* decisions by enum kvs_why; [0]: punted */
	uint64_t learned, withdrawn, lru_evicted;
	uint64_t hot; /* routes followed to a replica other than their backend */
};

void kvs_kr_defaults(struct kvs_kr_params *p, double balance);
/* A route map over pol's backends (pol->p.nbackends, all up); takes pol's
 * eviction hook. 0 or -errno. */
int kvs_kr_init(struct kvs_kr *kr, const struct kvs_kr_params *p, struct kvs_policy *pol);
/* Before pol is freed: it unhooks pol's eviction hook. */
void kvs_kr_free(struct kvs_kr *kr);

/*
 * The verdict for request r: load[b] is backend b's outstanding work in
 * tokens, outstanding[b] its requests (may be NULL without
 * max_outstanding), up[b] != 0 if it is up. Learns routes and counts the
 * placement; the caller charges d->charge to d->backend. Returns
 * d->backend.
 */
int kvs_kr_decide(struct kvs_kr *kr, const struct kvs_kr_req *r, const uint64_t *load,
		  const uint64_t *outstanding, const uint8_t *up, struct kvs_kr_decision *d);

/* The controller reads the kernel's report of d: the prompt's groups
 * (within the window) into d->backend's index, and the routes the kernel
 * learned from it marked there, to be withdrawn when the index evicts
 * them. */
void kvs_kr_report(struct kvs_kr *kr, const struct kvs_kr_req *r, const struct kvs_kr_decision *d);

/*
 * The controller's tick (and its refresh after each decision of its own):
 * the work limit becomes balance x the mean outstanding work of the up
 * backends, plus the larger of the typical charge (3/4 the old, 1/4 the
 * mean charge since the last refresh) and kernel_slack; none with one
 * backend up (gw_publish_limits).
 */
void kvs_kr_refresh(struct kvs_kr *kr, const uint64_t *load, const uint8_t *up);

/* Backend b left: its routes are stale from now on (route_gen). */
void kvs_kr_backend_left(struct kvs_kr *kr, uint32_t b);

/* The route map's entry for hash, without counting a use: 0 and *backend,
 * *depth set, or -1 if there is none. */
int kvs_kr_route(const struct kvs_kr *kr, uint64_t hash, uint32_t *backend, uint32_t *depth);
uint32_t kvs_kr_routes(const struct kvs_kr *kr);

#endif
