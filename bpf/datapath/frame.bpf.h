/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where a frame is and whether its header can be trusted: what the parser
 * and the verdict both need before they look at a frame's type.
 */
#ifndef KVS_DP_FRAME_BPF_H
#define KVS_DP_FRAME_BPF_H

#include "maps.bpf.h"

/* Where the current frame starts in the skb, and how long it is. */
static __always_inline void frame_pos(struct __sk_buff *skb, __u32 *off, __u32 *len)
{
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	struct sk_skb_cb *cb = (struct sk_skb_cb *)kskb->cb;

	*off = cb->strp.strp.offset;
	*len = cb->strp.strp.full_len;
}

static __always_inline struct kvs_stats *stats_slot(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&stats, &zero);
}

/* 0 for a well-formed header of a frame_len-byte frame, else the
 * enum kvs_status naming the first problem, in the codec's order. Only the
 * first 16 bytes of h are read. */
static __always_inline int hdr_status(const struct kvs_hdr *h, __u32 frame_len)
{
	__u32 plen = bpf_ntohl(h->payload_len);

	if (h->magic != bpf_htonl(KVS_MAGIC))
		return KVS_E_BAD_MAGIC;
	if (h->version != KVS_VERSION)
		return KVS_E_BAD_VERSION;
	if (h->type < KVS_T_REQUEST || h->type > KVS_T_MAX)
		return KVS_E_BAD_TYPE;
	if (h->hdr_len != bpf_htons(KVS_HDR_LEN))
		return KVS_E_BAD_HDR_LEN;
	if (bpf_ntohs(h->flags) & ~KVS_F_KNOWN)
		return KVS_E_BAD_FLAGS;
	if (plen > cfg_max_payload)
		return KVS_E_TOO_LARGE;
	if (frame_len != KVS_HDR_LEN + plen)
		return KVS_E_BAD_HDR_LEN;
	return 0;
}

/*
 * A frame has begun and not completed: note when, once, so the controller
 * can answer a client that never finishes it (--frame-timeout-ms). The
 * strparser's own timer (SO_RCVTIMEO) is not started for a frame that
 * begins in the same skb as a complete one (its peek at the socket counts
 * the bytes of the frame before), so it cannot be relied on alone. The
 * verdict clears the mark when a frame completes.
 */
static __always_inline void mark_partial(struct __sk_buff *skb)
{
	__u64 cookie = bpf_get_socket_cookie(skb);
	struct kvs_conn *c = bpf_map_lookup_elem(&conns, &cookie);

	if (c && c->role == KVS_ROLE_CLIENT && !c->partial_since_ns)
		c->partial_since_ns = bpf_ktime_get_ns();
}

#endif /* KVS_DP_FRAME_BPF_H */
