// SPDX-License-Identifier: MIT
#include "route_shares.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "datapath.h"
#include "gw.h"
#include "log.h"

#define NS_PER_S 1000000000ull
#define RECOUNT_NS (10 * NS_PER_S)
#define NEAR_FULL_NS NS_PER_S
#define TRIM_LOG_NS (10 * NS_PER_S)

int gw_shares_size(uint32_t n, uint32_t want, uint64_t capacity, uint32_t ncpus, uint64_t *per,
		   uint64_t *room)
{
	uint64_t reserve = (uint64_t)GW_ROUTES_RESERVE_PER_CPU * (ncpus ? ncpus : 1);

	*room = capacity > reserve ? capacity - reserve : 0;
	*per = 0;
	if (!want || !n)
		return 0;
	if (want == GW_TENANT_ROUTES_AUTO) {
		*per = *room / (n + 1);
		return *per ? 0 : -ENOSPC;
	}
	if ((uint64_t)want * (n + 1) > *room)
		return -ENOSPC;
	*per = want;
	return 0;
}

static int order(const void *a, const void *b)
{
	const struct gw_share_route *x = a, *y = b;
	int hx = x->hits != 0, hy = y->hits != 0;

	if (x->tenant != y->tenant)
		return (x->tenant > y->tenant) - (x->tenant < y->tenant);
	if (hx != hy)
		return hx - hy;
	return (x->installed_ns > y->installed_ns) - (x->installed_ns < y->installed_ns);
}

void gw_shares_order(struct gw_share_route *v, size_t n)
{
	qsort(v, n, sizeof(*v), order);
}

/* Routes at which a share counts as near full: recounted each second and
 * trimmed. */
static uint64_t near_full_at(uint64_t share)
{
	return share - share / 16;
}

void gw_shares_apply(struct gw *g)
{
	struct gw_shares *s = &g->shares;

	for (uint32_t t = 0; t < KVS_MAX_TENANTS; t++) {
		uint64_t share = t <= g->tenants.n ? s->per_tenant : 0;
		struct kvs_route_share rs;

		kvs_dp_share_set(&g->dp, t, share);
		kvs_dp_share_read(&g->dp, t, &rs);
		if (!share) /* a former configuration's count, kept by nobody now */
			kvs_dp_share_adjust(&g->dp, t, -(int64_t)rs.routes);
	}
	s->applied = true;
	if (s->per_tenant)
		pr_info("event=route_shares tenants=%u share=%llu capacity=%u", g->tenants.n + 1,
			(unsigned long long)s->per_tenant, (unsigned)KVS_ROUTES_MAX);
}

struct recount {
	uint64_t walked[KVS_MAX_TENANTS];
	bool trim[KVS_MAX_TENANTS];
	struct gw_share_route *v;
	size_t n, cap;
	int err;
};

static void count_route(void *ctx, uint64_t hash, const struct kvs_route *r)
{
	struct recount *rc = ctx;
	uint32_t t = r->tenant < KVS_MAX_TENANTS ? r->tenant : 0;

	rc->walked[t]++;
	if (!rc->trim[t] || rc->err)
		return;
	if (rc->n == rc->cap) {
		size_t cap = rc->cap ? rc->cap * 2 : 4096;
		struct gw_share_route *v = realloc(rc->v, cap * sizeof(*v));

		if (!v) {
			rc->err = -ENOMEM;
			return;
		}
		rc->v = v;
		rc->cap = cap;
	}
	rc->v[rc->n++] = (struct gw_share_route){
		.hash = hash,
		.hits = r->hits,
		.installed_ns = r->installed_ns,
		.backend = r->backend,
		.tenant = t,
	};
}

/* Tenant t's least useful routes removed, down to keep (v ordered by
 * gw_shares_order: t's run starts at *at, which moves past it). How many. */
static uint64_t trim(struct gw *g, struct recount *rc, size_t *at, uint32_t t, uint64_t keep)
{
	uint64_t have = rc->walked[t], gone = 0;
	size_t i = *at;

	while (i < rc->n && rc->v[i].tenant < t)
		i++;
	for (; i < rc->n && rc->v[i].tenant == t; i++)
		if (have - gone > keep)
			gone += kvs_dp_del_route(&g->dp, rc->v[i].hash, rc->v[i].backend) == 0;
	*at = i;
	return gone;
}

static void recount(struct gw *g, uint64_t now)
{
	struct gw_shares *s = &g->shares;
	struct recount *rc = calloc(1, sizeof(*rc));
	uint64_t before[KVS_MAX_TENANTS];
	size_t at = 0;
	int err;

	if (!rc)
		return;
	for (uint32_t t = 0; t <= g->tenants.n; t++) {
		struct kvs_route_share rs;

		kvs_dp_share_read(&g->dp, t, &rs);
		before[t] = rs.routes;
		rc->trim[t] = rs.routes >= near_full_at(s->per_tenant);
	}
	err = kvs_dp_walk_routes(&g->dp, count_route, rc);
	if (err || rc->err) {
		pr_warn("event=route_recount_failed err=\"%s\"", strerror(-(err ? err : rc->err)));
		goto out;
	}
	s->routes = 0;
	for (uint32_t t = 0; t < KVS_MAX_TENANTS; t++)
		s->routes += (long)rc->walked[t];
	s->routes_at_ns = now;
	gw_shares_order(rc->v, rc->n);
	/* The count corrected by what the map holds: routes an LRU eviction
	 * or a race took without a word, installs counted twice. Relative to
	 * the count read before the walk, so what was added meanwhile stays. */
	for (uint32_t t = 0; t <= g->tenants.n; t++) {
		int64_t delta = (int64_t)rc->walked[t] - (int64_t)before[t];
		uint64_t gone;

		if (delta)
			pr_debug("event=route_share_recount tenant=%u counted=%llu found=%llu", t,
				 (unsigned long long)before[t], (unsigned long long)rc->walked[t]);
		kvs_dp_share_adjust(&g->dp, t, delta);
		if (rc->walked[t] < near_full_at(s->per_tenant))
			continue;
		if (!rc->trim[t]) { /* its count was low before the walk: none
				     * of its routes gathered; trimmed next tick */
			s->recount_soon = true;
			continue;
		}
		gone = trim(g, rc, &at, t, s->per_tenant - s->per_tenant / 4);
		kvs_dp_share_trimmed(&g->dp, t, gone);
		s->trimmed += gone;
		/* the metrics' count, as the map is after the trim */
		s->routes -= (long)gone;
	}
	if (s->trimmed && now >= s->next_trim_log_ns) {
		pr_info("event=routes_trimmed routes=%llu share=%llu hint=\"a tenant's routes "
			"reached its share: its least used were removed (metrics kvsplice_tenant_routes*, "
			"bpftool map dump pinned .../route_shares)\"",
			(unsigned long long)s->trimmed, (unsigned long long)s->per_tenant);
		s->trimmed = 0;
		s->next_trim_log_ns = now + TRIM_LOG_NS;
	}
out:
	free(rc->v);
	free(rc);
}

/*
 * Fewer routes in the map than the tenants' counts sum to: routes left it
 * without a word to their count, as the LRU's evictions do (it calls no
 * program, and an insert that evicts does not say what it evicted), so
 * only a walk can say whose they were. The sum is read before the
 * kernel's count of the map: an install in between raises the count, not
 * the sum, and is no false alarm. With shares on every route is counted
 * to a tenant, so the two agree but for such losses.
 */
static bool counts_high(struct gw *g)
{
	uint64_t sum = 0;
	long total;

	for (uint32_t t = 0; t <= g->tenants.n; t++) {
		struct kvs_route_share rs;

		kvs_dp_share_read(&g->dp, t, &rs);
		sum += rs.routes;
	}
	total = kvs_dp_kcount_routes(&g->dp);
	return total >= 0 && (uint64_t)total < sum;
}

static bool near_full(const struct gw *g)
{
	const struct gw_shares *s = &g->shares;

	for (uint32_t t = 0; t <= g->tenants.n; t++) {
		struct kvs_route_share rs;

		kvs_dp_share_read(&g->dp, t, &rs);
		if (rs.routes >= near_full_at(s->per_tenant))
			return true;
	}
	return false;
}

void gw_shares_tick(struct gw *g, uint64_t now)
{
	struct gw_shares *s = &g->shares;

	if (g->dp.in_memory || !g->dp.shares)
		return;
	if (!s->applied) {
		gw_shares_apply(g);
		if (s->per_tenant)
			recount(g, now); /* a predecessor's counts, or none */
		s->last_recount_ns = now;
		return;
	}
	if (!s->per_tenant)
		return;
	if (!s->recount_soon && now < s->last_recount_ns + RECOUNT_NS &&
	    (now < s->last_recount_ns + NEAR_FULL_NS || (!near_full(g) && !counts_high(g))))
		return;
	s->recount_soon = false;
	recount(g, now);
	s->last_recount_ns = now;
}

long gw_routes_count(struct gw *g, uint64_t now, uint64_t *at_ns)
{
	struct gw_shares *s = &g->shares;
	long n = kvs_dp_kcount_routes(&g->dp);

	if (n >= 0) {
		*at_ns = now;
		return n;
	}
	if (!s->routes_at_ns || now >= s->routes_at_ns + GW_ROUTES_COUNT_AGE_NS) {
		s->routes = kvs_dp_count_routes(&g->dp);
		s->routes_at_ns = now;
	}
	*at_ns = s->routes_at_ns;
	return s->routes;
}
