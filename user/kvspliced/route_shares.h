/* SPDX-License-Identifier: MIT */
/*
 * Each tenant's share of the kernel's routes map (--tenant-routes): sized
 * so that the shares sum to less than the map holds, so its LRU never
 * evicts and one tenant's flood of new prompts cannot push out another's
 * routes; recounted on the tick, and a tenant near its share trimmed of its
 * least used routes so that its new prefixes keep being learnt
 * (docs/RUNBOOK.md, "Permissions and tenants").
 */
#ifndef KVS_GW_ROUTE_SHARES_H
#define KVS_GW_ROUTE_SHARES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvsplice/maps.h"

/* --tenant-routes auto: the map's room split evenly. */
#define GW_TENANT_ROUTES_AUTO UINT32_MAX
/* Entries left free per possible CPU: the kernel's LRU map keeps up to 128
 * free entries in each CPU's own list and evicts when the CPU it runs on
 * finds none in its list or the shared one, before the map is full (kernel
 * bpf_lru_list.c, LOCAL_FREE_TARGET); twice that, for the lists' slack. */
#define GW_ROUTES_RESERVE_PER_CPU 256

struct gw_shares {
	uint64_t per_tenant;	  /* each one's share; 0: no shares */
	bool applied;		  /* written into the map */
	uint64_t last_recount_ns; /* when shares are on */
	bool recount_soon;	  /* at the next tick: a share found full */
	uint64_t trimmed;	  /* routes trimmed since the last log line */
	uint64_t next_trim_log_ns;
	/* The routes map's entries as last counted (gw_routes_count), and
	 * when (0: never). */
	long routes;
	uint64_t routes_at_ns;
};

/* The share of each of n bound tenants and the unbound clients (entry 0)
 * in a map of capacity entries on ncpus possible CPUs: want (a number of
 * routes), or with GW_TENANT_ROUTES_AUTO the room split evenly; 0 (no
 * shares) when want is 0 or no tenant is bound. 0, or -ENOSPC when the
 * shares would not fit (*room says how many do). */
int gw_shares_size(uint32_t n, uint32_t want, uint64_t capacity, uint32_t ncpus, uint64_t *per,
		   uint64_t *room);

/* A route the recount may trim. */
struct gw_share_route {
	uint64_t hash;
	uint64_t hits;
	uint64_t installed_ns;
	uint32_t backend;
	uint32_t tenant;
};

/* Orders v[0..n) by tenant, each one's least useful first: never hit
 * before hit, then oldest first (a flood's routes, never followed, go before a tenant's working
 * set). */
void gw_shares_order(struct gw_share_route *v, size_t n);

struct gw;
/* The shares written into the map: by a fresh start before it serves (the
 * map is new: without them its first clients' routes would go in
 * unlimited); by a successor or a restart on its first tick, once the
 * hand-over is certain (the kernel keeps the old shares till then). */
void gw_shares_apply(struct gw *g);
/* On the tick: the shares written into the map if they are not yet, then the routes recounted every
 * 10 s, or each second while a tenant is near its share (that tenant
 * trimmed to three quarters of it) or while the map holds fewer routes
 * than the counts sum to (the LRU evicted some: their tenants' counts are
 * high). */
void gw_shares_tick(struct gw *g, uint64_t now);

/* A count of the routes map at most this old is not walked again. */
#define GW_ROUTES_COUNT_AGE_NS (10 * 1000000000ull)
/* The routes map's entries (or -errno) and when they were counted
 * (*at_ns): the metrics' gauge and kvsplicectl status. The kernel's count
 * where it has one (now); else a walk of the whole map (up to 262,144
 * entries: tens of ms of the controller's loop, scripts/bench-scrape.sh)
 * at most every GW_ROUTES_COUNT_AGE_NS, so that a scraper polling often
 * does not make the controller walk it each time; the shares' recount,
 * which walks it anyway, counts it too. */
long gw_routes_count(struct gw *g, uint64_t now, uint64_t *at_ns);

#endif
