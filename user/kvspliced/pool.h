/* SPDX-License-Identifier: MIT */
/*
 * The kernel path's pool of connections per backend, brought to --pool
 * while the backend serves: after a take-over whose configuration changed
 * --pool (an upgrade), the successor goes on with the slots it was handed
 * and opens the missing ones, or retires the surplus ones, without failing
 * a request.
 */
#ifndef KVS_GW_POOL_H
#define KVS_GW_POOL_H

#include <stdlib.h>

#include "gw.h"

/* After a take-over's adoption: each backend's pool_n is the pool the
 * kernel uses now (the map's pool_size, as far as its slots were handed
 * over), not --pool: published as it is, so no request goes to a slot
 * that has no connection. */
void gw_pool_adopted(struct gw *g);
/* On the tick: each backend that is up, with a pool other than --pool,
 * moved towards it (slots opened and probed, then published; or fewer
 * published at once, and the surplus connections closed once every
 * request that may be on them has ended). */
void gw_pool_tick(struct gw *g, uint64_t now);
/* Forgets b's retirement in progress (its connections are closed).
 * Inline: kpath.c closes connections and pool.c opens them through
 * kpath.c, so a call from there would make the two depend on each other. */
static inline void gw_pool_forget(struct gw_backend *be)
{
	free(be->retire_keys);
	be->retire_keys = NULL;
	be->nretire = 0;
	be->retire_phase = 0;
	be->retire_warned = false;
}

#endif
