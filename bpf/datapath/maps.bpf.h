/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The data path's state: the skb fields read by CO-RE, the configuration
 * the controller sets before load (rodata), the maps (pinned by name), and
 * the per-CPU scratch of each verdict running. The rest of bpf/datapath/
 * reads it.
 */
#ifndef KVS_DP_MAPS_BPF_H
#define KVS_DP_MAPS_BPF_H

/*
 * The strparser hands both programs an skb whose frame starts at
 * strp.offset, not at 0, whenever the previous frame ended inside the same
 * TCP skb. The offset lives in the kernel skb's control block; these are the
 * few fields we need, relocated by CO-RE against the running kernel's BTF.
 */
struct strp_msg {
	int full_len;
	int offset;
} __attribute__((preserve_access_index));

struct _strp_msg {
	struct strp_msg strp;
} __attribute__((preserve_access_index));

struct sk_skb_cb {
	struct _strp_msg strp;
} __attribute__((preserve_access_index));

struct sk_buff {
	char cb[48];
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* Set by the controller before load (rodata, frozen at load time). */
const volatile __u32 cfg_max_payload = KVS_DEFAULT_MAX_PAYLOAD;
const volatile __u32 cfg_window_blocks = KVS_MAX_WINDOW_BLOCKS;
/* A prefix match covering less than this percentage of the prompt (a system
 * prompt everybody shares) is not followed: the controller decides. */
const volatile __u32 cfg_min_match_pct = 30;
/* Release a request's prefill charge at its first CHUNK (1) rather than
 * holding the whole charge until its END (0); see release_prefill(). */
const volatile __u32 cfg_release_prefill_early = 1;
/* Requests one client connection may have in flight (0: no limit). Answers
 * to a client that stops reading pile up in the kernel's queue for its
 * socket; this caps how many can. */
const volatile __u32 cfg_client_max_inflight = 0;

/* A client connection at its in-flight limit: its own (a front's), else
 * the gateway's; 0 is no limit. */
static __always_inline int conn_at_limit(const struct kvs_conn *c)
{
	__u32 lim = c->limit ? c->limit : cfg_client_max_inflight;

	return lim && c->inflight >= lim;
}
/* Place requests no route covers here (1), by include/kvsplice/place.h,
 * rather than hand them to the controller (0). */
const volatile __u32 cfg_kernel_place = 1;
/* How far past the mean a holder keeps a request (kvs_place_keep), in
 * 1/KVS_PLACE_ONE of the mean. */
const volatile __u32 cfg_keep_balance = 2048; /* 2.0 */
/* What a recomputed token costs against a queued one (kvs_place_keep). */
const volatile __u32 cfg_recompute_weight = 16;

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* socket cookie */
	__type(value, struct kvs_conn);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KVS_MAX_TENANTS);
	__type(key, __u32);
	__type(value, struct kvs_tenant);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} tenants SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KVS_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct kvs_backend);
	/* The controller mmaps it to set state fields in place, without
	 * overwriting counters the kernel is incrementing. */
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KVS_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct kvs_ttft);
	/* The userspace path counts its ENDs into it too, with atomic adds
	 * through an mmap, as the kernel does. */
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} backend_ttft SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, KVS_ROUTES_MAX);
	__type(key, __u64); /* prefix hash or cache-key hash */
	__type(value, struct kvs_route);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KVS_MAX_TENANTS);
	__type(key, __u32); /* tenant index */
	__type(value, struct kvs_route_share);
	/* The controller mmaps it to count its own installs and deletions
	 * with atomic adds, as the kernel does. */
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} route_shares SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, KVS_MAX_INFLIGHT);
	__type(key, struct kvs_req_key);
	__type(value, struct kvs_inflight);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kvs_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kvs_ctl_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} ctl_stats SEC(".maps");

_Static_assert(KVS_CHAIN_MAX == KVS_MAX_WINDOW_BLOCKS, "chain holds the whole window");

/* The verdict's reports of what it decided, read by the controller. A
 * report that finds the ring full is lost (counted): the request is sent
 * all the same. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, KVS_REPORTS_RING);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} reports SEC(".maps");

_Static_assert(KVS_REPORT_MAX_GROUPS *KVS_INDEX_GROUP == KVS_MAX_WINDOW_BLOCKS,
	       "a report holds the window's groups");

#include "place.bpf.h"

/* An END's payload as the kernel reads it: struct kvs_end's first fields. */
struct end_wire {
	__be32 prompt_tokens, cached_tokens, output_tokens, queue_us, prefill_us;
};

/*
 * A verdict's scratch: its run's walk, its request's chain of block
 * hashes, report and placement state. Per CPU, and a slot per verdict
 * running on that CPU: a verdict runs in process context too, in the
 * strparser's worker (kstrp, do_strp_work: the bytes came while the socket
 * was owned, as it is while its psock's backlog writes into it), with only
 * migration disabled, and a verdict from softirq on the same CPU can
 * interrupt it anywhere. Sharing one scratch, the interrupted request
 * would go on with the other's chain (and follow its route, learn routes
 * to the wrong backend, report the other's prefixes), an interrupted run
 * redirect its frames to the other run's client.
 *
 * nest counts the verdicts running on the CPU; the verdict (kvs_verdict)
 * takes slot nest - 1 for its whole run and gives it back as it returns. A
 * verdict that interrupts another returns before the other goes on (kstrp
 * is an ordered workqueue, one work item at a time, and softirq does not
 * nest), so the count is a stack, and two deep in practice; past KVS_NEST slots a
 * verdict has none (counted): its request goes to the controller, its run
 * is dropped. (Not for PREEMPT_RT, where softirq runs in a thread that
 * can be preempted.)
 */
#define KVS_NEST 3
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	/* Pinned: after a take-over, the sockets handed over keep the old
	 * controller's verdict (a psock keeps the programs it was added
	 * with) while new ones get the new one, on one CPU too, and both use
	 * the pinned chain. With a count each, both would take chain slot 0. */
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} nest SEC(".maps");

/* The slots' keys, and nest's: read-only data, so that a lookup's key
 * takes no stack (the deepest call chain's is at the verifier's 512
 * bytes). */
static const __u32 slot_key[KVS_NEST + 1] = { 0, 1, 2, 3 };
_Static_assert(KVS_NEST == 3, "slot_key holds a key per slot and one past");

/* This verdict's slot's key: nest - 1, or KVS_NEST (no such slot) when
 * it has none. */
static __always_inline const __u32 *nest_slot(void)
{
	__u32 *n = bpf_map_lookup_elem(&nest, &slot_key[0]);

	return &slot_key[n && *n && *n <= KVS_NEST ? *n - 1 : KVS_NEST];
}

/* A run's walk (upstream_run, bpf/datapath/response.bpf.h): the frame
 * being read, an END's payload and the counts so far. In a map, not on a
 * stack: the verdict's 352 bytes leave upstream_run and its bpf_loop
 * callback 160 of the 512, and a frame's header alone is 64. */
struct run_state {
	struct kvs_hdr h;
	struct end_wire e;
	__be64 gw_conn;
	__u32 b, pos, end, frames, ends;
	int bad;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KVS_NEST);
	__type(key, __u32);
	__type(value, struct run_state);
} runs SEC(".maps");

/* A request's report, and the placement's state (too large for the
 * verdict's stack). */
struct scratch {
	struct place_walk pw;
	struct hot_walk hw;
	struct kvs_report rep;
	/* the prompt's bytes being hashed, a batch of blocks (hash_prompt) */
	__u64 blocks[KVS_HASH_BATCH * KVS_BLOCK_BYTES / 8];
	/* The frame's hot route (hot_route): its hash, and whether its pick
	 * is a replica the route has not sent its prefix to yet. Here, not
	 * in struct decision: the verdict's stack is at its 512 bytes. */
	__u64 hot_hash;
	__u32 hot_first, pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KVS_NEST);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

/* A request's chain of block hashes. Pinned, so that a test can read back
 * what the kernel computed (slot 0, where a verdict nothing interrupted
 * leaves it). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KVS_NEST);
	__type(key, __u32);
	__type(value, struct kvs_chain);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} chain SEC(".maps");

static __always_inline struct run_state *run_slot(void)
{
	return bpf_map_lookup_elem(&runs, nest_slot());
}

static __always_inline struct scratch *scratch_slot(void)
{
	return bpf_map_lookup_elem(&scratch, nest_slot());
}

static __always_inline struct kvs_chain *chain_slot(void)
{
	return bpf_map_lookup_elem(&chain, nest_slot());
}

#endif /* KVS_DP_MAPS_BPF_H */
