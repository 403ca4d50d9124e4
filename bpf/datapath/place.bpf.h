/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The placement rule (include/kvsplice/place.h) over the backends map, as
 * the verdict runs it: two bpf_loop passes over the slots, the state in
 * scratch the caller passes. Included by bpf/kvsplice.bpf.c and by
 * tests/bpf/place_probe.bpf.c, which runs this same code on inputs a unit
 * test writes (tests/unit/test_place.c); each declares, before including
 * it, the `backends` map.
 */
#ifndef KVSPLICE_PLACE_BPF_H
#define KVSPLICE_PLACE_BPF_H

#include "kvsplice/maps.h"
#include "kvsplice/place.h"

struct place_walk {
	__u64 key;
	__u64 only; /* the backends it may pick (bit b); ~0: all */
	__u64 bound, room_below;
	struct kvs_place_sum s; /* the eligible backends */
	struct kvs_place_pick p;
};

/* Whether a backend may be given a new prefix: up, and under its request
 * limit (the load bound is the placement's own). */
static __always_inline int may_place(const struct kvs_backend *be)
{
	return be->state == KVS_BE_UP &&
	       (be->max_outstanding == 0 || be->outstanding < be->max_outstanding);
}

/* may_place, among the backends the walk may pick. */
static __always_inline int may_place_in(const struct place_walk *pw, const struct kvs_backend *be,
					__u32 b)
{
	return may_place(be) && b < 64 && (pw->only >> b & 1);
}

/* bpf_loop's context must live on the stack: it carries the scratch. */
struct place_ctx {
	struct place_walk *pw;
};

static long place_sum(__u32 b, struct place_ctx *c)
{
	struct kvs_backend *be = bpf_map_lookup_elem(&backends, &b);

	if (!be)
		return 1;
	kvs_place_sum_add(&c->pw->s, may_place_in(c->pw, be, b), be->outstanding_work, be->placed);
	return 0;
}

static long place_pick(__u32 b, struct place_ctx *c)
{
	struct place_walk *pw = c->pw;
	struct kvs_backend *be = bpf_map_lookup_elem(&backends, &b);
	__u64 placed, d;

	if (!be)
		return 1;
	placed = be->placed;
	d = kvs_place_decay(placed, pw->s.n_ok);
	if (d)
		__sync_fetch_and_sub(&be->placed, d);
	kvs_place_consider(&pw->p, b, pw->key, be->place_seed, may_place_in(pw, be, b),
			   be->outstanding_work, placed - d, pw->bound, pw->room_below);
	return 0;
}

/* The backend include/kvsplice/place.h picks for key (spill: for a
 * holder's spill) among the backends in only (bit b; ~0: all), or -1. */
static __always_inline int place_pick_backend(struct place_walk *pw, __u64 key, int spill,
					      __u64 only)
{
	struct place_ctx c = { .pw = pw };

	pw->key = key;
	pw->only = only;
	kvs_place_sum_init(&pw->s);
	bpf_loop(KVS_MAX_BACKENDS, place_sum, &c, 0);
	pw->bound = kvs_place_bound(&pw->s);
	pw->room_below = kvs_place_room_below(&pw->s);
	kvs_place_pick_init(&pw->p);
	bpf_loop(KVS_MAX_BACKENDS, place_pick, &c, 0);
	return kvs_place_result(&pw->p, spill);
}

/* The replica set of a hot route (include/kvsplice/place.h, "Hot
 * prefixes"): one bpf_loop pass offering every eligible backend. */
struct hot_walk {
	struct kvs_hot_pick p;
	__u64 key;
	__u32 holder, pad;
};

struct hot_ctx {
	struct hot_walk *hw;
};

static long hot_offer(__u32 b, struct hot_ctx *c)
{
	struct hot_walk *hw = c->hw;
	struct kvs_backend *be = bpf_map_lookup_elem(&backends, &b);

	if (!be)
		return 1;
	if (may_place(be))
		kvs_hot_offer(&hw->p, b,
			      b == hw->holder ? ~0ULL : kvs_place_score(hw->key, be->place_seed));
	return 0;
}

/* The k replicas of the route hashed key whose backend is holder, as a
 * mask (bit b). */
static __always_inline __u64 hot_members(struct hot_walk *hw, __u64 key, __u32 holder, __u32 k)
{
	struct hot_ctx c = { .hw = hw };
	__u64 m = 0;
	__u32 i;

	hw->key = key;
	hw->holder = holder;
	kvs_hot_pick_init(&hw->p, k);
	bpf_loop(KVS_MAX_BACKENDS, hot_offer, &c, 0);
	KVS_UNROLL
	for (i = 0; i < KVS_HOT_MAX; i++)
		if (i < hw->p.n)
			m |= 1ULL << (hw->p.backend[i] & 63);
	return m;
}

#endif /* KVSPLICE_PLACE_BPF_H */
