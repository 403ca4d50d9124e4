// SPDX-License-Identifier: MIT
/* Each tenant's count of routes against its share (route_shares, mmapped),
 * kept with the kernel's atomic adds. */
#include <bpf/bpf.h>
#include <string.h>

#include "datapath.h"
#include "datapath/dp_int.h"

/* Whether n more routes fit tenant's share (no share: always). */
bool kvs_dp_share_fits(const struct kvs_datapath *dp, uint32_t tenant, uint32_t n)
{
	const struct kvs_route_share *rs;
	uint64_t share;

	if (!dp->shares || tenant >= KVS_MAX_TENANTS)
		return true;
	rs = &dp->shares[tenant];
	share = __atomic_load_n(&rs->share, __ATOMIC_RELAXED);
	return !share || __atomic_load_n(&rs->routes, __ATOMIC_RELAXED) + n <= share;
}

/*
 * Route shares. Installs are counted before they are made: a count too
 * high refuses a little early, one too low could let the shares overflow
 * the map.
 */
bool kvs_dp_share_take(struct kvs_datapath *dp, uint32_t tenant, uint32_t n)
{
	struct kvs_route_share *rs;
	uint64_t share;

	if (!dp->shares || tenant >= KVS_MAX_TENANTS)
		return true;
	rs = &dp->shares[tenant];
	share = __atomic_load_n(&rs->share, __ATOMIC_RELAXED);
	if (!share)
		return true;
	if (__atomic_load_n(&rs->routes, __ATOMIC_RELAXED) + n > share) {
		__atomic_fetch_add(&rs->refused, 1, __ATOMIC_RELAXED);
		return false;
	}
	__atomic_fetch_add(&rs->routes, n, __ATOMIC_RELAXED);
	return true;
}

/*
 * n off a share's count, never below 0: the kernel takes routes off the
 * same count meanwhile (share_uncount), as do `kvsplicectl routes flush`
 * and the recount's correction, so a read and then a subtraction could
 * wrap it to ~2^64, and a share that full refuses every route of its
 * tenant, the kernel's and the controller's, until the next recount.
 */
static void share_sub(struct kvs_route_share *rs, uint64_t n)
{
	uint64_t cur = __atomic_load_n(&rs->routes, __ATOMIC_RELAXED), to;

	do
		to = cur > n ? cur - n : 0;
	while (!__atomic_compare_exchange_n(&rs->routes, &cur, to, false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED));
}

void kvs_dp_share_put(struct kvs_datapath *dp, uint32_t tenant, uint32_t n)
{
	struct kvs_route_share *rs;

	if (!dp->shares || tenant >= KVS_MAX_TENANTS)
		return;
	rs = &dp->shares[tenant];
	if (__atomic_load_n(&rs->share, __ATOMIC_RELAXED))
		share_sub(rs, n);
}

void kvs_dp_share_trimmed(struct kvs_datapath *dp, uint32_t tenant, uint64_t n)
{
	if (dp->shares && tenant < KVS_MAX_TENANTS && n)
		__atomic_fetch_add(&dp->shares[tenant].trimmed, n, __ATOMIC_RELAXED);
}

void kvs_dp_share_set(struct kvs_datapath *dp, uint32_t tenant, uint64_t share)
{
	if (dp->shares && tenant < KVS_MAX_TENANTS)
		__atomic_store_n(&dp->shares[tenant].share, share, __ATOMIC_RELAXED);
}

void kvs_dp_share_read(const struct kvs_datapath *dp, uint32_t tenant, struct kvs_route_share *rs)
{
	memset(rs, 0, sizeof(*rs));
	if (!dp->shares || tenant >= KVS_MAX_TENANTS)
		return;
	rs->routes = __atomic_load_n(&dp->shares[tenant].routes, __ATOMIC_RELAXED);
	rs->share = __atomic_load_n(&dp->shares[tenant].share, __ATOMIC_RELAXED);
	rs->refused = __atomic_load_n(&dp->shares[tenant].refused, __ATOMIC_RELAXED);
	rs->trimmed = __atomic_load_n(&dp->shares[tenant].trimmed, __ATOMIC_RELAXED);
}

void kvs_dp_share_adjust(struct kvs_datapath *dp, uint32_t tenant, int64_t delta)
{
	if (!dp->shares || tenant >= KVS_MAX_TENANTS || !delta)
		return;
	/* A recount's correction is relative to a count read before its walk
	 * of the map: what was removed meanwhile, and is not in the map, was
	 * also taken off by its remover, so a negative one may exceed the
	 * count now. */
	if (delta < 0)
		share_sub(&dp->shares[tenant], (uint64_t) - (delta + 1) + 1);
	else
		__atomic_fetch_add(&dp->shares[tenant].routes, (uint64_t)delta, __ATOMIC_RELAXED);
}
