// SPDX-License-Identifier: GPL-2.0
/*
 * kvsplice admission: an XDP program on the gateway's interface that drops,
 * before any socket work, packets to the gateway port from denied sources,
 * from sources outside the allow list when there is one, and SYNs beyond a
 * per-source rate (include/kvsplice/admission.h). Counted per CPU.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "kvsplice/admission.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the controller before load. */
const volatile __u16 cfg_port = 0;	/* the gateway's TCP port, host order */
const volatile __u32 cfg_syn_rate = 0;	/* SYNs per source per second; 0 = no limit */
const volatile __u32 cfg_syn_burst = 1; /* bucket depth */
const volatile __u8 cfg_allow_only = 0; /* an allow list was given */

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, KVS_ADM_MAX_CIDRS);
	__type(key, struct kvs_lpm_v4);
	__type(value, __u8);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xdp_allow_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, KVS_ADM_MAX_CIDRS);
	__type(key, struct kvs_lpm_v4);
	__type(value, __u8);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xdp_deny_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, KVS_ADM_MAX_CIDRS);
	__type(key, struct kvs_lpm_v6);
	__type(value, __u8);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xdp_allow_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, KVS_ADM_MAX_CIDRS);
	__type(key, struct kvs_lpm_v6);
	__type(value, __u8);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xdp_deny_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, KVS_ADM_MAX_SOURCES);
	__type(key, struct in6_addr);
	__type(value, struct kvs_syn_bucket);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xdp_syn SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kvs_xdp_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xdp_stats SEC(".maps");

/* One more SYN from src: whether its bucket has a token. */
static __always_inline int syn_allowed(const struct in6_addr *src)
{
	__u64 now = bpf_ktime_get_ns(), full = (__u64)cfg_syn_burst * 1000, refill;
	struct kvs_syn_bucket *b = bpf_map_lookup_elem(&xdp_syn, src), nb;

	if (!b) {
		nb.last_ns = now;
		nb.milli_tokens = full - 1000; /* this SYN takes one */
		bpf_map_update_elem(&xdp_syn, src, &nb, BPF_ANY);
		return 1;
	}
	/* Refill: microseconds elapsed x rate / 1000 milli-tokens; a source
	 * quiet for 10 s or more is full again (and the product cannot wrap). */
	if (now - b->last_ns >= 10000000000ull)
		refill = full;
	else
		refill = (now - b->last_ns) / 1000 * cfg_syn_rate / 1000;
	b->milli_tokens = b->milli_tokens + refill > full ? full : b->milli_tokens + refill;
	b->last_ns = now;
	if (b->milli_tokens < 1000)
		return 0;
	b->milli_tokens -= 1000;
	return 1;
}

static __always_inline int judge(struct kvs_xdp_stats *st, int denied, int allowed, int syn,
				 const struct in6_addr *src)
{
	if (denied) {
		st->drop_denied++;
		return XDP_DROP;
	}
	if (cfg_allow_only && !allowed) {
		st->drop_not_allowed++;
		return XDP_DROP;
	}
	if (syn) {
		if (cfg_syn_rate && !syn_allowed(src)) {
			st->drop_syn_rate++;
			return XDP_DROP;
		}
		st->syn_passed++;
	}
	st->passed++;
	return XDP_PASS;
}

SEC("xdp")
int kvs_admission(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct in6_addr src = {};
	struct kvs_xdp_stats *st;
	struct tcphdr *th;
	__u32 zero = 0;
	int denied, allowed, syn;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		struct kvs_lpm_v4 k = { .prefixlen = 32 };

		if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_TCP || ip->ihl < 5)
			return XDP_PASS;
		th = (void *)ip + ip->ihl * 4;
		if ((void *)(th + 1) > end || th->dest != bpf_htons(cfg_port))
			return XDP_PASS;
		/* Read now, while the verifier knows th is in bounds. */
		syn = th->syn && !th->ack;
		__builtin_memcpy(k.addr, &ip->saddr, 4);
		denied = bpf_map_lookup_elem(&xdp_deny_v4, &k) != NULL;
		allowed = bpf_map_lookup_elem(&xdp_allow_v4, &k) != NULL;
		src.in6_u.u6_addr16[5] = 0xffff;
		src.in6_u.u6_addr32[3] = ip->saddr;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		struct kvs_lpm_v6 k = { .prefixlen = 128 };

		/* Extension headers before TCP are not followed: such packets
		 * are not judged (they pass, as does everything not for us). */
		if ((void *)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_TCP)
			return XDP_PASS;
		th = (void *)(ip6 + 1);
		if ((void *)(th + 1) > end || th->dest != bpf_htons(cfg_port))
			return XDP_PASS;
		syn = th->syn && !th->ack;
		__builtin_memcpy(k.addr, &ip6->saddr, 16);
		denied = bpf_map_lookup_elem(&xdp_deny_v6, &k) != NULL;
		allowed = bpf_map_lookup_elem(&xdp_allow_v6, &k) != NULL;
		src = ip6->saddr;
	} else {
		return XDP_PASS;
	}
	st = bpf_map_lookup_elem(&xdp_stats, &zero);
	if (!st)
		return XDP_PASS;
	return judge(st, denied, allowed, syn, &src);
}
