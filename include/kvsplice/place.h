/* SPDX-License-Identifier: MIT */
/*
 * Where a prefix nobody is routed to goes: one header-only rule compiled by
 * clang into the verdict (bpf/kvsplice.bpf.c places every request it has
 * no route to follow) and by gcc into the routing policy (user/core/
 * policy.c, which the controller's userspace path and kvsplice-bench sim
 * run), so the simulator evaluates what the kernel does. tests/unit/
 * test_place.c runs both builds on the same inputs (the BPF one through
 * tests/bpf/place_probe.bpf.c, with the verdict's own placement code,
 * bpf/datapath/place.bpf.h) and compares.
 *
 * A new prefix goes to the least loaded backend; among equal loads (an
 * idle fleet's zeros), to one with room, then by rendezvous hashing:
 *
 *   - each backend's score for a key is fmix64(key ^ seed), seed the hash
 *     of its ADDR:PORT, so every gateway with the same backends and the
 *     same loads agrees without talking, and a backend joining or leaving
 *     moves only the keys it wins or held;
 *   - a backend has room while it has placed fewer than two new prefixes
 *     more than the least placed eligible backend, in a count that decays
 *     by 1/(64 x eligible) per placement: on an idle fleet, where every
 *     load is zero, new prefixes would otherwise fall as unevenly as the
 *     hash has it, hot ones too, to stay there (docs/EVALUATION.md,
 *     "Routing scenarios", has the variants' figures);
 *   - failing that (nobody eligible), none.
 *
 * Why the least loaded: a new prefix is cached nowhere, so its first token
 * waits for the outstanding work ahead of it plus its own prefill, and the
 * least outstanding work is the shortest wait. Until 2026-12-02 the hash
 * decided among the backends with room within the mean (twice bounded:
 * the fleet's mean, then the mean of those with room), and the least
 * loaded only when none had room (docs/EVALUATION.md, "The trace's p90:
 * the fallback's order"). So a new prefix went to any backend up to a
 * mean's worth of queue behind the least loaded, and past the least
 * loaded whenever that one had just been given two new prefixes more
 * than another: the work each backend computed spread unevenly (load by
 * work 1.09-1.14 x the mean on the public trace on 7 backends at 1-1.5x
 * the knee, 1.06-1.07 since), and the requests decoding beside the busiest backends' prefill
 * were kvsplice's end-to-end tail behind llm-d's (docs/EVALUATION.md,
 * "New prefixes to the least loaded"). The mean still bounds spills
 * (below) and what a holder keeps (--balance, the kernel's work_limit
 * for routes, kvs_place_keep).
 *
 * A spill (a prefix's holder past its bound) is not a new prefix: it goes
 * to the highest score within the load bound, room or not, and is not
 * counted. The score, not the least load: a prefix spills again while its
 * holder stays busy, and the rendezvous order sends its spills to the
 * same second backend, which then holds it (and the routes the spill
 * teaches point there); sent to the least loaded, each spill recomputed
 * the prefix somewhere new, and on the trace the hit rate fell by 2-5
 * points under heavy load and the fleet saturated sooner. A prefix hot enough to keep its holder past the bound is
 * replicated before it spills ("Hot prefixes", below): its requests are
 * placed among as many replicas as its rate needs, and counted.
 *
 * Everything is integer: the verifier takes no floating point, and both
 * builds must round alike. The decay is applied in the last pass, to
 * every slot's count (x - x / k is non-decreasing, so the least count
 * decays to the decayed least): the kernel does it with an atomic
 * subtraction, so a placement counted meanwhile on another CPU is never
 * lost, only decayed a step late.
 */
#ifndef KVSPLICE_PLACE_H
#define KVSPLICE_PLACE_H

#include <linux/types.h>

#include "kvsplice/hash.h"
#include "kvsplice/maps.h"

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* kvs_place_keep's balance is given in 1/KVS_PLACE_ONE (1.15 -> 1178). */
#define KVS_PLACE_ONE 1024
/* One placement in the decaying count (fixed point, 16 fraction bits). */
#define KVS_PLACE_UNIT (1ULL << 16)
/* A backend this many placements ahead of the least placed has no room. */
#define KVS_PLACE_AHEAD (2 * KVS_PLACE_UNIT)
/* The count decays by 1/(KVS_PLACE_DECAY x eligible backends) a placement. */
#define KVS_PLACE_DECAY 64

/* Pass 1: what the eligible backends add up to. */
struct kvs_place_sum {
	__u64 total; /* outstanding work, tokens */
	__u64 least; /* the least placement count */
	__u32 n_ok;  /* eligible backends */
	__u32 pad;
};

/* Pass 2: the candidates. */
struct kvs_place_pick {
	__u64 score[2]; /* a spill's: [0] in the load bound, [1] eligible */
	__s32 backend[2];
	/* a new prefix's: the least loaded, and its load, room and score */
	__s32 least;
	__u32 least_room;
	__u64 least_load, least_score;
};

static __always_inline void kvs_place_sum_init(struct kvs_place_sum *s)
{
	s->total = 0;
	s->least = ~0ULL;
	s->n_ok = 0;
	s->pad = 0;
}

static __always_inline void kvs_place_sum_add(struct kvs_place_sum *s, int ok, __u64 load,
					      __u64 placed)
{
	if (!ok)
		return;
	s->n_ok++;
	s->total += load;
	if (placed < s->least)
		s->least = placed;
}

/* The load a backend may have and still take the key: the mean, ceil((total
 * + 1) / n_ok). 0 when nobody is eligible. */
static __always_inline __u64 kvs_place_bound(const struct kvs_place_sum *s)
{
	if (!s->n_ok)
		return 0;
	return (s->total + 1 + s->n_ok - 1) / s->n_ok;
}

/* What one placement's decay takes off a count. */
static __always_inline __u64 kvs_place_decay(__u64 placed, __u32 n_ok)
{
	return n_ok ? placed / ((__u64)KVS_PLACE_DECAY * n_ok) : 0;
}

/* The room threshold: below it a (decayed) count has room. */
static __always_inline __u64 kvs_place_room_below(const struct kvs_place_sum *s)
{
	return s->least - kvs_place_decay(s->least, s->n_ok) + KVS_PLACE_AHEAD;
}

/* Backend b's score for key. */
static __always_inline __u64 kvs_place_score(__u64 key, __u64 seed)
{
	return kvs_fmix64(key ^ seed);
}

static __always_inline void kvs_place_pick_init(struct kvs_place_pick *p)
{
	int i;

	for (i = 0; i < 2; i++) {
		p->score[i] = 0;
		p->backend[i] = -1;
	}
	p->least = -1;
	p->least_room = 0;
	p->least_load = 0;
	p->least_score = 0;
}

/* Ties in score (equal seeds) go to the lower index: both builds scan up. */
static __always_inline void kvs_place_offer(struct kvs_place_pick *p, int level, __u32 b,
					    __u64 score)
{
	if (p->backend[level] < 0 || score > p->score[level]) {
		p->score[level] = score;
		p->backend[level] = (__s32)b;
	}
}

/* A new prefix: the least load, then room (recent placements), then the
 * highest score. */
static __always_inline void kvs_place_offer_least(struct kvs_place_pick *p, __u32 b, __u64 score,
						  __u64 load, __u32 room)
{
	if (p->least < 0 || load < p->least_load ||
	    (load == p->least_load &&
	     (room > p->least_room || (room == p->least_room && score > p->least_score)))) {
		p->least_score = score;
		p->least_room = room;
		p->least_load = load;
		p->least = (__s32)b;
	}
}

/*
 * Pass 2 for backend b, placed being its count after this placement's
 * decay. bound and room_below from kvs_place_bound and
 * kvs_place_room_below.
 */
static __always_inline void kvs_place_consider(struct kvs_place_pick *p, __u32 b, __u64 key,
					       __u64 seed, int ok, __u64 load, __u64 placed,
					       __u64 bound, __u64 room_below)
{
	__u64 score;

	if (!ok)
		return;
	score = kvs_place_score(key, seed);
	kvs_place_offer(p, 1, b, score);
	kvs_place_offer_least(p, b, score, load, placed < room_below);
	if (load + 1 > bound)
		return;
	kvs_place_offer(p, 0, b, score);
}

static __always_inline int kvs_place_result(const struct kvs_place_pick *p, int spill)
{
	if (!spill && p->least >= 0)
		return p->least;
	if (p->backend[0] >= 0)
		return p->backend[0];
	return p->backend[1];
}

/*
 * A route's backend over the kernel's bound for following routes (its
 * work_limit) keeps the request all the same when moving it would cost
 * more: while its load is within balance x the mean plus the request's
 * tokens (balance here the keep bound, --keep-balance, 2 by default:
 * wider than the work limit's, user/core/policy.h, KVS_POLICY_KEEP_BALANCE),
 * and its load plus weight x the tokens it would recompute is no
 * more than the alternative's (the placement's pick, believed to hold
 * nothing of the prompt). The controller's rule (user/core/policy.c,
 * est(b) = load(b) + weight x uncached(b)) reduced to the two backends the
 * kernel knows of: without it every holder over the bound spilled, and
 * conversations moved between backends at every burst.
 */
static __always_inline int kvs_place_keep(const struct kvs_place_sum *s, __u32 balance,
					  __u32 weight, __u64 tokens, __u64 hold_load,
					  __u64 hold_cached, __u64 alt_load)
{
	__u64 den = (__u64)s->n_ok * KVS_PLACE_ONE, bound, uncached;

	if (!s->n_ok)
		return 0;
	if (balance < KVS_PLACE_ONE)
		balance = KVS_PLACE_ONE;
	bound = (s->total * balance + den - 1) / den + tokens;
	if (hold_load > bound)
		return 0;
	uncached = tokens > hold_cached ? tokens - hold_cached : 0;
	return hold_load + weight * uncached <= alt_load + weight * tokens;
}

/*
 * The block depth whose hash places a prompt of n hashed blocks when the
 * client gave no cache key: its hinted prefix, else the deepest checkpoint
 * (the longest prefix the kernel can match next time), else its last
 * block; 0 for a prompt under one block (placed by the seed). Never the
 * first group alone: every prompt sharing a system prompt would go to one
 * backend.
 */
static __always_inline __u32 kvs_place_depth(__u32 hint_blocks, __u32 n)
{
	__u32 j, best = 0;

	if (hint_blocks && hint_blocks <= n)
		return hint_blocks;
	KVS_UNROLL
	for (j = 0; j < KVS_MAX_CHECKPOINTS; j++)
		if (kvs_checkpoint(j) <= n)
			best = kvs_checkpoint(j);
	return best ? best : n;
}

/*
 * Hot prefixes. A route matched by more work than one backend takes on
 * average is a hot prefix: left on its one holder it keeps that holder
 * over its bound while others idle (a shared system prompt: every new
 * conversation follows its route, and stays there for all its turns). So
 * every route counts the requests whose prompt matches it - the route
 * followed and every shallower checkpoint's route on the prompt's path,
 * so a system prompt counts every turn that shares it - in windows of
 * KVS_HOT_WINDOW_NS (the current window's count and the previous one's;
 * a window unseen for two windows is zero), and a request following it
 * goes to one of k replicas:
 *
 *   k = ceil(rate x charge / share)
 *
 * rate the route's requests per window (the sliding estimate: the
 * current count plus the part of the previous one still within a window
 * of now); charge this request's work (what its prefix's requests cost);
 * share the work one backend up has been taking per window, the fleet's
 * charged work in the same sliding window over the backends up, which the
 * controller and the kernel measure (kvs_hot_share). So k is how many
 * backends the prefix's work fills at the fleet's current load per
 * backend: 1 for all but a prefix bringing more than 1/n of the fleet's
 * work, whatever the load; at most KVS_HOT_MAX and the backends eligible.
 * And k is 1 unless the prefix is hot beyond load noise: unless the rate
 * less two standard deviations of a Poisson count still brings more than
 * one share (kvs_hot_replicas): two or three long prompts in a second do
 * not make a prefix hot.
 *
 * The replicas are the route's own backend and the k - 1 others with the
 * highest placement score for the route's hash (kvs_place_score, the
 * rendezvous order: the same set from every gateway, and it changes by
 * one backend as k does), among the backends that may take new work. The
 * request is placed among them by the rule above (kvs_place_choose, on
 * its own placement key, counted as a placement: the least loaded
 * replica), and the routes it teaches name that replica, so a
 * conversation that began there stays. A replica past the work limit
 * spills as any route's backend does. A cold prefix (k = 1) follows its
 * route as before: nothing is sprayed.
 */
#define KVS_HOT_WINDOW_NS 1000000000ULL
#define KVS_HOT_WINDOW_US (KVS_HOT_WINDOW_NS / 1000)
#define KVS_HOT_FP 256 /* request counts in 1/256ths */
#define KVS_HOT_MAX 16 /* replicas of one prefix at most */

/* A request matches the route: counted in its window (at: the window's
 * start, ns; 0 for a route never counted). */
static __always_inline void kvs_hot_count(__u64 *at, __u32 *cur, __u32 *prev, __u64 now)
{
	__u64 el = now > *at ? now - *at : 0;

	if (el >= KVS_HOT_WINDOW_NS) {
		*prev = el < 2 * KVS_HOT_WINDOW_NS ? *cur : 0;
		*cur = 0;
		*at = el < 2 * KVS_HOT_WINDOW_NS ? *at + KVS_HOT_WINDOW_NS : now;
	}
	if (*cur < 0xffffffffu)
		*cur += 1;
}

/* The route's rate after kvs_hot_count, in requests per window, in
 * 1/KVS_HOT_FP: the current window's count and the part of the previous
 * one's still within a window of now. */
static __always_inline __u64 kvs_hot_rate(__u64 at, __u32 cur, __u32 prev, __u64 now)
{
	__u64 el = now > at ? (now - at) / 1000 : 0;

	if (el > KVS_HOT_WINDOW_US)
		el = KVS_HOT_WINDOW_US;
	return (__u64)cur * KVS_HOT_FP +
	       (__u64)prev * KVS_HOT_FP * (KVS_HOT_WINDOW_US - el) / KVS_HOT_WINDOW_US;
}

/*
 * Replicas a route at rate (kvs_hot_rate) needs for requests of charge
 * tokens, a backend taking share tokens a window: 1 when nothing is
 * known, and 1 unless the prefix is hot beyond load noise: unless even
 * the rate less two standard deviations of a Poisson count (2 sqrt(n):
 * the rate it has at least, with 97.7% confidence) brings more than one
 * share. Under 4 requests a window (a burst of two or three, a single long
 * prompt) is never hot. Then k = ceil(rate x charge / share).
 */
static __always_inline __u32 kvs_hot_replicas(__u64 rate, __u64 charge, __u64 share, __u32 n_ok)
{
	__u64 den = share * KVS_HOT_FP, t, x, k;

	if (!share || !charge || n_ok < 2)
		return 1;
	/* x - 2 sqrt(x FP) > t, t the rate that brings one share, without a
	 * square root (its loop made the verifier's work explode): x > t and
	 * (x - t)^2 > 4 x FP; x capped so the square fits (far past hot). */
	t = den / charge;
	x = rate < (1ULL << 30) ? rate : (1ULL << 30);
	if (x <= t || (x - t) * (x - t) <= 4 * x * KVS_HOT_FP)
		return 1;
	k = (rate * charge + den - 1) / den;
	if (k > n_ok)
		k = n_ok;
	if (k > KVS_HOT_MAX)
		k = KVS_HOT_MAX;
	return k ? (__u32)k : 1;
}

/*
 * share: the fleet's charged work in windows as a route counts its
 * requests (the current window's and the part of the previous one's still
 * within a window of now), over the backends up. The controller rolls the
 * windows on its tick (kvs_hot_roll: where the window began, the fleet's
 * charged work then, and in the previous window) and publishes them; the
 * kernel adds the work charged since, at the request (kvs_hot_share), so
 * the share is as current as the route's count: measured on the tick
 * alone it lagged a burst after a lull by up to a tick, and every prefix
 * of the burst looked hot.
 */
static __always_inline void kvs_hot_roll(struct kvs_hot_fleet *f, __u64 charged, __u64 now)
{
	__u64 el = now > f->at ? now - f->at : 0;

	if (!f->at || el >= 2 * KVS_HOT_WINDOW_NS || charged < f->base) {
		f->at = now ? now : 1;
		f->base = charged;
		f->prev = 0;
	} else if (el >= KVS_HOT_WINDOW_NS) {
		f->prev = charged - f->base;
		f->base = charged;
		f->at += KVS_HOT_WINDOW_NS;
	}
}

/* The work a backend up takes a window, charged the fleet's charged
 * tokens now; 0 when nothing is known. */
static __always_inline __u64 kvs_hot_share(const struct kvs_hot_fleet *f, __u64 charged, __u64 now,
					   __u32 nup)
{
	__u64 el = now > f->at ? (now - f->at) / 1000 : 0, n;

	if (!f->at || !nup)
		return 0;
	if (el > KVS_HOT_WINDOW_US)
		el = KVS_HOT_WINDOW_US;
	n = (charged > f->base ? charged - f->base : 0) +
	    f->prev * (KVS_HOT_WINDOW_US - el) / KVS_HOT_WINDOW_US;
	return n / nup;
}

/* The replica set being chosen: the k highest scores offered, unsorted. */
struct kvs_hot_pick {
	__u64 score[KVS_HOT_MAX];
	__s32 backend[KVS_HOT_MAX];
	__u32 n, k, least; /* members; wanted; the lowest score's index */
};

static __always_inline void kvs_hot_pick_init(struct kvs_hot_pick *p, __u32 k)
{
	p->n = 0;
	p->k = k < KVS_HOT_MAX ? k : KVS_HOT_MAX;
	p->least = 0;
}

/* Backend b (eligible) with score for the route's hash: a member while its
 * score is among the k highest. The route's own backend is offered with
 * score ~0. */
static __always_inline void kvs_hot_offer(struct kvs_hot_pick *p, __u32 b, __u64 score)
{
	__u32 i, at;

	if (p->n < p->k) {
		at = p->n++;
	} else {
		if (!p->n || score <= p->score[p->least & (KVS_HOT_MAX - 1)])
			return;
		at = p->least;
	}
	at &= KVS_HOT_MAX - 1;
	p->score[at] = score;
	p->backend[at] = (__s32)b;
	p->least = 0;
	KVS_UNROLL
	for (i = 1; i < KVS_HOT_MAX; i++)
		if (i < p->n && p->score[i] < p->score[p->least & (KVS_HOT_MAX - 1)])
			p->least = i;
}

#ifndef __bpf__
#include <stdint.h>

/* One backend as the rule sees it. */
struct kvs_place_be {
	uint64_t seed;	 /* kvs_str_hash of its ADDR:PORT */
	uint64_t load;	 /* outstanding work, tokens */
	uint64_t placed; /* decaying placement count (KVS_PLACE_UNIT each) */
	uint32_t ok;	 /* may take new work */
	uint32_t pad;
};

/*
 * Userspace: the backend for key among be[0..n) (spill: for a holder's
 * spill, room not asked), or -1 if none is eligible, decaying every count
 * as the kernel's pass does; *s gets pass 1's sums (for kvs_place_keep).
 * The placement is not counted: the caller adds KVS_PLACE_UNIT to the
 * backend it sends a new prefix to (a spill, or a holder kept by
 * kvs_place_keep, is not counted).
 */
static inline int kvs_place_choose(uint64_t key, struct kvs_place_be *be, uint32_t n, int spill,
				   struct kvs_place_sum *s)
{
	struct kvs_place_pick p;
	uint64_t bound, room;
	uint32_t b;

	kvs_place_sum_init(s);
	for (b = 0; b < n; b++)
		kvs_place_sum_add(s, be[b].ok, be[b].load, be[b].placed);
	bound = kvs_place_bound(s);
	room = kvs_place_room_below(s);
	kvs_place_pick_init(&p);
	for (b = 0; b < n; b++) {
		be[b].placed -= kvs_place_decay(be[b].placed, s->n_ok);
		kvs_place_consider(&p, b, key, be[b].seed, be[b].ok, be[b].load, be[b].placed,
				   bound, room);
	}
	return kvs_place_result(&p, spill);
}

/* Userspace: a hot route's replica set (key its hash, holder its backend)
 * among be[0..n) for k replicas, as a mask (hot_members in the kernel). */
static inline uint64_t kvs_hot_members(uint64_t key, uint32_t holder, const struct kvs_place_be *be,
				       uint32_t n, uint32_t k)
{
	struct kvs_hot_pick p;
	uint64_t m = 0;
	uint32_t b;

	kvs_hot_pick_init(&p, k);
	for (b = 0; b < n; b++)
		if (be[b].ok)
			kvs_hot_offer(&p, b,
				      b == holder ? ~0ULL : kvs_place_score(key, be[b].seed));
	for (b = 0; b < p.n; b++)
		m |= 1ULL << p.backend[b];
	return m;
}

/* kvs_place_choose, and the placement counted, as for a new prefix. */
static inline int kvs_place(uint64_t key, struct kvs_place_be *be, uint32_t n)
{
	struct kvs_place_sum s;
	int pick = kvs_place_choose(key, be, n, 0, &s);

	if (pick >= 0)
		be[pick].placed += KVS_PLACE_UNIT;
	return pick;
}
#endif

#endif /* KVSPLICE_PLACE_H */
