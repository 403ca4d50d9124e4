/* SPDX-License-Identifier: MIT */
/* What the data path's files share among themselves (not for the rest of
 * kvspliced: datapath.h is its interface). */
#ifndef KVS_DP_INT_H
#define KVS_DP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "datapath.h"

/* Calls fn for each batch of (key, value) pairs of the map fd, read in
 * batches of up to batch; 0 or -errno (fn's, or the read's). walk.c */
int kvs_dp_walk_batches(int fd, size_t ksz, size_t vsz, uint32_t batch,
			int (*fn)(void *ctx, const void *keys, const void *vals, uint32_t n),
			void *ctx);
/* Whether n more routes fit tenant's share (no share: always). shares.c */
bool kvs_dp_share_fits(const struct kvs_datapath *dp, uint32_t tenant, uint32_t n);

#endif
