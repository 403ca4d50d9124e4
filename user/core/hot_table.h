/* SPDX-License-Identifier: MIT */
/*
 * Request rates of prefixes where the controller decides (its userspace
 * path, `--kernel-place no`): the rule of include/kvsplice/place.h, "Hot
 * prefixes", needs each prefix's requests per window. The kernel keeps
 * that window in the prefix's route; the controller's index has no record
 * per prefix, so this table holds one per checkpoint hash, as the routes
 * do. Fixed size, allocated once: a prefix probes KVS_HOT_TABLE_PROBE
 * slots; a new one takes an empty slot, or one unseen for two windows
 * (its rate is 0), or else the one counting the fewest requests, so a hot
 * prefix keeps its slot against a stream of cold ones. Pure: the caller
 * gives the time.
 */
#ifndef KVS_HOT_TABLE_H
#define KVS_HOT_TABLE_H

#include <linux/types.h>
#include <stdint.h>

#define KVS_HOT_TABLE_PROBE 8

struct kvs_hot_entry {
	uint64_t hash;
	__u64 at; /* its window's start, ns; 0: an empty slot */
	__u32 cur, prev;
};

struct kvs_hot_table {
	struct kvs_hot_entry *e;
	uint32_t mask;	   /* slots - 1 (a power of two) */
	uint64_t replaced; /* prefixes that took a live slot */
};

/* slots: rounded up to a power of two, at least KVS_HOT_TABLE_PROBE.
 * 0 or -ENOMEM. */
int kvs_hot_table_init(struct kvs_hot_table *t, uint32_t slots);
void kvs_hot_table_free(struct kvs_hot_table *t);
/* A request matches the prefix whose hash is hash, at now (ns, not 0). */
void kvs_hot_table_count(struct kvs_hot_table *t, uint64_t hash, uint64_t now);
/* Its rate (kvs_hot_rate: requests per window in 1/KVS_HOT_FP); 0 for a
 * prefix the table does not hold. */
uint64_t kvs_hot_table_rate(const struct kvs_hot_table *t, uint64_t hash, uint64_t now);

#endif
