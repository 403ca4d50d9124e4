/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The placement rule (include/kvsplice/place.h) over the backends map, as
 * the verdict runs it: three bpf_loop passes over the slots, the state in
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
	__u64 bound, room_below, room_bound;
	struct kvs_place_sum s;	 /* the eligible backends */
	struct kvs_place_sum rs; /* those with room for a new prefix */
	struct kvs_place_pick p;
};

/* Whether a backend may be given a new prefix: up, and under its request
 * limit (the load bound is the placement's own). */
static __always_inline int may_place(const struct kvs_backend *be)
{
	return be->state == KVS_BE_UP &&
	       (be->max_outstanding == 0 || be->outstanding < be->max_outstanding);
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
	kvs_place_sum_add(&c->pw->s, may_place(be), be->outstanding_work, be->placed);
	return 0;
}

static long place_room_sum(__u32 b, struct place_ctx *c)
{
	struct place_walk *pw = c->pw;
	struct kvs_backend *be = bpf_map_lookup_elem(&backends, &b);

	if (!be)
		return 1;
	kvs_place_sum_add(&pw->rs,
			  kvs_place_has_room(may_place(be), be->outstanding_work, be->placed,
					     pw->s.n_ok, pw->bound, pw->room_below),
			  be->outstanding_work, 0);
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
	kvs_place_consider(&pw->p, b, pw->key, be->place_seed, may_place(be), be->outstanding_work,
			   placed - d, pw->bound, pw->room_below, pw->room_bound);
	return 0;
}

/* The backend include/kvsplice/place.h picks for key (spill: for a
 * holder's spill), or -1. */
static __always_inline int place_pick_backend(struct place_walk *pw, __u64 key, int spill)
{
	struct place_ctx c = { .pw = pw };

	pw->key = key;
	kvs_place_sum_init(&pw->s);
	bpf_loop(KVS_MAX_BACKENDS, place_sum, &c, 0);
	pw->bound = kvs_place_bound(&pw->s);
	pw->room_below = kvs_place_room_below(&pw->s);
	kvs_place_sum_init(&pw->rs);
	bpf_loop(KVS_MAX_BACKENDS, place_room_sum, &c, 0);
	pw->room_bound = kvs_place_bound(&pw->rs);
	kvs_place_pick_init(&pw->p);
	bpf_loop(KVS_MAX_BACKENDS, place_pick, &c, 0);
	return kvs_place_result(&pw->p, spill);
}

#endif /* KVSPLICE_PLACE_BPF_H */
