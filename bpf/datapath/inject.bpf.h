/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The frames the controller writes into its inject socket: the requests it
 * decided, its health checks, its CANCELs and its answers to clients.
 */
#ifndef KVS_DP_INJECT_BPF_H
#define KVS_DP_INJECT_BPF_H

#include "response.bpf.h"

/* Frames the controller wrote into its inject socket: requests carry the
 * backend it chose, everything else (its own answers) the client. */
static __always_inline int inject_frame(struct __sk_buff *skb, struct kvs_stats *st,
					const struct kvs_hdr *h, __u32 off, __u32 len)
{
	struct kvs_backend *be;
	__u32 b;

	/* inject_frames is counted after a request's backend has counted it
	 * (send_request()): the controller takes "the kernel has read every
	 * frame I sent" to mean its counts include them (sync_inject()). */
	/* A health check: to the backend named (pool slot 0), not a client. */
	if (h->type == KVS_T_PING && bpf_ntohl(h->gw_backend) != ~0u) {
		__u64 key = kvs_upstream_key(kvs_gw_backend(bpf_ntohl(h->gw_backend)), 0);

		st->inject_frames++;
		if (bpf_sk_redirect_hash(skb, &socks, &key, 0) == SK_PASS)
			return SK_PASS;
		st->pass_no_upstream++;
		return SK_DROP;
	}
	/* The controller's CANCELs: a client's that came through it, and its
	 * own for clients that went away. Dropped if the request has ended. */
	if (h->type == KVS_T_CANCEL) {
		st->inject_frames++;
		if (send_cancel(skb, st, h, off, bpf_be64_to_cpu(h->gw_conn)) == 0)
			return SK_PASS;
		st->drop_cancel++;
		return SK_DROP;
	}
	/* Every ERROR of the controller's ends a request it was handed or
	 * that a dead backend owed, but its notices about the connection. */
	if (h->type != KVS_T_REQUEST) {
		st->inject_frames++;
		return to_client(
			skb, st, h->gw_conn,
			h->type == KVS_T_ERROR && h->gw_backend != bpf_htonl(KVS_GW_NOTICE), 1);
	}
	b = kvs_gw_backend(bpf_ntohl(h->gw_backend));
	be = bpf_map_lookup_elem(&backends, &b);
	if (!be || send_request(skb, h, off, len, b, be, bpf_be64_to_cpu(h->gw_conn),
				kvs_gw_charge(bpf_ntohl(h->gw_backend)), 0)) {
		/* (the controller answers it with an ERROR, which uncounts it) */
		/* Back to the controller, on the inject socket's own receive
		 * queue: it answers the client with an error. Only when the
		 * backend's socket is gone: rare, see send_request(). */
		st->pass_no_upstream++;
	}
	st->inject_frames++;
	return SK_PASS;
}

#endif /* KVS_DP_INJECT_BPF_H */
