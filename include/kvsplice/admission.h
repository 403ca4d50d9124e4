/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * Admission control at the gateway's interface (bpf/admission.bpf.c, an XDP
 * program): keys and values of its maps, shared by the program, the
 * controller that fills them and kvsplicectl that reads them.
 *
 * Only TCP packets to the gateway's port are judged; everything else passes.
 * In order: a source in a deny CIDR is dropped; with an allow list, a source
 * in none of its CIDRs is dropped; a SYN beyond its source's token bucket
 * (--syn-rate per second, --syn-burst deep) is dropped.
 */
#ifndef KVSPLICE_ADMISSION_H
#define KVSPLICE_ADMISSION_H

#include <linux/types.h>

/* LPM trie keys: prefix length in bits, then the address (network order). */
struct kvs_lpm_v4 {
	__u32 prefixlen;
	__u8 addr[4];
};

struct kvs_lpm_v6 {
	__u32 prefixlen;
	__u8 addr[16];
};

/* Per-source SYN token bucket (key: the source address, IPv4 mapped into
 * IPv6 as ::ffff:a.b.c.d). Updated without a lock: two CPUs racing on one
 * source can let a SYN or two more through, never fewer. */
struct kvs_syn_bucket {
	__u64 last_ns;	    /* when it was last refilled */
	__u64 milli_tokens; /* tokens x 1000, at most burst x 1000 */
};

/* Per-CPU counters (xdp_stats); kvsplicectl sums them. */
struct kvs_xdp_stats {
	__u64 passed;		/* packets to the gateway port let through */
	__u64 syn_passed;	/* of which SYNs */
	__u64 drop_denied;	/* source in a deny CIDR */
	__u64 drop_not_allowed; /* an allow list exists and the source is in none */
	__u64 drop_syn_rate;	/* SYN over its source's rate */
};

#define KVS_ADM_MAX_CIDRS 16384
#define KVS_ADM_MAX_SOURCES 65536

#endif /* KVSPLICE_ADMISSION_H */
