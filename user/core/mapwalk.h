/* SPDX-License-Identifier: MIT */
/* A BPF map read in batches, by bucket (bpf_map_lookup_batch). */
#ifndef KVS_MAPWALK_H
#define KVS_MAPWALK_H

#include <stddef.h>
#include <stdint.h>

/*
 * Calls fn for each batch of (key, value) pairs of the map fd, read in
 * batches of up to batch; 0 or -errno (fn's, or the read's). A walk by
 * bpf_map_get_next_key starts over from the first key whenever the key it
 * stands on cannot be looked up, so a key that is listed but cannot be
 * looked up makes it loop for good (the routes map held such keys when a
 * nested verdict rewrote a key the kernel was inserting:
 * bpf/datapath/route.bpf.h, learn_routes); a walk by bucket ends.
 */
int kvs_map_walk_batches(int fd, size_t ksz, size_t vsz, uint32_t batch,
			 int (*fn)(void *ctx, const void *keys, const void *vals, uint32_t n),
			 void *ctx);

/* Every (key, value) pair of the map fd, walked the same way, into two
 * arrays the caller frees (*keys, *vals; NULL when empty or on error),
 * *n pairs. 0 or -errno. */
int kvs_map_read_all(int fd, size_t ksz, size_t vsz, void **keys, void **vals, size_t *n);

#endif
