// SPDX-License-Identifier: GPL-2.0
/*
 * The routes map's entries as the kernel counts them: Linux 6.6 and later
 * count every hash map's elements, an LRU's evictions included, and the
 * kfunc bpf_map_sum_elem_count reads the count. The controller runs this
 * (BPF_PROG_RUN) instead of walking the map (tens of ms when full). An
 * object of its own, on the gateway's pinned routes map (the loader
 * reuses its descriptor): a kernel without the kfunc refuses this object
 * alone, and the controller walks the map as before.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "kvsplice/maps.h"

char LICENSE[] SEC("license") = "GPL";

/* The kernel's type, opaque here; a definition, not a declaration: libbpf
 * matches a kfunc's pointer arguments by kind, and a forward declaration
 * is not a struct. */
struct bpf_map {
	int opaque;
} __attribute__((preserve_access_index));

extern __s64 bpf_map_sum_elem_count(const struct bpf_map *map) __ksym;

/* As bpf/datapath/maps.bpf.h's; the loader gives it the pinned map's fd. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, KVS_ROUTES_MAX);
	__type(key, __u64);
	__type(value, struct kvs_route);
} routes SEC(".maps");

SEC("syscall")
int kvs_count_routes(struct kvs_route_count *c)
{
	c->routes = bpf_map_sum_elem_count((const struct bpf_map *)&routes);
	return 0;
}
