// SPDX-License-Identifier: MIT
/* The BPF data path: loaded, pinned, attached; its map operations. */
#include "datapath.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kvsplice.skel.h"
#include "kvsplice/hash.h"
#include "kvsplice/place.h"
#include "log.h"
#include "pins.h"

static size_t mmap_bytes(size_t bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (bytes + page - 1) / page * page;
}

static size_t backends_map_bytes(void)
{
	return mmap_bytes(sizeof(struct kvs_backend) * KVS_MAX_BACKENDS);
}

static size_t shares_map_bytes(void)
{
	return mmap_bytes(sizeof(struct kvs_route_share) * KVS_MAX_TENANTS);
}

static size_t ttft_map_bytes(void)
{
	return mmap_bytes(sizeof(struct kvs_ttft) * KVS_MAX_BACKENDS);
}

int kvs_dp_open(struct kvs_datapath *dp, const struct kvs_dp_opts *o)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = o->pin_dir);
	int err, sock_fd;
	long fs_type = 0;
	void *mem;

	memset(dp, 0, sizeof(*dp));
	dp->lock_fd = -1;
	snprintf(dp->pin_dir, sizeof(dp->pin_dir), "%s", o->pin_dir);

	err = kvs_bpffs_ensure();
	if (err) {
		pr_warn("event=bpffs_mount_failed err=\"%s\"", strerror(-err));
		return err;
	}
	err = kvs_pin_dir_fs(o->pin_dir, &fs_type);
	if (err == -ENOTSUP) {
		/* libbpf would fail to pin the first map, and the load with
		 * EINVAL, which says nothing of why. */
		pr_warn("event=pin_dir_not_bpffs dir=%s fs_type=0x%lx hint=\"maps can be pinned "
			"only on a bpf file system: choose a --pin-dir under /sys/fs/bpf, or "
			"mount one there first (mount -t bpf bpf DIR)\"",
			o->pin_dir, fs_type);
		return err;
	}
	dp->lock_fd = kvs_pin_lock_made(o->pin_dir, &dp->made_pin_dir);
	/* Taking over: the old controller lets go of the lock once it has
	 * handed everything over; wait for that, a little. */
	for (int i = 0; o->takeover && dp->lock_fd == -EBUSY && i < 100; i++) {
		usleep(50000);
		dp->lock_fd = kvs_pin_lock(o->pin_dir);
	}
	if (dp->lock_fd < 0) {
		err = dp->lock_fd;
		if (err == -EPERM)
			pr_warn("event=pin_dir_refused dir=%s hint=\"it is a symlink or belongs to "
				"another user; remove it or choose another --pin-dir\"",
				o->pin_dir);
		else
			pr_warn("event=pin_dir_locked dir=%s err=\"%s\" hint=\"another kvspliced "
				"runs with this --pin-dir\"",
				o->pin_dir, strerror(-err));
		return err;
	}
	/* We hold the lock, so pins left here belong to a run that is gone.
	 * Their routes name backends by index in that run's list: start clean.
	 * Unless we take over: then they are the live state we go on with
	 * (libbpf reuses every pinned map of the same definition). */
	if (!o->takeover)
		kvs_pin_clear(o->pin_dir);
	/* Taking over with another --pin-dir (changed with an upgrade): the
	 * sockets handed over are in the maps pinned at the old one, which
	 * this controller would never see. Refused: the old one carries on. */
	if (o->takeover) {
		char path[sizeof(dp->pin_dir) + 16];

		snprintf(path, sizeof(path), "%s/socks", o->pin_dir);
		if (access(path, F_OK)) {
			err = -ENOENT;
			pr_warn("event=takeover_refused reason=\"no maps pinned at %s\" "
				"hint=\"--pin-dir cannot change across an upgrade: restart "
				"instead\"",
				o->pin_dir);
			goto fail;
		}
	}

	dp->skel = kvsplice_bpf__open_opts(&oo);
	if (!dp->skel) {
		err = -errno;
		pr_warn("event=bpf_open_failed err=\"%s\"", strerror(-err));
		goto fail;
	}
	dp->skel->rodata->cfg_max_payload = o->max_payload;
	dp->skel->rodata->cfg_window_blocks = o->window_blocks;
	dp->skel->rodata->cfg_min_match_pct = o->min_match_pct;
	dp->skel->rodata->cfg_release_prefill_early = o->release_prefill_early;
	dp->skel->rodata->cfg_client_max_inflight = o->client_max_inflight;
	dp->skel->rodata->cfg_kernel_place = o->kernel_place;
	dp->skel->rodata->cfg_keep_balance = o->keep_balance_fp;
	dp->keep_balance_fp = o->keep_balance_fp;
	dp->skel->rodata->cfg_recompute_weight = o->recompute_weight;
	err = kvsplice_bpf__load(dp->skel);
	if (err) {
		pr_warn("event=bpf_load_failed err=\"%s\" hint=\"%s\"", strerror(-err),
			geteuid() ? "run as root (BPF and sockmap need it)" :
				    "capabilities dropped (CAP_BPF, CAP_NET_ADMIN), or a "
				    "kernel without BTF or sockmap: the libbpf lines above "
				    "say which");
		goto fail;
	}

	sock_fd = bpf_map__fd(dp->skel->maps.socks);
	dp->socks_fd = sock_fd;
	dp->conns_fd = bpf_map__fd(dp->skel->maps.conns);
	dp->routes_fd = bpf_map__fd(dp->skel->maps.routes);
	dp->ctl_fd = bpf_map__fd(dp->skel->maps.ctl_stats);
	dp->stats_fd = bpf_map__fd(dp->skel->maps.stats);
	dp->inflight_fd = bpf_map__fd(dp->skel->maps.inflight);
	dp->reports_fd = bpf_map__fd(dp->skel->maps.reports);
	dp->tenants_fd = bpf_map__fd(dp->skel->maps.tenants);

	mem = mmap(NULL, backends_map_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED,
		   bpf_map__fd(dp->skel->maps.backends), 0);
	if (mem == MAP_FAILED) {
		err = -errno;
		pr_warn("event=backends_mmap_failed err=\"%s\"", strerror(-err));
		goto fail;
	}
	dp->backends = mem;
	mem = mmap(NULL, shares_map_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED,
		   bpf_map__fd(dp->skel->maps.route_shares), 0);
	if (mem == MAP_FAILED) {
		err = -errno;
		pr_warn("event=route_shares_mmap_failed err=\"%s\"", strerror(-err));
		goto fail;
	}
	dp->shares = mem;
	mem = mmap(NULL, ttft_map_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED,
		   bpf_map__fd(dp->skel->maps.backend_ttft), 0);
	if (mem == MAP_FAILED) {
		err = -errno;
		pr_warn("event=backend_ttft_mmap_failed err=\"%s\"", strerror(-err));
		goto fail;
	}
	dp->ttft = mem;

	/* libbpf 1.1 has no bpf_program__attach_sockmap: attach to the map. */
	if (bpf_prog_attach(bpf_program__fd(dp->skel->progs.kvs_parser), sock_fd,
			    BPF_SK_SKB_STREAM_PARSER, 0) ||
	    bpf_prog_attach(bpf_program__fd(dp->skel->progs.kvs_verdict), sock_fd,
			    BPF_SK_SKB_STREAM_VERDICT, 0)) {
		err = -errno;
		pr_warn("event=bpf_attach_failed err=\"%s\"", strerror(-err));
		goto fail;
	}
	pr_info("event=datapath_loaded pin_dir=%s max_payload=%u window_blocks=%u min_match_pct=%u "
		"release_prefill=%s kernel_place=%s keep_balance=%.2f",
		o->pin_dir, o->max_payload, o->window_blocks, o->min_match_pct,
		o->release_prefill_early ? "first-token" : "end", o->kernel_place ? "yes" : "no",
		(double)o->keep_balance_fp / KVS_PLACE_ONE);
	/* The routes count's program, loaded now rather than at the first
	 * count: the descriptors it holds are the controller's from the
	 * start (a kernel without the count is logged, and walks later). */
	kvs_route_count_open(&dp->count, dp->routes_fd);
	return 0;
fail:
	kvs_dp_close(dp, !o->takeover);
	return err;
}

void kvs_dp_release_lock(struct kvs_datapath *dp)
{
	if (dp->lock_fd >= 0)
		close(dp->lock_fd);
	dp->lock_fd = -1;
}

int kvs_dp_relock(struct kvs_datapath *dp)
{
	dp->lock_fd = kvs_pin_lock(dp->pin_dir);
	return dp->lock_fd < 0 ? dp->lock_fd : 0;
}

int kvs_dp_open_memory(struct kvs_datapath *dp)
{
	memset(dp, 0, sizeof(*dp));
	dp->lock_fd = dp->socks_fd = dp->conns_fd = dp->routes_fd = -1;
	dp->ctl_fd = dp->stats_fd = dp->inflight_fd = dp->reports_fd = dp->tenants_fd = -1;
	dp->in_memory = true;
	dp->backends = calloc(KVS_MAX_BACKENDS, sizeof(*dp->backends));
	dp->shares = calloc(KVS_MAX_TENANTS, sizeof(*dp->shares));
	dp->ttft = calloc(KVS_MAX_BACKENDS, sizeof(*dp->ttft));
	if (!dp->backends || !dp->shares || !dp->ttft) {
		kvs_dp_close(dp, false);
		return -ENOMEM;
	}
	return 0;
}

void kvs_dp_close(struct kvs_datapath *dp, bool unpin)
{
	if (dp->in_memory) {
		free(dp->backends);
		free(dp->shares);
		free(dp->ttft);
		dp->backends = NULL;
		dp->shares = NULL;
		dp->ttft = NULL;
		return;
	}
	kvs_route_count_close(&dp->count);
	if (dp->backends)
		munmap(dp->backends, backends_map_bytes());
	if (dp->shares)
		munmap(dp->shares, shares_map_bytes());
	if (dp->ttft)
		munmap(dp->ttft, ttft_map_bytes());
	dp->backends = NULL;
	dp->shares = NULL;
	dp->ttft = NULL;
	/* Handed over: the programs stay attached and the maps pinned, for
	 * the controller that took over (it has attached its own already). */
	if (dp->handed_over && dp->skel) {
		kvsplice_bpf__destroy(dp->skel);
		dp->skel = NULL;
		unpin = false;
	}
	if (dp->skel) {
		bpf_prog_detach2(bpf_program__fd(dp->skel->progs.kvs_parser), dp->socks_fd,
				 BPF_SK_SKB_STREAM_PARSER);
		bpf_prog_detach2(bpf_program__fd(dp->skel->progs.kvs_verdict), dp->socks_fd,
				 BPF_SK_SKB_STREAM_VERDICT);
		kvsplice_bpf__destroy(dp->skel);
		dp->skel = NULL;
	}
	if (unpin && dp->pin_dir[0])
		kvs_pin_clear(dp->pin_dir);
	/* Ours, and still locked: no other controller pins there (one taking
	 * over waits for the lock, which a hand-over has let go of already).
	 * Left empty (unpinned, or a take-over refused), pin dirs would pile
	 * up; with pins left, rmdir leaves it. */
	if (dp->made_pin_dir && dp->lock_fd >= 0) {
		int err = kvs_pin_dir_remove(dp->pin_dir);

		if (err)
			pr_warn("event=pin_dir_not_removed dir=%s err=\"%s\"", dp->pin_dir,
				strerror(-err));
	}
	if (dp->lock_fd >= 0)
		close(dp->lock_fd);
	dp->lock_fd = -1;
}

int kvs_dp_add_sock(struct kvs_datapath *dp, int fd, uint64_t key, uint64_t cookie,
		    const struct kvs_conn *c)
{
	__u64 v = (__u64)fd;

	/* The role must be known before the first frame reaches the verdict. */
	if (bpf_map_update_elem(dp->conns_fd, &cookie, c, BPF_ANY))
		return -errno;
	if (bpf_map_update_elem(dp->socks_fd, &key, &v, BPF_ANY)) {
		int err = -errno;

		bpf_map_delete_elem(dp->conns_fd, &cookie);
		return err;
	}
	return 0;
}

void kvs_dp_del_sock(struct kvs_datapath *dp, uint64_t key, uint64_t cookie)
{
	bpf_map_delete_elem(dp->socks_fd, &key);
	bpf_map_delete_elem(dp->conns_fd, &cookie);
}

int kvs_dp_add_conn(struct kvs_datapath *dp, uint64_t cookie, const struct kvs_conn *c)
{
	return bpf_map_update_elem(dp->conns_fd, &cookie, c, BPF_ANY) ? -errno : 0;
}

int kvs_dp_client_bind(struct kvs_datapath *dp, uint64_t cookie, uint32_t limit, uint32_t tenant)
{
	struct kvs_conn c;

	if (bpf_map_lookup_elem(dp->conns_fd, &cookie, &c))
		return -errno;
	if (c.role != KVS_ROLE_CLIENT)
		return -EINVAL;
	if (c.limit == limit && c.tenant == tenant)
		return 0;
	c.limit = limit;
	c.tenant = tenant;
	return bpf_map_update_elem(dp->conns_fd, &cookie, &c, BPF_EXIST) ? -errno : 0;
}

void kvs_dp_del_conn(struct kvs_datapath *dp, uint64_t cookie)
{
	bpf_map_delete_elem(dp->conns_fd, &cookie);
}

void kvs_dp_set_backend(struct kvs_datapath *dp, uint32_t b, uint32_t state, uint32_t pool_size,
			uint32_t max_outstanding)
{
	struct kvs_backend *be = &dp->backends[b];

	/* Pool and limit before state: the kernel trusts them once it is UP. */
	__atomic_store_n(&be->pool_size, pool_size, __ATOMIC_RELAXED);
	__atomic_store_n(&be->max_outstanding, max_outstanding, __ATOMIC_RELAXED);
	__atomic_store_n(&be->state, state, __ATOMIC_RELEASE);
}

void kvs_dp_set_backend_addr(struct kvs_datapath *dp, uint32_t b, const struct kvs_endpoint *a)
{
	dp->backends[b].addr = *a;
}

void kvs_dp_set_report(struct kvs_datapath *dp, uint32_t b, const struct kvs_be_report *r)
{
	dp->backends[b].report = *r;
}

void kvs_dp_set_place_seed(struct kvs_datapath *dp, uint32_t b, uint64_t seed)
{
	__atomic_store_n(&dp->backends[b].place_seed, seed, __ATOMIC_RELAXED);
}

void kvs_dp_set_reason(struct kvs_datapath *dp, uint32_t b, const char *why)
{
	/* The kernel never reads it; a reader may see it half written. */
	snprintf(dp->backends[b].reason, sizeof(dp->backends[b].reason), "%s", why);
}

void kvs_dp_clear_backend(struct kvs_datapath *dp, uint32_t b)
{
	struct kvs_backend *be = &dp->backends[b];
	uint32_t gen = __atomic_load_n(&be->route_gen, __ATOMIC_ACQUIRE);

	__atomic_store_n(&be->state, KVS_BE_ABSENT, __ATOMIC_RELEASE);
	memset(be, 0, sizeof(*be));
	__atomic_store_n(&be->route_gen, gen + 1, __ATOMIC_RELEASE);
	/* A late END of the backend gone, counted meanwhile, may survive the
	 * clearing: one request in the next one's histogram. */
	kvs_dp_clear_ttft(dp, b);
}

void kvs_dp_clear_ttft(struct kvs_datapath *dp, uint32_t b)
{
	memset(&dp->ttft[b], 0, sizeof(dp->ttft[b]));
}

uint32_t kvs_dp_client_inflight(struct kvs_datapath *dp, uint64_t cookie)
{
	struct kvs_conn c;

	return bpf_map_lookup_elem(dp->conns_fd, &cookie, &c) ? 0 : c.inflight;
}

/* Calls fn for each batch of (key, value) pairs of the map, read in
 * batches of up to batch; 0 or -errno (fn's, or the read's). */
static int walk_batches(int fd, size_t ksz, size_t vsz, uint32_t batch,
			int (*fn)(void *ctx, const void *keys, const void *vals, uint32_t n),
			void *ctx)
{
	uint8_t *keys = malloc(ksz * batch), *vals = malloc(vsz * batch);
	uint8_t in[16], out[16]; /* batch cursors: a key's size suffices */
	bool first = true;
	int err = keys && vals ? 0 : -ENOMEM;

	while (!err) {
		__u32 count = batch;
		int r = bpf_map_lookup_batch(fd, first ? NULL : in, out, keys, vals, &count, NULL);

		if (r && errno != ENOENT) {
			err = -errno;
			break;
		}
		if (count)
			err = fn(ctx, keys, vals, count);
		if (r) /* ENOENT: that was the last batch */
			break;
		memcpy(in, out, sizeof(in));
		first = false;
	}
	free(keys);
	free(vals);
	return err;
}

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
	int err = walk_batches(dp->routes_fd, sizeof(__u64), sizeof(struct kvs_route), 4096,
			       count_batch, &n);

	return err ? err : n;
}

struct stale_scan {
	uint64_t since_ns;
	kvs_dp_cookie_fn stale;
	void *ctx;
	int n;
};

static int scan_partials(void *ctx, const void *keys, const void *vals, uint32_t n)
{
	const struct kvs_conn *v = vals;
	struct stale_scan *sc = ctx;

	for (uint32_t i = 0; i < n; i++) {
		if (v[i].role == KVS_ROLE_CLIENT && v[i].partial_since_ns &&
		    v[i].partial_since_ns < sc->since_ns) {
			sc->stale(sc->ctx, ((const __u64 *)keys)[i]);
			sc->n++;
		}
	}
	return 0;
}

int kvs_dp_stale_partials(struct kvs_datapath *dp, uint64_t since_ns, kvs_dp_cookie_fn stale,
			  void *ctx)
{
	struct stale_scan sc = { since_ns, stale, ctx, 0 };
	int err = walk_batches(dp->conns_fd, sizeof(__u64), sizeof(struct kvs_conn), 1024,
			       scan_partials, &sc);

	return err ? err : sc.n;
}

struct client_walk {
	kvs_dp_client_fn fn;
	void *ctx;
};

static int walk_client_batch(void *ctx, const void *keys, const void *vals, uint32_t n)
{
	const struct kvs_conn *v = vals;
	struct client_walk *w = ctx;

	for (uint32_t i = 0; i < n; i++)
		if (v[i].role == KVS_ROLE_CLIENT && v[i].path == 0)
			w->fn(w->ctx, ((const __u64 *)keys)[i], &v[i]);
	return 0;
}

int kvs_dp_walk_clients(struct kvs_datapath *dp, kvs_dp_client_fn fn, void *ctx)
{
	struct client_walk w = { fn, ctx };

	return walk_batches(dp->conns_fd, sizeof(__u64), sizeof(struct kvs_conn), 1024,
			    walk_client_batch, &w);
}

uint64_t kvs_dp_outstanding(const struct kvs_datapath *dp, uint32_t b)
{
	return __atomic_load_n(&dp->backends[b].outstanding, __ATOMIC_RELAXED);
}

uint64_t kvs_dp_outstanding_work(const struct kvs_datapath *dp, uint32_t b)
{
	return __atomic_load_n(&dp->backends[b].outstanding_work, __ATOMIC_RELAXED);
}

void kvs_dp_charged(const struct kvs_datapath *dp, uint32_t b, uint64_t *tokens, uint64_t *requests)
{
	*tokens = __atomic_load_n(&dp->backends[b].charged_tokens, __ATOMIC_RELAXED);
	*requests = __atomic_load_n(&dp->backends[b].req_frames, __ATOMIC_RELAXED);
}

void kvs_dp_set_work_limit(struct kvs_datapath *dp, uint32_t b, uint64_t limit)
{
	__atomic_store_n(&dp->backends[b].work_limit, limit, __ATOMIC_RELAXED);
}

void kvs_dp_set_hot(struct kvs_datapath *dp, uint32_t b, const struct kvs_hot_fleet *f)
{
	__atomic_store_n(&dp->backends[b].hot.at, f->at, __ATOMIC_RELAXED);
	__atomic_store_n(&dp->backends[b].hot.base, f->base, __ATOMIC_RELAXED);
	__atomic_store_n(&dp->backends[b].hot.prev, f->prev, __ATOMIC_RELAXED);
}

void kvs_dp_end_counters(const struct kvs_datapath *dp, uint32_t b, uint64_t *predicted,
			 uint64_t *mispredicted, uint64_t *unexpected)
{
	*predicted = __atomic_load_n(&dp->backends[b].predicted_cached, __ATOMIC_RELAXED);
	*mispredicted = __atomic_load_n(&dp->backends[b].mispredicted, __ATOMIC_RELAXED);
	*unexpected = __atomic_load_n(&dp->backends[b].unexpected_cached, __ATOMIC_RELAXED);
}

void kvs_dp_set_index_blocks(struct kvs_datapath *dp, uint32_t b, uint64_t blocks)
{
	__atomic_store_n(&dp->backends[b].index_blocks, blocks, __ATOMIC_RELAXED);
}

/* Whether n more routes fit tenant's share (no share: always). */
static bool share_fits(const struct kvs_datapath *dp, uint32_t tenant, uint32_t n)
{
	const struct kvs_route_share *rs;
	uint64_t share;

	if (!dp->shares || tenant >= KVS_MAX_TENANTS)
		return true;
	rs = &dp->shares[tenant];
	share = __atomic_load_n(&rs->share, __ATOMIC_RELAXED);
	return !share || __atomic_load_n(&rs->routes, __ATOMIC_RELAXED) + n <= share;
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
	if (share_fits(dp, tenant, b.n) && kvs_dp_share_take(dp, tenant, b.n)) {
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

	return walk_batches(dp->routes_fd, sizeof(__u64), sizeof(struct kvs_route), 4096,
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

struct owed {
	uint32_t b;
	struct kvs_req_key *keys;
	size_t n, cap;
};

static int collect_owed(void *ctx, const void *keys, const void *vals, uint32_t n)
{
	const struct kvs_inflight *v = vals;
	struct owed *o = ctx;

	for (uint32_t i = 0; i < n; i++) {
		if (v[i].backend != o->b)
			continue;
		if (o->n == o->cap) {
			size_t cap = o->cap ? o->cap * 2 : 256;
			struct kvs_req_key *k = realloc(o->keys, sizeof(*k) * cap);

			if (!k)
				return -ENOMEM;
			o->keys = k;
			o->cap = cap;
		}
		o->keys[o->n++] = ((const struct kvs_req_key *)keys)[i];
	}
	return 0;
}

int kvs_dp_fail_inflight(struct kvs_datapath *dp, uint32_t b, kvs_dp_fail_fn fail, void *ctx)
{
	struct owed o = { .b = b };
	int n = 0;

	/* Collected first, deleted after: deleting during the walk would lose
	 * its place in the hash. */
	walk_batches(dp->inflight_fd, sizeof(struct kvs_req_key), sizeof(struct kvs_inflight), 1024,
		     collect_owed, &o);
	for (size_t i = 0; i < o.n; i++) {
		if (bpf_map_delete_elem(dp->inflight_fd, &o.keys[i]))
			continue; /* ended meanwhile */
		fail(ctx, o.keys[i].conn, o.keys[i].req_id);
		n++;
	}
	free(o.keys);
	/* Nothing is in flight on a backend with no connections: what the
	 * kernel still counts (requests whose records the LRU dropped) goes. */
	__atomic_store_n(&dp->backends[b].outstanding, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&dp->backends[b].outstanding_work, 0, __ATOMIC_RELAXED);
	return n;
}

struct inflight_walk {
	kvs_dp_inflight_fn fn;
	void *ctx;
	int n;
};

static int each_inflight(void *ctx, const void *keys, const void *vals, uint32_t n)
{
	const struct kvs_req_key *k = keys;
	const struct kvs_inflight *v = vals;
	struct inflight_walk *w = ctx;

	for (uint32_t i = 0; i < n; i++)
		w->fn(w->ctx, &k[i], &v[i]);
	w->n += (int)n;
	return 0;
}

int kvs_dp_walk_inflight(struct kvs_datapath *dp, kvs_dp_inflight_fn fn, void *ctx)
{
	struct inflight_walk w = { fn, ctx, 0 };
	int err = walk_batches(dp->inflight_fd, sizeof(struct kvs_req_key),
			       sizeof(struct kvs_inflight), 1024, each_inflight, &w);

	return err ? err : w.n;
}

bool kvs_dp_inflight_has(struct kvs_datapath *dp, const struct kvs_req_key *k)
{
	struct kvs_inflight rec;

	return bpf_map_lookup_elem(dp->inflight_fd, k, &rec) == 0;
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

int kvs_dp_publish_ctl(struct kvs_datapath *dp, const struct kvs_ctl_stats *s)
{
	__u32 zero = 0;

	return bpf_map_update_elem(dp->ctl_fd, &zero, s, BPF_ANY) ? -errno : 0;
}

/* Never below zero: a stray END must not wrap a count and wedge the backend
 * as saturated for ever (as release_work() in the kernel). */
static void sub_floor(__u64 *v, uint64_t n)
{
	__u64 cur = __atomic_load_n(v, __ATOMIC_RELAXED);

	while (!__atomic_compare_exchange_n(v, &cur, cur > n ? cur - n : 0, false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

void kvs_dp_user_sent(struct kvs_datapath *dp, uint32_t b, uint64_t bytes, uint64_t work)
{
	struct kvs_backend *be = &dp->backends[b];

	__atomic_fetch_add(&be->outstanding, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->outstanding_work, work, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->req_frames, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->req_bytes, bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->charged_tokens, work, __ATOMIC_RELAXED);
}

void kvs_dp_user_response(struct kvs_datapath *dp, uint32_t b, uint64_t bytes, bool ends,
			  uint64_t release)
{
	struct kvs_backend *be = &dp->backends[b];

	__atomic_fetch_add(&be->resp_frames, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->resp_bytes, bytes, __ATOMIC_RELAXED);
	if (!ends)
		return;
	__atomic_fetch_add(&be->ends, 1, __ATOMIC_RELAXED);
	sub_floor(&be->outstanding, 1);
	sub_floor(&be->outstanding_work, release);
}

void kvs_dp_user_end_report(struct kvs_datapath *dp, uint32_t b, const struct kvs_end_info *e,
			    uint64_t predicted, uint64_t window_tokens)
{
	struct kvs_backend *be = &dp->backends[b];
	struct kvs_ttft *t = &dp->ttft[b];
	uint64_t prompt = e->prompt_tokens, cached = e->cached_tokens, output = e->output_tokens;
	uint64_t surprise = kvs_unexpected_cached(predicted, cached, window_tokens);
	uint64_t us = (uint64_t)e->queue_us + e->prefill_us;

	if (us) { /* as the kernel's count_ttft (bpf/datapath/response.bpf.h) */
		__atomic_fetch_add(&t->count, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&t->queue_us, e->queue_us, __ATOMIC_RELAXED);
		__atomic_fetch_add(&t->prefill_us, e->prefill_us, __ATOMIC_RELAXED);
		__atomic_fetch_add(&t->bucket[kvs_ttft_bucket(us)], 1, __ATOMIC_RELAXED);
	}
	__atomic_fetch_add(&be->output_tokens, output, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->prompt_tokens, prompt, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->cached_tokens, cached, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->predicted_cached, predicted, __ATOMIC_RELAXED);
	if (predicted > cached + KVS_BLOCK_TOKENS)
		__atomic_fetch_add(&be->mispredicted, predicted - cached - KVS_BLOCK_TOKENS,
				   __ATOMIC_RELAXED);
	if (surprise)
		__atomic_fetch_add(&be->unexpected_cached, surprise, __ATOMIC_RELAXED);
}

void kvs_dp_user_release(struct kvs_datapath *dp, uint32_t b, uint64_t work)
{
	sub_floor(&dp->backends[b].outstanding_work, work);
}

void kvs_dp_output_counters(const struct kvs_datapath *dp, uint32_t b, uint64_t *output,
			    uint64_t *ends)
{
	const struct kvs_backend *be = &dp->backends[b];

	*output = __atomic_load_n(&be->output_tokens, __ATOMIC_RELAXED);
	*ends = __atomic_load_n(&be->ends, __ATOMIC_RELAXED);
}

void kvs_dp_set_expect_output(struct kvs_datapath *dp, uint32_t b, uint64_t v)
{
	__atomic_store_n(&dp->backends[b].expect_output, v, __ATOMIC_RELAXED);
}

int kvs_dp_gen_current(const struct kvs_datapath *dp, uint32_t b, uint32_t gen)
{
	return b < KVS_MAX_BACKENDS &&
	       gen == __atomic_load_n(&dp->backends[b].route_gen, __ATOMIC_ACQUIRE);
}
