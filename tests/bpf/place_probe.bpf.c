// SPDX-License-Identifier: GPL-2.0
/*
 * The verdict's placement code (bpf/datapath/place.bpf.h), run on a backends map that
 * tests/unit/test_place.c fills, through BPF_PROG_RUN: so the test compares
 * the clang-BPF build of include/kvsplice/place.h, as the kernel runs it,
 * with the gcc build userspace runs.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "kvsplice/maps.h"
#include "kvsplice/place.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KVS_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct kvs_backend);
} backends SEC(".maps");

#include "place.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct place_walk);
} walk SEC(".maps");

struct probe_args {
	__u64 key;
	__u32 spill;
	__u32 pad;
};

/* Places key as place_request() does (the pick, then the count of a new
 * prefix), returns the backend or -1. */
SEC("syscall")
int place_probe(struct probe_args *a)
{
	__u32 zero = 0, b;
	struct place_walk *pw = bpf_map_lookup_elem(&walk, &zero);
	struct kvs_backend *be;
	int rb;

	if (!pw)
		return -2;
	rb = place_pick_backend(pw, a->key, a->spill, ~0ULL);
	if (rb < 0 || rb >= KVS_MAX_BACKENDS)
		return -1;
	b = rb;
	be = bpf_map_lookup_elem(&backends, &b);
	if (be && !a->spill)
		__sync_fetch_and_add(&be->placed, KVS_PLACE_UNIT);
	return rb;
}

/* The replica set of a hot route, as hot_route() computes it
 * (bpf/datapath/place.bpf.h, hot_members): the mask into hot_out. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hot_walk);
} hwalk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hot_out SEC(".maps");

struct hot_args {
	__u64 key;
	__u32 holder, k;
};

SEC("syscall")
int hot_probe(struct hot_args *a)
{
	__u32 zero = 0;
	struct hot_walk *hw = bpf_map_lookup_elem(&hwalk, &zero);
	__u64 *out = bpf_map_lookup_elem(&hot_out, &zero);

	if (!hw || !out)
		return -2;
	*out = hot_members(hw, a->key, a->holder, a->k);
	return 0;
}
