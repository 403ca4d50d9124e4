// SPDX-License-Identifier: GPL-2.0
/*
 * kvsplice data path: an sk_skb stream parser that frames KVS1 messages and a
 * stream verdict that routes each whole frame.
 *
 *   client socket   --REQUEST-->  route map  --> upstream socket of backend
 *   upstream socket --CHUNK/END/ERROR--> client socket named by gw_conn
 *   inject socket   --frames the controller decided--> either of the above
 *
 * Anything the kernel does not route from a client (no route, saturated or
 * absent backend, PING, a malformed frame) is redirected to the punt socket,
 * which the controller reads: the slow path. The frame carries its client's
 * id in gw_conn, and a malformed one is first rewritten into an ERROR notice
 * naming the problem, so the punt stream is always well framed.
 *
 * Nothing is passed up (SK_PASS) into a client socket's own receive queue:
 * reading that queue from userspace while the strparser still holds bytes
 * that arrived before the socket joined the map stalls the stream on this
 * kernel (docs/ARCHITECTURE.md, "Bytes that predate the map").
 *
 * One object: the parser, the verdict and kvs_withdraw share their maps and
 * the skeleton the daemon loads, and the verdict's helpers must be visible
 * to the verifier as one program (separate objects would need a BPF static
 * link step that Debian 12's build does not otherwise need). So the parts
 * are headers in bpf/datapath/, one concern each, each including the one
 * it builds on: maps <- frame <- route <- send <- request, send <-
 * response <- inject; this file holds the programs.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "kvsplice/proto.h"
#include "kvsplice/hash.h"
#include "kvsplice/maps.h"
#include "kvsplice/place.h"

char LICENSE[] SEC("license") = "GPL";

#include "datapath/request.bpf.h"
#include "datapath/inject.bpf.h"

SEC("sk_skb/stream_parser")
int kvs_parser(struct __sk_buff *skb)
{
	struct kvs_hdr h;
	__u32 off, len, plen;

	frame_pos(skb, &off, &len);
	if (off > skb->len || skb->len - off < KVS_HDR_LEN ||
	    bpf_skb_load_bytes(skb, off, &h, 16)) {
		mark_partial(skb);
		return 0; /* need more bytes */
	}
	plen = bpf_ntohl(h.payload_len);
	/*
	 * A header we cannot trust is framed as a bare 64-byte message: the
	 * verdict turns it into an ERROR notice for the controller, which answers
	 * the client and closes the connection. Returning an error here instead
	 * would make the strparser abort the socket with no word to the client.
	 */
	if (hdr_status(&h, KVS_HDR_LEN + plen))
		return KVS_HDR_LEN;
	if (skb->len - off < KVS_HDR_LEN + plen) {
		mark_partial(skb);
		return KVS_HDR_LEN + plen;
	}
	return KVS_HDR_LEN + plen + upstream_run_len(skb, off);
}

/*
 * The controller's route withdrawals, a batch per system call (BPF_PROG_RUN
 * of this program) instead of a lookup and a delete per route: its index
 * evicts about as many routes as a slow-path decision installs. Returns how
 * many were deleted.
 */
/*
 * The controller's route installs (struct kvs_install_batch), in one
 * system call. A route the map holds is replaced whole (BPF_EXIST: the
 * verdict sees the old route or the new one, never a backend with another
 * route's generation), its counters copied from it just before: what the
 * verdict adds to them in between (nanoseconds) is lost, which an update
 * in place would avoid only at the price of a torn route.
 */
SEC("syscall")
int kvs_install(struct kvs_install_batch *b)
{
	struct kvs_route nr = {
		.backend = b->backend,
		.gen = b->gen,
		.tenant = b->tenant,
		.installed_ns = b->installed_ns,
	};
	int done = 0;
	__u32 i;

	/* Unrolled, as kvs_withdraw: constant offsets into the context. */
#pragma clang loop unroll(full)
	for (i = 0; i < KVS_INSTALL_BATCH; i++) {
		struct kvs_route *r;
		__u64 hash;
		__u32 was = KVS_INSTALL_NEW;

		if (i >= b->n)
			break;
		hash = b->e[i].hash;
		nr.depth_blocks = b->e[i].depth_blocks;
		nr.hits = 0;
		nr.hot_at = 0;
		nr.hot_cur = nr.hot_prev = 0;
		nr.replicas = 0;
		r = bpf_map_lookup_elem(&routes, &hash);
		if (r) {
			was = r->tenant < KVS_MAX_TENANTS ? r->tenant : 0;
			nr.hits = r->hits;
			nr.hot_at = r->hot_at;
			nr.hot_cur = r->hot_cur;
			nr.hot_prev = r->hot_prev;
			/* the replicas hold it still, if it stays their holder's */
			if (r->backend == nr.backend)
				nr.replicas = r->replicas;
		}
		if (bpf_map_update_elem(&routes, &hash, &nr, r ? BPF_EXIST : BPF_NOEXIST)) {
			b->e[i].was = KVS_INSTALL_FAILED;
			continue;
		}
		b->e[i].was = was;
		done++;
	}
	return done;
}

SEC("syscall")
int kvs_withdraw(struct kvs_withdraw_batch *b)
{
	int deleted = 0;
	__u32 i;

	/* Unrolled: a syscall program may read its context only at constant
	 * offsets. */
#pragma clang loop unroll(full)
	for (i = 0; i < KVS_WITHDRAW_BATCH; i++) {
		struct kvs_route *r;
		__u32 tenant;
		__u64 hash;

		if (i >= b->n)
			break;
		hash = b->e[i].hash;
		r = bpf_map_lookup_elem(&routes, &hash);
		if (!r)
			continue;
		if (r->backend != b->e[i].backend) {
			/* a replica of the route let the prefix go: its next
			 * request there is charged as a first one */
			if (b->e[i].backend < KVS_MAX_BACKENDS)
				r->replicas &= ~(1ULL << b->e[i].backend);
			continue;
		}
		tenant = r->tenant;
		if (bpf_map_delete_elem(&routes, &hash) == 0) {
			share_uncount(tenant);
			deleted++;
		}
	}
	return deleted;
}

static __always_inline int frame_verdict(struct __sk_buff *skb, struct kvs_stats *st)
{
	__u64 cookie = bpf_get_socket_cookie(skb);
	struct kvs_conn *conn;
	struct kvs_hdr h;
	__u32 off, len;
	int bad;

	frame_pos(skb, &off, &len);
	if (off)
		st->frames_at_offset++;
	conn = bpf_map_lookup_elem(&conns, &cookie);
	if (!conn) {
		st->drop_punt++;
		return SK_DROP;
	}
	if (bpf_skb_load_bytes(skb, off, &h, sizeof(h)))
		__builtin_memset(&h, 0, sizeof(h)); /* reported as bad magic */
	conn->frames++;
	conn->partial_since_ns = 0;
	conn->bytes += len;

	bad = hdr_status(&h, len);
	if (!bad) /* the type's own rules, as the controller's codec checks them */
		bad = kvs_type_rules(h.type, bpf_ntohs(h.flags), bpf_ntohs(h.status),
				     bpf_ntohl(h.payload_len), bpf_ntohl(h.prefix_len));
	/* a run of frames for one client (response_run): counted one by one */
	if (conn->role == KVS_ROLE_UPSTREAM && len > KVS_HDR_LEN + bpf_ntohl(h.payload_len))
		return upstream_run(skb, st, conn, off, len);
	if (conn->role == KVS_ROLE_CLIENT) {
		if (bad)
			return punt_error(skb, st, &h, off, len, cookie, bad);
		if (conn->by_role.tenant && h.type == KVS_T_REQUEST &&
		    bind_tenant(skb, &h, off, conn->by_role.tenant))
			return SK_DROP;
		return client_frame(skb, st, &h, off, len, cookie, conn);
	}
	if (bad) {
		st->drop_bad_upstream++;
		return SK_DROP;
	}
	if (conn->role == KVS_ROLE_UPSTREAM)
		return upstream_frame(skb, st, &h, conn->by_role.backend, off, len);
	if (conn->role == KVS_ROLE_INJECT)
		return inject_frame(skb, st, &h, off, len);
	st->drop_bad_upstream++;
	return SK_DROP;
}

/*
 * A verdict holds a scratch slot for its whole run (nest, in
 * bpf/datapath/maps.bpf.h): the count goes up here and down as it
 * returns, whichever way frame_verdict returns. Looked up again after it,
 * not kept: a pointer kept across it would take a stack slot, and the
 * deepest call chain's stack is at the verifier's 512 bytes.
 */
SEC("sk_skb/stream_verdict")
int kvs_verdict(struct __sk_buff *skb)
{
	__u32 *n = bpf_map_lookup_elem(&nest, &slot_key[0]);
	struct kvs_stats *st = stats_slot();
	int v;

	if (!n || !st)
		return SK_DROP;
	if (*n) {
		st->verdict_nested++;
		if (*n >= KVS_NEST)
			st->verdict_nest_full++;
	}
	*n += 1;
	v = frame_verdict(skb, st);
	n = bpf_map_lookup_elem(&nest, &slot_key[0]);
	if (n && *n)
		*n -= 1;
	return v;
}
