/* SPDX-License-Identifier: MIT */
/* What the data path's files share among themselves (not for the rest of
 * kvspliced: datapath.h is its interface). */
#ifndef KVS_DP_INT_H
#define KVS_DP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "datapath.h"
#include "mapwalk.h"

/* Whether n more routes fit tenant's share (no share: always). shares.c */
bool kvs_dp_share_fits(const struct kvs_datapath *dp, uint32_t tenant, uint32_t n);

#endif
