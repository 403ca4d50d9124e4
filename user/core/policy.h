/* SPDX-License-Identifier: MIT */
/*
 * The routing policy: which backend a request goes to. Pure (no I/O), so the
 * gateway, the simulator and the discrete-event simulator run the same code.
 *
 * It keeps, per backend, an index of the prompt blocks that backend is
 * believed to hold, bounded by the backend's KV capacity and evicted like the
 * backend evicts (LRU, a prompt's tail before its head), at the grain of
 * KVS_INDEX_GROUP blocks (64 tokens): one entry, the hash of the group's last
 * block, per group. A match is then known to within 3 blocks of the real
 * one, which moves no decision between prefixes thousands of tokens long,
 * and admitting a prompt costs a quarter of the lookups (the slow path's
 * largest cost: docs/EVALUATION.md, "Slow path"). For a request it
 * estimates, per backend, the work before this request's first token:
 *
 *     est(b) = load(b) + w x tokens of the prompt b does not hold
 *
 * where load is outstanding work in tokens (prefill still to do, plus decode
 * occupancy), and w (recompute_weight, default 16) charges recomputation
 * far above waiting: a recomputed token is work the fleet would not
 * otherwise do and a copy of the prefix that takes cache from others, while
 * a batching backend works through queued tokens concurrently. A low w
 * moves conversations between backends over load noise and spills hot
 * contexts until the copies crowd the cache (the figures for w = 1 to 16:
 * docs/EVALUATION.md, "The fleet in virtual time"). It picks the lowest
 * estimate, under a load bound (no backend above `balance` x the mean). So
 * the backend with the longest cached prefix wins unless it is loaded by
 * more than the prefix is worth; ties go to the less loaded; a hot prefix
 * spills to a second backend that then holds it too (affinity kept, not
 * discarded); a prefix that covers little of the prompt (a system prompt
 * everyone shares) does not pull traffic to its holder; and a prefix nobody
 * holds (or only its shared part) is placed by include/kvsplice/place.h,
 * the rule the kernel applies to every request it has no route for, so
 * several gateways agree and the simulator evaluates what the kernel does.
 */
#ifndef KVS_POLICY_H
#define KVS_POLICY_H

#include <stdint.h>

#include "kvsplice/hash.h"
#include "kvsplice/maps.h"
#include "kvsplice/place.h"
#include "hot_table.h"
#include "prefix_cache.h"

struct kvs_policy_params {
	uint32_t nbackends;
	uint32_t index_blocks;	/* per-backend index capacity (blocks) */
	double balance;		/* load bound: at most balance x mean after the pick */
	double keep_balance;	/* a holder's own bound (KVS_POLICY_KEEP_BALANCE) */
	double min_match_share; /* a cached prefix below this share of the prompt is not decisive */
	double recompute_weight; /* cost of a recomputed token vs a queued one */
	int hot;		 /* replicate hot prefixes (kvs_policy_observe) */
};

#define KVS_POLICY_BALANCE 1.15
/*
 * How far past the mean a route's backend keeps a request when moving it
 * would cost more (include/kvsplice/place.h, kvs_place_keep): the kernel
 * follows a route within `balance` x the mean (its work limit); past that,
 * the holder keeps the request while its load is within KEEP_BALANCE x the
 * mean plus the request and the recomputation elsewhere would cost more
 * than the wait. At `balance` (1.15, as until 2026-12-02) the spills it
 * forced were most of the hit rate kvsplice lost to llm-d on the public
 * trace, and on 7 and 16 backends most of its p90 gap under heavy load;
 * at 2 they are few, and unbounded the holders' queues cost p99
 * (docs/EVALUATION.md, "The keep bound"). The controller's decisions
 * (kvs_policy_decide) give the backends with the longest cached prefix
 * the same bound (docs/EVALUATION.md, "The controller's keep bound").
 */
#define KVS_POLICY_KEEP_BALANCE 2.0
/* A backend's KV capacity when the operator gives none: ~1.3 M tokens, an
 * 8xH100 instance serving Llama-3.1-70B (docs/EVALUATION.md, "The fleet in
 * virtual time"). */
#define KVS_POLICY_INDEX_BLOCKS 81250
/* The controller indexes every block of prompts up to 1 MiB (the default
 * maximum frame), not only the kernel's window. */
#define KVS_POLICY_MAX_BLOCKS 16384
#define KVS_POLICY_MIN_MATCH_SHARE 0.3
#define KVS_POLICY_RECOMPUTE_WEIGHT 16.0 /* see above */
/* Prefixes whose rate the controller tracks (hot_table.h): 24 bytes each,
 * 768 KiB; a hot prefix keeps its slot. */
#define KVS_POLICY_HOT_SLOTS 32768

enum kvs_reason {
	KVS_R_NONE = 0, /* no backend eligible */
	KVS_R_PREFIX,	/* longest cached prefix (or a near tie, by load) */
	KVS_R_SPILL,	/* a holder was too loaded: a second backend takes it */
	KVS_R_SHARED,	/* only a short shared prefix is cached: placed as new */
	KVS_R_COLD,	/* nobody holds it: placed (kvsplice/place.h) */
	KVS_R_HOT,	/* a hot prefix: placed among its replicas */
};

struct kvs_decision {
	int backend;		/* -1 when none is eligible */
	uint32_t cached_blocks; /* blocks the chosen backend is believed to hold */
	uint32_t best_blocks;	/* the longest cached prefix on any backend */
	enum kvs_reason reason;
};

/* Told when a backend's index evicts a block marked with kvs_policy_mark. */
typedef void (*kvs_policy_evict_fn)(void *ctx, uint32_t backend, uint64_t hash);

struct kvs_policy;

struct kvs_policy_hook {
	struct kvs_policy *pol;
	uint32_t backend;
};

struct kvs_policy {
	struct kvs_policy_params p;
	struct kvs_pcache index[KVS_MAX_BACKENDS];
	/* Each backend as the placement rule sees it: its seed (the hash of
	 * its name), and its decaying count of new prefixes placed. */
	struct kvs_place_be place[KVS_MAX_BACKENDS];
	uint32_t balance_fp;		   /* p.balance in 1/KVS_PLACE_ONE */
	uint64_t decisions[KVS_R_HOT + 1]; /* by reason */
	kvs_policy_evict_fn on_evict;
	void *evict_ctx;
	struct kvs_policy_hook hooks[KVS_MAX_BACKENDS];
	/* tokens the kernel's reports left out of their charge and the index
	 * held (kvs_policy_report), since the last correction */
	uint64_t known[KVS_MAX_BACKENDS];
	/* Each backend's capacity as its index is sized and corrected
	 * around, in index groups: p.index_blocks', or what the backend said
	 * of itself (kvs_policy_set_capacity). */
	uint32_t conf[KVS_MAX_BACKENDS];
	/* the group hashes of the prompt being decided (decide's scratch) */
	uint64_t group_h[KVS_POLICY_MAX_BLOCKS / KVS_INDEX_GROUP];
	/* Hot prefixes (kvs_policy_observe): each checkpoint prefix's
	 * requests per window, the fleet's charged work in windows, and what
	 * the caller last said of the time and of the work charged. */
	struct kvs_hot_table hot;
	struct kvs_hot_fleet hot_fleet;
	uint64_t now_ns, charged, expect_output;
	uint64_t hot_replicas; /* requests sent to a replica not the holder */
};

void kvs_policy_defaults(struct kvs_policy_params *p);
/* names[i] names backend i (its placement seed is kvs_str_hash(names[i]));
 * NULL for a slot with no backend. */
int kvs_policy_init(struct kvs_policy *pol, const struct kvs_policy_params *p,
		    const char *const *names);
/*
 * The backends changed at run time: names[0..n) as for kvs_policy_init, n
 * at least the current count (slots are never taken away, only emptied).
 * New slots get an empty index; seeds are re-read, so cold prefixes are
 * placed among the backends named now. 0 or -errno (then nothing changed).
 */
int kvs_policy_set_backends(struct kvs_policy *pol, const char *const *names, uint32_t n);
void kvs_policy_free(struct kvs_policy *pol);

/* A prompt to decide for. */
struct kvs_prompt {
	const uint64_t *h; /* its block hashes, h[0..n) */
	uint32_t n;
	uint32_t tokens;
	/* The hash that places it when nobody holds it (its hinted or
	 * deepest checkpoint prefix). */
	uint64_t place_key;
	/* The client's prefix hint (kvs_hint_blocks, 0: none): a cached
	 * prefix that covers it is decisive however short a part of the
	 * prompt, as the kernel follows a match that deep. */
	uint32_t hint_blocks;
};

/* The fleet as a decision sees it, each array indexed by backend. */
struct kvs_fleet_view {
	const uint64_t *load;	 /* outstanding work, in tokens */
	const uint8_t *eligible; /* != 0: may take work */
	/* NULL, or other evidence that a backend holds at least that many of
	 * the prompt's blocks (the gateway passes the kernel's routes, which
	 * learn from requests the controller never sees). */
	const uint32_t *known;
};

/* Decides for prompt p on fleet f, and records the prompt in the chosen
 * backend's index. */
void kvs_policy_decide(struct kvs_policy *pol, const struct kvs_prompt *p,
		       const struct kvs_fleet_view *f, struct kvs_decision *d);

/*
 * What hot prefixes need where the controller decides (include/kvsplice/
 * place.h, "Hot prefixes", the rule the kernel applies to the routes it
 * follows): the time (ns), the fleet's work charged so far (tokens, over
 * all time: the kernel's and the controller's), and the output a request
 * is charged for (kvs_expect_output). Called on the caller's tick; until
 * it is, and with p.hot 0, no prefix is hot. A prefix the request's
 * longest cached match ends in (its deepest checkpoint) that brings more
 * than one backend's share of the fleet's work, beyond Poisson noise, goes
 * to kvs_hot_replicas() replicas, its holder and the next in rendezvous
 * order, placed among them by the placement rule (reason KVS_R_HOT).
 * Every checkpoint prefix of a request's match counts its rate, so a
 * system prompt counts every turn that shares it.
 */
void kvs_policy_observe(struct kvs_policy *pol, uint64_t now_ns, uint64_t fleet_charged,
			uint64_t expect_output);

/* Longest prefix of h[0..n) that backend b is believed to hold, in blocks
 * (a multiple of KVS_INDEX_GROUP). Not const: it uses pol's scratch. */
uint32_t kvs_policy_cached(struct kvs_policy *pol, uint32_t b, const uint64_t *h, uint32_t n);

/*
 * Correct the index of backend b from what it reported over an interval
 * (docs/ARCHITECTURE.md, "The backends' reports correct the index"): of the
 * cached tokens the gateway `predicted`, `mispredicted` were not there;
 * `unexpected` were there and not predicted (kvs_unexpected_cached). More
 * than 5% of the prediction missing, beyond what b's load explains, means
 * the index believes b holds more than it does (a smaller cache than
 * configured, other gateways' traffic): it shrinks by half that excess,
 * evicting as the backend does. The load explains a share of misses up to
 * the squeeze, peak_work over the index's size (at most 1): a server
 * evicts cached prefixes, oldest first, to make room for its running
 * requests' KV, so that share of the index's oldest entries may be gone
 * without the index being too large, and it comes back as the load falls. Else more
 * than 1% of the hits unexpected means it forgot what b still holds (a
 * larger cache than configured): it grows by n/2 times that share (n
 * backends), at most a quarter a step. Between the two it holds. Bounded
 * to [configured / KVS_POLICY_FEEDBACK_SHRINK, configured x
 * KVS_POLICY_FEEDBACK_GROW], configured being what b said of itself if it
 * did (kvs_policy_set_capacity; the ceiling stays p.index_blocks').
 * Unexpected hits the index knew of (kvs_policy_report) do not count.
 * Acts only on evidence of at least a sixteenth of the index's size in
 * tokens (and KVS_POLICY_FEEDBACK_MIN): returns 1
 * when it did (the caller starts a new interval), 0 when the caller should
 * keep accumulating.
 */
#define KVS_POLICY_FEEDBACK_MIN 1024
/* A configuration three orders of magnitude too large is still corrected. */
#define KVS_POLICY_FEEDBACK_SHRINK 1024
/* Growth allocates (24 bytes an index entry, one per 64 tokens, and 16 to
 * 32 of hash table): a backend is believed to hold at most 4x what the
 * operator said, 5.2 M tokens at the default, about 4 MiB of index. */
#define KVS_POLICY_FEEDBACK_GROW 4
struct kvs_feedback {
	uint64_t predicted, mispredicted, unexpected; /* tokens */
	/* The most outstanding work (tokens, as the gateway charges it) seen
	 * on b during the interval, sampled each tick: kvs_policy_feedback
	 * reads it as the KV its running requests took from its cache. */
	uint64_t peak_work;
};
int kvs_policy_feedback(struct kvs_policy *pol, uint32_t b, const struct kvs_feedback *f);

/*
 * Backend b said its KV capacity: blocks 16-token blocks (its PONG,
 * KVS_LOAD_F_KV_BLOCKS); 0: it says nothing, p.index_blocks stands. Its
 * index takes that size at once, and the corrections above move it around
 * that size instead of p.index_blocks: a fleet of unlike servers needs no
 * size given, and none learnt from misses on the way. Never above
 * KVS_POLICY_FEEDBACK_GROW x p.index_blocks, the memory the operator
 * allowed an index (a backend cannot make the controller allocate more).
 * Returns 1 when the size changed, 0 when it was already that.
 */
int kvs_policy_set_capacity(struct kvs_policy *pol, uint32_t b, uint32_t blocks);

/*
 * Evictions the caller wants to hear of: after kvs_policy_mark(b, hash),
 * fn(ctx, b, hash) is called when backend b's index evicts that block, as
 * the backend would (the gateway withdraws the route it installed for it).
 */
void kvs_policy_on_evict(struct kvs_policy *pol, kvs_policy_evict_fn fn, void *ctx);
/* hash must end a group (a block count that is a multiple of
 * KVS_INDEX_GROUP): the index holds no other. */
void kvs_policy_mark(struct kvs_policy *pol, uint32_t b, uint64_t hash);

/* What the kernel reported sending to backend b: the prompt's group hashes
 * g[0..ng) (the hash of each KVS_INDEX_GROUP-th block) are recorded as
 * just used in b's index, as a decision of the policy's own would. */
void kvs_policy_record(struct kvs_policy *pol, uint32_t b, const uint64_t *g, uint32_t ng);
/*
 * The same, for a request the kernel charged as if pred_blocks of it were
 * cached (a followed route's depth; 0 when it placed it): what b's index
 * held of it beyond that, past the next checkpoint, is a hit the END will
 * report as unexpected although the index knew it (a shared system prompt
 * under a request placed as new, a cache key's route), and is taken off
 * the next correction's unexpected hits.
 */
void kvs_policy_report(struct kvs_policy *pol, uint32_t b, const uint64_t *g, uint32_t ng,
		       uint32_t pred_blocks);

/* The balance factor in the placement rule's fixed point. */
uint32_t kvs_policy_balance_fp(double balance);

/* Backend b's index capacity now (feedback shrinks it), in blocks. */
uint32_t kvs_policy_index_blocks(const struct kvs_policy *pol, uint32_t b);

/* Backend b went down (it comes back empty): forget what it held; the
 * size its reports taught stays. */
void kvs_policy_forget_backend(struct kvs_policy *pol, uint32_t b);
/* Backend b was removed: the same, and its slot's index back to the
 * configured size (what b's reports taught is not the next one's). */
void kvs_policy_remove_backend(struct kvs_policy *pol, uint32_t b);

const char *kvs_reason_name(enum kvs_reason r);

#endif
