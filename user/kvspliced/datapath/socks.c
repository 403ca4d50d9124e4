// SPDX-License-Identifier: MIT
/* Sockets into the SOCKHASH and their conns entries; the clients read
 * back from conns (in flight, stale partial frames, every client). */
#include <bpf/bpf.h>
#include <errno.h>

#include "datapath.h"
#include "datapath/dp_int.h"

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

void kvs_dp_unsplice(struct kvs_datapath *dp, uint64_t key)
{
	bpf_map_delete_elem(dp->socks_fd, &key);
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
	if (c.limit == limit && c.by_role.tenant == tenant)
		return 0;
	c.limit = limit;
	c.by_role.tenant = tenant;
	return bpf_map_update_elem(dp->conns_fd, &cookie, &c, BPF_EXIST) ? -errno : 0;
}

void kvs_dp_del_conn(struct kvs_datapath *dp, uint64_t cookie)
{
	bpf_map_delete_elem(dp->conns_fd, &cookie);
}

uint32_t kvs_dp_client_inflight(struct kvs_datapath *dp, uint64_t cookie)
{
	struct kvs_conn c;

	return bpf_map_lookup_elem(dp->conns_fd, &cookie, &c) ? 0 : c.inflight;
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
	int err = kvs_map_walk_batches(dp->conns_fd, sizeof(__u64), sizeof(struct kvs_conn), 1024,
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

	return kvs_map_walk_batches(dp->conns_fd, sizeof(__u64), sizeof(struct kvs_conn), 1024,
				    walk_client_batch, &w);
}
