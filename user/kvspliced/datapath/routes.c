// SPDX-License-Identifier: MIT
/* The routes map: installs (kvs_install, or here where it cannot run),
 * deletions, walks, counts, withdrawal and purge of a backend's routes. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "datapath.h"
#include "datapath/dp_int.h"
#include "kvsplice.skel.h" /* kvs_install, kvs_withdraw run from here */

static int count_batch(void *ctx, const void *keys, const void *vals, uint32_t n)
{
	(void)keys;
	(void)vals;
	*(long *)ctx += n;
	return 0;
}

long kvs_dp_kcount_routes(struct kvs_datapath *dp)
{
	if (dp->in_memory)
		return -EOPNOTSUPP;
	return kvs_route_count(&dp->count);
}

long kvs_dp_count_routes(struct kvs_datapath *dp)
{
	long n = 0;
	int err = kvs_map_walk_batches(dp->routes_fd, sizeof(__u64), sizeof(struct kvs_route), 4096,
				       count_batch, &n);

	return err ? err : n;
}

/* What the hash of route e has in the map now: KVS_INSTALL_NEW, or the
 * tenant whose share counts its route (*old: that route). */
static uint32_t route_was(struct kvs_datapath *dp, const struct kvs_install *e,
			  struct kvs_route *old)
{
	if (bpf_map_lookup_elem(dp->routes_fd, &e->hash, old))
		return KVS_INSTALL_NEW;
	return old->tenant < KVS_MAX_TENANTS ? old->tenant : 0;
}

/* kvs_install's work from here, where the program cannot run (a test's
 * map without it): each route read, then written with its counters. */
static void install_here(struct kvs_datapath *dp, struct kvs_install_batch *b)
{
	for (uint32_t i = 0; i < b->n; i++) {
		struct kvs_route old = { 0 }, r;

		b->e[i].was = route_was(dp, &b->e[i], &old);
		r = (struct kvs_route){
			.backend = b->backend,
			.depth_blocks = b->e[i].depth_blocks,
			.gen = b->gen,
			.tenant = b->tenant,
			.installed_ns = b->installed_ns,
			.hits = old.hits,
			.hot_at = old.hot_at,
			.hot_cur = old.hot_cur,
			.hot_prev = old.hot_prev,
			/* (0 in a new route: old is zeroed) */
			.replicas = old.backend == b->backend ? old.replicas : 0,
		};
		if (bpf_map_update_elem(dp->routes_fd, &b->e[i].hash, &r, BPF_ANY))
			b->e[i].was = KVS_INSTALL_FAILED;
	}
}

/*
 * Routes hashes[i] -> backend, through kvs_install (one system call): a
 * route the map holds keeps the kernel's counters (hits, the hot window),
 * so a hot route the controller re-decides does not forget its rate, nor
 * does trimming take a working-set route for an unused one. Reading each
 * route first from here cost a system call a route (2-3 us each, 11 a
 * decision), and a route the kernel learnt in between was overwritten.
 * Only routes new to the map, or moved from another tenant, count against
 * the tenant's share (a hash given twice counts once): all are counted
 * before, as if new, and what the program found is given back; near a
 * full share they are read first, so that routes the map holds, which
 * add nothing, are not refused.
 */
uint32_t kvs_dp_add_routes(struct kvs_datapath *dp, const uint64_t *hashes, const uint32_t *depths,
			   uint32_t n, uint32_t backend, uint32_t tenant)
{
	struct kvs_install_batch b = { 0 };
	bool taken[KVS_INSTALL_BATCH];
	struct timespec ts;
	uint32_t i, j, done = 0, fresh = 0;
	struct kvs_route old;

	_Static_assert(KVS_DP_MAX_ROUTE_BATCH <= KVS_INSTALL_BATCH, "one kvs_install a request");
	if (n > KVS_DP_MAX_ROUTE_BATCH)
		n = KVS_DP_MAX_ROUTE_BATCH;
	if (tenant >= KVS_MAX_TENANTS)
		tenant = 0;
	if (!n || dp->in_memory)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	b.backend = backend;
	b.gen = __atomic_load_n(&dp->backends[backend].route_gen, __ATOMIC_RELAXED);
	b.tenant = tenant;
	b.installed_ns = (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
	for (i = 0; i < n; i++) {
		for (j = 0; j < b.n && b.e[j].hash != hashes[i]; j++)
			;
		if (j == b.n) /* (a hint at a checkpoint's depth: the same route) */
			b.e[b.n++] = (struct kvs_install){ .hash = hashes[i],
							   .depth_blocks = depths[i] };
	}
	if (kvs_dp_share_fits(dp, tenant, b.n) && kvs_dp_share_take(dp, tenant, b.n)) {
		memset(taken, 1, sizeof(taken));
	} else {
		for (i = 0; i < b.n; i++) {
			taken[i] = route_was(dp, &b.e[i], &old) != tenant;
			fresh += taken[i];
		}
		if (fresh && !kvs_dp_share_take(dp, tenant, fresh))
			return 0;
	}
	if (dp->skel) {
		LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = &b, .ctx_size_in = sizeof(b));

		if (bpf_prog_test_run_opts(bpf_program__fd(dp->skel->progs.kvs_install), &run))
			install_here(dp, &b);
	} else {
		install_here(dp, &b);
	}
	/* The counts as the map turned out. */
	for (i = 0; i < b.n; i++) {
		uint32_t was = b.e[i].was;

		done += was != KVS_INSTALL_FAILED;
		if (was == KVS_INSTALL_FAILED || was == tenant) {
			if (taken[i])
				kvs_dp_share_put(dp, tenant, 1);
			continue;
		}
		if (was != KVS_INSTALL_NEW)
			kvs_dp_share_put(dp, was, 1);
		if (!taken[i])
			kvs_dp_share_adjust(dp, tenant, 1);
	}
	return done == b.n ? n : done;
}

int kvs_dp_del_route(struct kvs_datapath *dp, uint64_t hash, uint32_t b)
{
	struct kvs_route r;

	if (bpf_map_lookup_elem(dp->routes_fd, &hash, &r))
		return -errno;
	if (r.backend != b) /* re-pointed since: not ours to remove */
		return -ESRCH;
	if (bpf_map_delete_elem(dp->routes_fd, &hash))
		return -errno;
	kvs_dp_share_put(dp, r.tenant, 1);
	return 0;
}
struct route_walk {
	kvs_dp_route_fn fn;
	void *ctx;
};

static int walk_route_batch(void *ctx, const void *keys, const void *vals, uint32_t n)
{
	const struct kvs_route *v = vals;
	struct route_walk *w = ctx;

	for (uint32_t i = 0; i < n; i++)
		w->fn(w->ctx, ((const __u64 *)keys)[i], &v[i]);
	return 0;
}

int kvs_dp_walk_routes(struct kvs_datapath *dp, kvs_dp_route_fn fn, void *ctx)
{
	struct route_walk w = { fn, ctx };

	return kvs_map_walk_batches(dp->routes_fd, sizeof(__u64), sizeof(struct kvs_route), 4096,
				    walk_route_batch, &w);
}

uint32_t kvs_dp_del_routes(struct kvs_datapath *dp, struct kvs_withdraw_batch *b)
{
	LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = b, .ctx_size_in = sizeof(*b));
	uint32_t i, n = 0;

	if (!b->n || dp->in_memory)
		return 0;
	if (b->n > KVS_WITHDRAW_BATCH)
		b->n = KVS_WITHDRAW_BATCH;
	if (bpf_prog_test_run_opts(bpf_program__fd(dp->skel->progs.kvs_withdraw), &run) == 0)
		return run.retval;
	for (i = 0; i < b->n; i++) /* (the program would not run: one by one) */
		n += kvs_dp_del_route(dp, b->e[i].hash, b->e[i].backend) == 0;
	return n;
}

void kvs_dp_withdraw_routes(struct kvs_datapath *dp, uint32_t b)
{
	__atomic_fetch_add(&dp->backends[b].route_gen, 1, __ATOMIC_RELEASE);
}

/* kvs_dp_purge_routes' walk: b's void routes, withdrawn a batch at a time
 * (deleting what the walk has read does not disturb it). */
struct purge {
	struct kvs_datapath *dp;
	uint32_t b, gen;
	long n;
	struct kvs_withdraw_batch w;
};

static void purge_route(void *ctx, uint64_t hash, const struct kvs_route *r)
{
	struct purge *p = ctx;

	if (r->backend != p->b || r->gen == p->gen)
		return;
	p->w.e[p->w.n++] = (struct kvs_withdraw){ .hash = hash, .backend = p->b };
	if (p->w.n == KVS_WITHDRAW_BATCH) {
		p->n += kvs_dp_del_routes(p->dp, &p->w);
		p->w.n = 0;
	}
}

long kvs_dp_purge_routes(struct kvs_datapath *dp, uint32_t b)
{
	struct purge p = { .dp = dp, .b = b };
	int err;

	if (dp->in_memory || b >= KVS_MAX_BACKENDS)
		return 0;
	p.gen = __atomic_load_n(&dp->backends[b].route_gen, __ATOMIC_ACQUIRE);
	err = kvs_dp_walk_routes(dp, purge_route, &p);
	p.n += kvs_dp_del_routes(dp, &p.w);
	return err ? err : p.n;
}

int kvs_dp_route_current(const struct kvs_datapath *dp, const struct kvs_route *r)
{
	return r->backend < KVS_MAX_BACKENDS &&
	       r->gen == __atomic_load_n(&dp->backends[r->backend].route_gen, __ATOMIC_ACQUIRE);
}

int kvs_dp_get_route(struct kvs_datapath *dp, uint64_t hash, struct kvs_route *r)
{
	return bpf_map_lookup_elem(dp->routes_fd, &hash, r) ? -errno : 0;
}
