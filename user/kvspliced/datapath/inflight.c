// SPDX-License-Identifier: MIT
/* The inflight map: the requests a backend owes, walked and failed when it
 * dies. */
#include <bpf/bpf.h>
#include <errno.h>
#include <stdlib.h>

#include "datapath.h"
#include "datapath/dp_int.h"

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
	kvs_map_walk_batches(dp->inflight_fd, sizeof(struct kvs_req_key),
			     sizeof(struct kvs_inflight), 1024, collect_owed, &o);
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
	int err = kvs_map_walk_batches(dp->inflight_fd, sizeof(struct kvs_req_key),
				       sizeof(struct kvs_inflight), 1024, each_inflight, &w);

	return err ? err : w.n;
}

bool kvs_dp_inflight_has(struct kvs_datapath *dp, const struct kvs_req_key *k)
{
	struct kvs_inflight rec;

	return bpf_map_lookup_elem(dp->inflight_fd, k, &rec) == 0;
}
