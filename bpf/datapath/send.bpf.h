/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where a client's frame goes: to an upstream socket of a backend (stamped
 * with the gateway's fields, counted, recorded in the inflight map), or to
 * the controller through the punt socket (as is, or rewritten as an ERROR
 * notice); and CANCELs after the request they name.
 */
#ifndef KVS_DP_SEND_BPF_H
#define KVS_DP_SEND_BPF_H

#include "route.bpf.h"

/* The gateway-owned header fields, written in one store. */
struct gw_fields {
	__be32 backend;
	__be64 conn;
} __attribute__((packed));

/*
 * Redirect a request frame to an upstream socket of backend b. A client
 * always lands on the same pool slot, so its requests to one backend keep
 * their order. Returns 0 when redirected, SEND_CLIENT_LIMIT when the client
 * has --max-client-inflight requests in flight already (checked here, where
 * the count goes up), -1 otherwise. Requests the controller injects were
 * counted when punted (punt_request()) and checked by the controller: they
 * pass fast 0 and are neither checked nor counted again. (Handing them back
 * on the inject socket (SK_PASS) in numbers stalls that socket's parser for
 * good: docs/ARCHITECTURE.md, "Hazards of sockmap splicing".)
 */
#define SEND_CLIENT_LIMIT (-2)
static __always_inline int send_request(struct __sk_buff *skb, const struct kvs_hdr *h, __u32 off,
					__u32 len, __u32 b, struct kvs_backend *be, __u64 client,
					__u32 charge, int fast)
{
	__u32 out = kvs_charged_output(bpf_ntohl(h->max_tokens), be->expect_output);
	struct gw_fields gw = {
		.backend = bpf_htonl(kvs_gw_pack(b, charge)),
		.conn = bpf_cpu_to_be64(client),
	};
	struct kvs_req_key rk = { .conn = client, .req_id = bpf_be64_to_cpu(h->req_id) };
	struct kvs_inflight rec = {
		.backend = b,
		.out_tokens = out,
		.held_tokens = (__u64)charge * KVS_BLOCK_TOKENS, /* charge fits 24 bits */
	};
	struct kvs_conn *c = bpf_map_lookup_elem(&conns, &client);
	__u64 key;

	if (be->pool_size == 0 || be->pool_size > KVS_MAX_POOL)
		return -1;
	/* Two CPUs may both pass this check for one client: the limit can be
	 * exceeded by one per CPU, not more. */
	if (fast && c && conn_at_limit(c))
		return SEND_CLIENT_LIMIT;
	key = kvs_upstream_key(b, client % be->pool_size);
	if (bpf_skb_store_bytes(skb, off + KVS_OFF_GW_BACKEND, &gw, sizeof(gw), 0))
		return -1;
	if (bpf_sk_redirect_hash(skb, &socks, &key, 0) != SK_PASS)
		return -1;
	/* The record says which backend owes this client an answer: when the
	 * backend dies, the controller answers each of its requests with an
	 * ERROR from these (kvs_dp_fail_inflight). With an early release it
	 * also keeps what the request still holds. */
	if (cfg_release_prefill_early)
		rec.prefill_tokens = kvs_prefill_charge(charge, out);
	bpf_map_update_elem(&inflight, &rk, &rec, BPF_ANY);
	if (c && fast) /* punted requests were counted as they went */
		__sync_fetch_and_add(&c->inflight, 1);
	__sync_fetch_and_add(&be->outstanding, 1);
	__sync_fetch_and_add(&be->outstanding_work, rec.held_tokens);
	__sync_fetch_and_add(&be->charged_tokens, rec.held_tokens);
	__sync_fetch_and_add(&be->req_frames, 1);
	__sync_fetch_and_add(&be->req_bytes, len);
	return 0;
}

/* Hand a client's frame to the controller through the punt socket. */
static __always_inline int punt(struct __sk_buff *skb, struct kvs_stats *st)
{
	__u64 key = KVS_PUNT_KEY;

	if (bpf_sk_redirect_hash(skb, &socks, &key, 0) != SK_PASS) {
		st->drop_punt++;
		return SK_DROP;
	}
	return SK_PASS;
}

/*
 * A client's REQUEST to the controller: it counts as in flight from here,
 * as one the kernel sends does, until its END or ERROR passes back (the
 * controller's busy or no-backend ERROR included). Whether it is over
 * --max-client-inflight is decided here, in arrival order, and marked in
 * gw_backend for the controller to answer busy: the controller reads
 * requests later than they are counted, and could not tell. The
 * controller's injected copy is not counted again.
 */
static __always_inline int punt_request(struct __sk_buff *skb, struct kvs_stats *st,
					struct kvs_conn *conn, __u32 off, int budget)
{
	__u32 mark = bpf_htonl(KVS_GW_OVER_LIMIT);

	/* Read, then add: two CPUs may both see room (one over, at most).
	 * Over its budget it is answered busy anyway, and the budget's mark
	 * (which may close it) stays. */
	if (budget == KVS_BUDGET_OK && conn_at_limit(conn)) {
		st->pass_client_limit++;
		bpf_skb_store_bytes(skb, off + KVS_OFF_GW_BACKEND, &mark, sizeof(mark), 0);
	}
	__sync_fetch_and_add(&conn->inflight, 1);
	if (punt(skb, st) == SK_PASS)
		return SK_PASS;
	if (conn->inflight > 0)
		__sync_fetch_and_add(&conn->inflight, (__u32)-1);
	return SK_DROP;
}

/* Stamp the client's id (and no backend, or a note for the controller)
 * into a frame for the controller. */
static __always_inline int stamp_client(struct __sk_buff *skb, __u32 off, __u64 cookie,
					__u32 backend)
{
	struct gw_fields gw = {
		.backend = bpf_htonl(backend),
		.conn = bpf_cpu_to_be64(cookie),
	};

	return bpf_skb_store_bytes(skb, off + KVS_OFF_GW_BACKEND, &gw, sizeof(gw), 0);
}

/* A bound tenant's salt written over whatever its client's REQUEST
 * carries, in the frame and in the copy h the verdict goes on with: the
 * route, the backend's cache and the controller all see the tenant's. */
static __always_inline int bind_tenant(struct __sk_buff *skb, struct kvs_hdr *h, __u32 off,
				       __u32 tenant)
{
	struct kvs_tenant *t = bpf_map_lookup_elem(&tenants, &tenant);
	__be64 salt;

	if (!t)
		return 0;
	__sync_fetch_and_add(&t->requests, 1);
	salt = bpf_cpu_to_be64(t->salt);
	if (h->cache_salt == salt)
		return 0;
	__sync_fetch_and_add(&t->rewritten, 1);
	h->cache_salt = salt;
	return bpf_skb_store_bytes(skb, off + __builtin_offsetof(struct kvs_hdr, cache_salt), &salt,
				   sizeof(salt), 0);
}

/*
 * A client's frame for the controller, against the client's budget
 * (include/kvsplice/budget.h): enum kvs_budget_verdict. One socket's
 * frames reach the verdict one at a time (its strparser runs under the
 * socket's lock), so the entry is updated without atomics.
 */
static __always_inline int take_budget(struct kvs_conn *conn)
{
	return kvs_budget_take(&conn->ctl, bpf_ktime_get_ns());
}

/* A PING or CANCEL for the controller: over the client's budget it is
 * dropped (no answer is owed), else punted, marked if it is the frame
 * that closes the client. */
static __always_inline int punt_budgeted(struct __sk_buff *skb, struct kvs_stats *st, __u32 off,
					 __u64 cookie, struct kvs_conn *conn)
{
	int budget = take_budget(conn);

	if (budget == KVS_BUDGET_OVER) {
		st->drop_budget++;
		return SK_DROP;
	}
	st->pass_other++;
	if (stamp_client(skb, off, cookie, budget == KVS_BUDGET_CLOSE ? KVS_GW_BUDGET_CLOSE : ~0u))
		return SK_DROP;
	return punt(skb, st);
}

/*
 * Rewrite a client's unacceptable frame into an ERROR notice for the
 * controller: same length (a malformed header was framed as 64 bytes, a
 * frame of the wrong type keeps its payload as the message), status naming
 * the problem, gw_conn naming the client.
 */
static __always_inline int punt_error(struct __sk_buff *skb, struct kvs_stats *st,
				      const struct kvs_hdr *h, __u32 off, __u32 len, __u64 cookie,
				      int status)
{
	struct kvs_hdr e = {
		.magic = bpf_htonl(KVS_MAGIC),
		.version = KVS_VERSION,
		.type = KVS_T_ERROR,
		.hdr_len = bpf_htons(KVS_HDR_LEN),
		.status = bpf_htons(status),
		.payload_len = bpf_htonl(len - KVS_HDR_LEN),
		.req_id = h->req_id,
		.gw_backend = bpf_htonl(~0u),
		.gw_conn = bpf_cpu_to_be64(cookie),
	};

	if (len < KVS_HDR_LEN || bpf_skb_store_bytes(skb, off, &e, sizeof(e), 0)) {
		st->drop_punt++;
		return SK_DROP;
	}
	st->pass_bad_frame++;
	return punt(skb, st);
}

/*
 * A CANCEL to the backend its request went to, found in the request's
 * record (client cookie, req_id): stamped as a request is (its charge 0),
 * on the pool slot the client's requests to that backend take, so that it
 * follows the request it names. 0 when sent; -1 when there is no record
 * (the request is unknown, has ended, or has not reached a backend yet) or
 * no upstream socket.
 */
static __always_inline int send_cancel(struct __sk_buff *skb, struct kvs_stats *st,
				       const struct kvs_hdr *h, __u32 off, __u64 client)
{
	struct kvs_req_key rk = { .conn = client, .req_id = bpf_be64_to_cpu(h->req_id) };
	struct kvs_inflight *rec = bpf_map_lookup_elem(&inflight, &rk);
	struct kvs_backend *be;
	struct gw_fields gw;
	__u32 b;
	__u64 key;

	if (!rec)
		return -1;
	b = rec->backend;
	be = bpf_map_lookup_elem(&backends, &b);
	if (!be || be->pool_size == 0 || be->pool_size > KVS_MAX_POOL)
		return -1;
	gw.backend = bpf_htonl(kvs_gw_pack(b, 0));
	gw.conn = bpf_cpu_to_be64(client);
	key = kvs_upstream_key(b, client % be->pool_size);
	if (bpf_skb_store_bytes(skb, off + KVS_OFF_GW_BACKEND, &gw, sizeof(gw), 0) ||
	    bpf_sk_redirect_hash(skb, &socks, &key, 0) != SK_PASS)
		return -1;
	st->cancel_frames++;
	return 0;
}

/*
 * A client's CANCEL. With no record of its request, the request may still
 * be with the controller (punted, not yet injected; the client's in-flight
 * count says so): the CANCEL follows it through the punt socket, in order,
 * and the controller injects it after the request. A client with nothing
 * in flight has nothing to cancel: dropped here.
 */
static __always_inline int client_cancel(struct __sk_buff *skb, struct kvs_stats *st,
					 const struct kvs_hdr *h, __u32 off, __u64 cookie,
					 struct kvs_conn *conn)
{
	if (send_cancel(skb, st, h, off, cookie) == 0)
		return SK_PASS;
	if (conn->inflight == 0) {
		st->drop_cancel++;
		return SK_DROP;
	}
	return punt_budgeted(skb, st, off, cookie, conn);
}

#endif /* KVS_DP_SEND_BPF_H */
