/* SPDX-License-Identifier: MIT */
/*
 * Keys and values of the BPF maps, shared by bpf/kvsplice.bpf.c and the
 * userspace tools. Every value is a named struct so that BTF describes it and
 * `bpftool map dump pinned /sys/fs/bpf/kvsplice/<map>` prints field names.
 */
#ifndef KVSPLICE_MAPS_H
#define KVSPLICE_MAPS_H

#include <linux/types.h>

#include "kvsplice/budget.h"

#define KVS_MAX_BACKENDS 64
/* Upstream connections the kernel spreads a backend's requests over. */
#define KVS_MAX_POOL 16
#define KVS_DEFAULT_POOL 2

#define KVS_DEFAULT_PIN_DIR "/sys/fs/bpf/kvsplice"

/*
 * SOCKHASH keys. A client socket is keyed by its socket cookie (unique for
 * the life of the machine, never reused, so a late response can never reach
 * a new connection that took an old id). Upstream sockets get keys with the
 * top bit set, which cookies (a counter from 1) never reach.
 */
#define KVS_UPSTREAM_KEY_BIT (1ULL << 63)

static inline __u64 kvs_upstream_key(__u32 backend, __u32 slot)
{
	return KVS_UPSTREAM_KEY_BIT | ((__u64)backend << 16) | slot;
}

/* The punt socket: where the kernel sends the controller what it does not
 * route itself (slow-path requests, PINGs, malformed frames). */
#define KVS_PUNT_KEY (1ULL << 62)

/*
 * The gateway-owned gw_backend header field, which backends echo unchanged:
 * the low 8 bits name the backend, the high 24 the work charged to it for
 * this request, in 16-token blocks. The kernel adds the charge to the
 * backend's outstanding work when it sends the request. With the prefill
 * released at the first token (the default), the prefill part comes off
 * when the first CHUNK comes back (the backend has computed the prompt by
 * then) and the rest when the END or ERROR does, and a per-request record in
 * the inflight map remembers what is still held; a request whose record is
 * gone falls back to the echoed charge, so the count cannot drift for good.
 * Released at the END only, the record holds the echoed charge.
 */
#define KVS_GW_BACKEND_BITS 8
/* gw_backend of a request the kernel punts to the controller already over
 * its client's --max-client-inflight: the controller answers busy (no
 * backend index is 254; stamp_client() marks punted frames 255). */
#define KVS_GW_OVER_LIMIT 0xfffffffeu
/* gw_backend of a request the kernel punts having found no route for it at
 * all (cache key, hint, every checkpoint): the controller need not look the
 * checkpoints up again (no backend index is 253). */
#define KVS_GW_NO_ROUTE 0xfffffffdu
/* gw_backend of a client's request the kernel punts over the client's
 * controller budget (include/kvsplice/budget.h): the controller answers
 * busy without deciding (no backend index is 252). */
#define KVS_GW_OVER_BUDGET 0xfffffffcu
/* gw_backend of the frame (of any type) with which a client went
 * close_after frames over its budget: the controller answers busy and
 * closes the connection (no backend index is 251). */
#define KVS_GW_BUDGET_CLOSE 0xfffffffbu
/* gw_backend of an ERROR the controller writes about a client's connection
 * (its bad frame, a frame timeout, the idle close, a stop's word that it
 * closes), not about a request it was handed: the kernel delivers it and
 * counts none of the client's requests ended (no backend index is 250).
 * Counted as an end, it took one request in flight off the client's
 * count, and one still streaming was never cancelled when it closed. */
#define KVS_GW_NOTICE 0xfffffffau

#define KVS_GW_CHARGE_MAX 0xffffffu

static inline __u32 kvs_gw_pack(__u32 backend, __u32 charge_blocks)
{
	if (charge_blocks > KVS_GW_CHARGE_MAX)
		charge_blocks = KVS_GW_CHARGE_MAX;
	return charge_blocks << KVS_GW_BACKEND_BITS | (backend & 0xff);
}

static inline __u32 kvs_gw_backend(__u32 v)
{
	return v & 0xff;
}

static inline __u32 kvs_gw_charge(__u32 v)
{
	return v >> KVS_GW_BACKEND_BITS;
}

/* Work a request brings, in 16-token blocks: the prompt tokens not expected
 * in the cache, plus one token of work per token to generate. */
static inline __u32 kvs_work_blocks(__u32 prompt_tokens, __u32 cached_blocks, __u32 max_tokens)
{
	__u64 cached = (__u64)cached_blocks * 16;
	__u64 work = (prompt_tokens > cached ? prompt_tokens - cached : 0) + (__u64)max_tokens;

	work = (work + 15) / 16;
	return work > KVS_GW_CHARGE_MAX ? KVS_GW_CHARGE_MAX : (__u32)work;
}

/*
 * The output tokens a request is charged for before it has produced any:
 * what it declares (0: nothing declared), capped by what requests have been
 * producing lately (expect, learnt from the backends' ENDs by the
 * controller and published in each backend's record; 0: nothing learnt).
 * A client's max_tokens is a bound, not a length: charged as one, a
 * declared 4096 made every request look like 4,096 tokens of decode.
 */
#define KVS_EXPECT_OUTPUT_INIT 256 /* until the first ENDs are seen */

static inline __u32 kvs_charged_output(__u32 max_tokens, __u64 expect)
{
	if (!expect)
		return max_tokens;
	if (!max_tokens || max_tokens > expect)
		return (__u32)(expect < 0xffffffffu ? expect : 0xffffffffu);
	return max_tokens;
}

/* The controller's estimate after a tick that saw ends ENDs reporting
 * out_tokens tokens generated: a moving average (a quarter the new). */
static inline __u64 kvs_expect_output(__u64 expect, __u64 out_tokens, __u64 ends)
{
	__u64 avg;

	if (!ends)
		return expect;
	avg = (out_tokens + ends / 2) / ends;
	if (!avg)
		avg = 1;
	return expect ? (3 * expect + avg + 2) / 4 : avg;
}

/* Of a charge of charge_blocks for a request generating max_tokens, the
 * tokens that are prefill work: the charge less one token per output token
 * (the charge rounds up, so this errs high by under one block). */
static inline __u64 kvs_prefill_charge(__u32 charge_blocks, __u32 max_tokens)
{
	__u64 work = (__u64)charge_blocks * 16;

	return work > max_tokens ? work - max_tokens : 0;
}

/*
 * inflight map: one record per request the kernel sent to a backend and has
 * not seen end, keyed by the client's socket cookie and its req_id (both
 * echoed by the backend). It holds what the request still charges its
 * backend, and it is the list of requests a backend owes answers: when the
 * backend dies, the controller answers each of them with an ERROR. An LRU
 * map: if more requests than it holds are in flight, the oldest records go,
 * their ENDs fall back to the echoed charge (counted in
 * kvs_stats.inflight_lost), and a backend failure cannot name them.
 */
#define KVS_MAX_INFLIGHT 65536

struct kvs_req_key {
	__u64 conn;   /* client socket cookie */
	__u64 req_id; /* the client's request id */
};

struct kvs_inflight {
	__u32 backend;
	__u32 out_tokens;     /* output tokens charged (kvs_charged_output) */
	__u64 held_tokens;    /* work still charged to the backend */
	__u64 prefill_tokens; /* of which prefill, until the first CHUNK */
};

/* What a socket in the SOCKHASH is; conns map value, keyed by cookie. */
enum kvs_role {
	KVS_ROLE_CLIENT = 1,   /* accepted from a client */
	KVS_ROLE_UPSTREAM = 2, /* pooled connection to a backend */
	KVS_ROLE_INJECT = 3,   /* controller's own path into the kernel */
	KVS_ROLE_PUNT = 4,     /* the kernel's path to the controller */
};

/* A socket's address as the controller saw it (getsockname/getpeername),
 * so an operator's tools can match a map entry with ss or inet_diag. */
struct kvs_endpoint {
	__u8 addr[16]; /* IPv4 in the first 4 bytes; network byte order */
	__u16 port;    /* host byte order */
	__u16 family;  /* AF_INET or AF_INET6; 0: unknown */
	__u32 pad;
};
struct kvs_conn {
	__u32 role; /* enum kvs_role */
	/* Named, not anonymous: BTF names an anonymous member "", and
	 * bpftool's JSON dump printed it as the key "". */
	union {
		__u32 backend; /* UPSTREAM: backend index */
		__u32 tenant;  /* CLIENT: its tenant's index in the tenants
				* map (kvspliced --tenant-source); 0: none */
	} by_role;
	__u32 slot;	/* UPSTREAM: pool slot */
	__u32 inflight; /* CLIENT: requests sent to a backend, not yet ended;
			 * a client that sent FIN is closed once it is 0 */
	__u32 path;	/* 0: the kernel's data path; 1: the userspace one (the
			* controller reads and writes the socket, and counts
			* frames, bytes and inflight here on its 100 ms tick) */
	__u32 limit;	/* CLIENT: its own in-flight limit (a front, kvspliced
		       * --front-source); 0: the gateway's --max-client-inflight */
	__u64 frames;	/* frames read from this socket (path 0: by the verdict) */
	__u64 bytes;
	__u64 partial_since_ns;		   /* CLIENT: a frame began then (CLOCK_MONOTONIC)
				 * and has not completed; 0: none */
	struct kvs_endpoint local, remote; /* CLIENT and UPSTREAM */
	/* CLIENT: what it may make the controller do, set when it is
	 * accepted (rate 0 for a front: no limit); the verdict takes from it
	 * for every frame it passes up (include/kvsplice/budget.h). */
	struct kvs_budget ctl;
};

/* A tenant bound to where its clients come from (kvspliced
 * --tenant-source CIDR=SALT): the gateway writes the salt into every
 * REQUEST of its clients, as it writes gw_conn, so that a client cannot
 * choose another tenant's cache domain. Entry 0 is unused ("no tenant"). */
#define KVS_MAX_TENANTS 256
struct kvs_tenant {
	__u64 salt;	 /* cache_salt its clients' requests carry */
	__u64 requests;	 /* REQUESTs of its clients the kernel saw */
	__u64 rewritten; /* of those, carrying another salt, overwritten */
};

/* A tenant's share of the routes map (kvspliced --tenant-routes), index as
 * the tenants map's (0: clients bound to no tenant). While share is set, a
 * route for one of its clients is installed only while routes < share, and
 * the shares sum to less than the map's capacity (less a reserve per CPU:
 * a request seeing room may add all its routes), so that the LRU never
 * has to evict: one tenant's flood of new prompts cannot push out
 * another's routes. routes is kept by whoever adds or deletes a route (the
 * kernel's learning and withdrawals, the controller's installs) and
 * recounted by the controller. share 0: no share, nothing counted. */
struct kvs_route_share {
	__u64 routes;  /* its routes in the map (as counted) */
	__u64 share;   /* at most this many; 0: no limit */
	__u64 refused; /* requests that taught no route: the share was full */
	__u64 trimmed; /* its least used routes the controller removed to
			* make room (kvspliced's recount, once it is near full) */
};

/*
 * backend_ttft map value (ARRAY, mmapable, one per backend index): the
 * time to first token each backend reports in its END frames (queue_us +
 * prefill_us: from the request's arrival at the server to its first
 * token), as a histogram, with the two parts summed apart, so an operator
 * sees a backend's TTFT percentiles and whether its time goes to waiting
 * (load) or to computing (prefill: cache misses). Counted by the kernel
 * for the requests it splices and by the controller for those of the
 * userspace path; an END that reports no time (0: a backend that does not
 * measure it) is not counted. Cleared with the backend's slot.
 */
#define KVS_TTFT_BUCKETS 23 /* 22 upper bounds, then +Inf */
/* The upper bounds, in microseconds (Prometheus le: these / 1e6): vLLM's
 * own vllm:time_to_first_token_seconds (vllm/v1/metrics/loggers.py), so
 * that the gateway's and the servers' histograms read alike. */
#define KVS_TTFT_BOUNDS_US                                                                         \
	1000ULL, 5000ULL, 10000ULL, 20000ULL, 40000ULL, 60000ULL, 80000ULL, 100000ULL, 250000ULL,  \
		500000ULL, 750000ULL, 1000000ULL, 2500000ULL, 5000000ULL, 7500000ULL, 10000000ULL, \
		20000000ULL, 40000000ULL, 80000000ULL, 160000000ULL, 640000000ULL, 2560000000ULL

struct kvs_ttft {
	__u64 count;			/* ENDs that reported a first-token time */
	__u64 queue_us;			/* their queue times, summed */
	__u64 prefill_us;		/* their prefill times, summed */
	__u64 bucket[KVS_TTFT_BUCKETS]; /* by queue + prefill; not cumulative */
};

/* The upper bounds, as an array (the kernel's in .rodata, not on the
 * verdict's 512 bytes of stack). */
static const __u64 kvs_ttft_bounds_us[KVS_TTFT_BUCKETS - 1] = { KVS_TTFT_BOUNDS_US };

/* The bucket of a TTFT of us microseconds: the first bound it is at most,
 * else the last (+Inf). */
static inline __u32 kvs_ttft_bucket(__u64 us)
{
	__u32 i;

	for (i = 0; i < KVS_TTFT_BUCKETS - 1; i++)
		if (us <= kvs_ttft_bounds_us[i])
			return i;
	return KVS_TTFT_BUCKETS - 1;
}

enum kvs_backend_state {
	KVS_BE_ABSENT = 0,
	KVS_BE_UP = 1,
	KVS_BE_DRAINING = 2,  /* no new requests; in-flight ones finish */
	KVS_BE_DOWN = 3,      /* no connection: retried with back-off */
	KVS_BE_REMOVING = 4,  /* draining, then removed once nothing is in flight */
	KVS_BE_PROBATION = 5, /* connected after a failed health check: no new
			       * requests until it answers a PING */
	KVS_BE_NOT_READY = 6, /* answers PINGs, but says its server cannot serve:
			       * no new requests, in-flight ones finish; down
			       * after three health intervals of it */
};
#define KVS_BE_STATES 7
/* What a backend said of itself in its last PONG (the controller's health
 * check); zeros until it answers one. */
struct kvs_be_report {
	__u32 running;	      /* requests it is running */
	__u32 waiting;	      /* requests queued */
	__u32 kv_used_blocks; /* of its KV cache, in its own blocks */
	__u32 kv_total_blocks;
	__u64 at_ns; /* CLOCK_MONOTONIC of the PONG; 0: never */
};

/* The fleet's charged work by hot window (include/kvsplice/place.h, "Hot
 * prefixes", kvs_hot_roll). */
struct kvs_hot_fleet {
	__u64 at;   /* the window's start, ns (CLOCK_MONOTONIC); 0: none yet */
	__u64 base; /* the fleet's charged tokens then */
	__u64 prev; /* charged in the previous window */
};

/* backends map value, index = backend index. Written by the controller
 * (state, pool_size, max_outstanding) and updated atomically by the kernel
 * (everything else). */
struct kvs_backend {
	__u32 state;		/* enum kvs_backend_state */
	__u32 pool_size;	/* upstream slots 0..pool_size-1 are in use */
	__u32 max_outstanding;	/* requests; above it the kernel defers */
	__u32 route_gen;	/* routes of an older generation are void */
	__u64 work_limit;	/* tokens; above it the kernel defers (0: none) */
	__u64 outstanding;	/* requests sent and not yet ended */
	__u64 outstanding_work; /* tokens of work charged and not yet ended */
	__u64 req_frames;	/* requests sent to this backend (both paths) */
	__u64 req_bytes;
	__u64 resp_frames; /* CHUNK, END and ERROR frames back */
	__u64 resp_bytes;
	__u64 ends; /* END and ERROR frames back */
	/* From the backends' END frames: */
	__u64 prompt_tokens;	 /* prompt tokens reported */
	__u64 cached_tokens;	 /* of which served from its prefix cache */
	__u64 predicted_cached;	 /* what the gateway expected cached */
	__u64 mispredicted;	 /* expected cached beyond what it had */
	__u64 unexpected_cached; /* cached beyond what was expected
				  * (kvs_unexpected_cached) */
	__u64 index_blocks;	 /* controller: its index of this backend's cache */
	__u64 charged_tokens;	 /* work charged to it over all time (both paths) */
	__u64 output_tokens;	 /* generated, from its END frames (both paths) */
	__u64 expect_output;	 /* controller: output tokens a request is charged
			      * for at most (kvs_charged_output) */
	/* Placement (include/kvsplice/place.h): */
	__u64 place_seed; /* controller: kvs_str_hash of its ADDR:PORT */
	__u64 placed;	  /* kernel: decaying count of new prefixes placed */
	/* controller: the fleet's charged work by hot window (kvs_hot_roll),
	 * the same in every backend's record */
	struct kvs_hot_fleet hot;
	/* Controller-written, for operators: */
	struct kvs_endpoint addr;    /* the backend's address */
	struct kvs_be_report report; /* its last PONG */
	/* Kernel: req_id of the last health-check PONG it passed up to the
	 * controller (the controller zeroes it with each PING): an answer
	 * the controller has not read yet is not the backend's silence. */
	__u64 pong_seen;
	char reason[128]; /* why it is not up (the last failure); "" while up */
};

/* routes map value, key = prefix or cache-key hash (include/kvsplice/hash.h). */
/* Entries of the routes map (an LRU: when full, it evicts whatever is
 * least recently used, whoever installed it). */
#define KVS_ROUTES_MAX 262144
struct kvs_route {
	__u32 backend;
	__u32 depth_blocks; /* prefix depth the hash covers; 0 = cache key */
	__u32 gen;	    /* the backend's route_gen when installed */
	__u32 tenant;	    /* the tenant index of the client whose request
			     * installed it (0: unbound), whose share counts it */
	__u64 installed_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u64 hits;	    /* requests the kernel routed with it */
	/* Requests whose prompt matched it, in windows (include/kvsplice/
	 * place.h, "Hot prefixes"): the window's start, this one's count and
	 * the previous one's. */
	__u64 hot_at;
	__u32 hot_cur, hot_prev;
	/* Backends (bit = index) other than its own that a hot route sent
	 * its prefix to (include/kvsplice/place.h, "Hot prefixes"): each
	 * replica's first request is charged for the whole prompt, as it
	 * recomputes it, the next ones for the route's depth. A bit is
	 * cleared as that backend's index evicts the prefix (kvs_withdraw). */
	__u64 replicas;
};

/*
 * Routes the controller installs in one go (the kvs_install program, run
 * with BPF_PROG_RUN) for a request it decided: each written where the map
 * has no route for its hash, or written over the route there with that
 * route's counters (hits, the hot window) kept, so that a hot prefix the
 * controller re-decides stays hot. The program says in was what the hash
 * had: KVS_INSTALL_NEW (nothing), KVS_INSTALL_FAILED (not written), or
 * the tenant index whose share counted the route it replaced.
 */
#define KVS_INSTALL_BATCH 32
#define KVS_INSTALL_NEW 0xffffffffu
#define KVS_INSTALL_FAILED 0xfffffffeu
struct kvs_install {
	__u64 hash;
	__u32 depth_blocks;
	__u32 was; /* written by the program */
};
struct kvs_install_batch {
	__u32 n;
	__u32 backend;
	__u32 gen;
	__u32 tenant;
	__u64 installed_ns;
	struct kvs_install e[KVS_INSTALL_BATCH];
};

/*
 * Routes the controller withdraws in one go (the kvs_withdraw program, run
 * with BPF_PROG_RUN): each is deleted if it still names that backend (a
 * route re-pointed since is not the caller's to remove); a route naming
 * another has that backend taken off its hot replicas (struct kvs_route).
 */
#define KVS_WITHDRAW_BATCH 64
struct kvs_withdraw {
	__u64 hash;
	__u32 backend;
	__u32 pad;
};
struct kvs_withdraw_batch {
	__u32 n;
	__u32 pad;
	struct kvs_withdraw e[KVS_WITHDRAW_BATCH];
};

/* The kvs_count_routes program's context: the routes map's entries. */
struct kvs_route_count {
	__s64 routes;
};

/* stats map value (per CPU, one slot): everything the kernel decides. */
struct kvs_stats {
	__u64 fast_path_frames;	 /* requests the kernel routed by itself */
	__u64 slow_path_frames;	 /* requests punted to the controller */
	__u64 inject_frames;	 /* frames the controller re-injected */
	__u64 resp_frames;	 /* responses spliced back to a client */
	__u64 cache_key_hits;	 /* fast-path requests routed by explicit key */
	__u64 drop_no_client;	 /* response for a client that is gone */
	__u64 pass_no_upstream;	 /* route found but no upstream socket */
	__u64 pass_saturated;	 /* route found but backend full or not up */
	__u64 pass_shallow;	 /* match too shallow for the prompt */
	__u64 pass_stale;	 /* route to a backend that left since */
	__u64 routes_learned;	 /* deeper routes the kernel installed itself */
	__u64 pass_bad_frame;	 /* malformed client frame: punted as ERROR */
	__u64 pass_other;	 /* other frames punted (client PING; CANCEL of a
				  * request the controller may still hold) */
	__u64 drop_bad_upstream; /* malformed or non-response from a backend */
	__u64 drop_punt;	 /* punt socket missing: frame lost */
	__u64 frames_at_offset;	 /* frames not at the start of their skb */
	__u64 inflight_lost;	 /* END with no inflight record: echoed charge used */
	__u64 pass_client_limit; /* a client at its in-flight limit: punted, the
				  * controller answers busy */
	__u64 cancel_frames;	 /* CANCELs sent to the backend of their request
				  * (a client's, or the controller's) */
	__u64 drop_cancel;	 /* CANCELs for no request in flight: dropped */
	/* Requests the kernel placed itself (include/kvsplice/place.h), by
	 * why no route was followed; all of them also count as fast path. */
	__u64 placed_cold;    /* no route at all */
	__u64 placed_shallow; /* only a route too shallow for the prompt */
	__u64 placed_spill;   /* the route's backend was saturated or not up */
	__u64 placed_stale;   /* the route named a backend that left */
	__u64 kept_holder;    /* a route followed past its bound, as a second
			       * holder would cost more (kvs_place_keep) */
	__u64 hot_replica;    /* a hot route followed to another replica
			       * than its backend (place.h, "Hot prefixes") */
	__u64 reports;	      /* decisions reported to the controller */
	__u64 reports_lost;   /* ... that found the ring full: lost */
	/* A client over its controller budget (include/kvsplice/budget.h): */
	__u64 drop_budget; /* its PINGs and CANCELs dropped */
	__u64 pass_budget; /* its requests punted marked, answered busy */
	/* Verdicts nested on one CPU: one run by the strparser's worker
	 * (kstrp, process context) interrupted by one from softirq, each
	 * with a scratch slot of its own (bpf/datapath/maps.bpf.h, nest): */
	__u64 verdict_nested;	 /* verdicts begun while another ran */
	__u64 verdict_nest_full; /* ... with no slot left: a REQUEST went to
				  * the controller, a run of frames dropped */
};

/*
 * What the verdict tells the controller of each request it sends (the
 * reports ring): which backend and why, and the prompt's group hashes as
 * far as it hashed them (the hash of every KVS_INDEX_GROUP-th block), from
 * which the controller keeps its index of each backend's cache and the
 * hashes of the routes the kernel installed. Variable length: g[] holds
 * ngroups hashes.
 */
enum kvs_why {
	KVS_WHY_KEY = 1,     /* followed the cache key's route */
	KVS_WHY_HINT = 2,    /* followed the hinted prefix's route */
	KVS_WHY_PREFIX = 3,  /* followed a checkpoint's route */
	KVS_WHY_KEPT = 4,    /* followed a route past its bound: a second
			      * holder would cost more (kvs_place_keep) */
	KVS_WHY_COLD = 5,    /* placed: no route */
	KVS_WHY_SHALLOW = 6, /* placed: the deepest route was too shallow */
	KVS_WHY_SPILL = 7,   /* placed: the route's backend was saturated */
	KVS_WHY_STALE = 8,   /* placed: the route's backend had left */
};
#define KVS_WHY_MAX KVS_WHY_STALE
#define KVS_REPORT_MAX_GROUPS 256 /* KVS_MAX_WINDOW_BLOCKS / KVS_INDEX_GROUP */
/* Bytes of reports ring: a burst of ~4,000 requests with 64 KiB prompts. */
#define KVS_REPORTS_RING (8u << 20)

struct kvs_report {
	__u64 conn; /* client socket cookie */
	__u64 req_id;
	__u64 key;	 /* the placement key (placed), or the route's hash */
	__u64 cache_key; /* the cache key's route hash; 0: none */
	__u32 backend;
	__u16 why;     /* enum kvs_why */
	__u16 ngroups; /* hashes in g[] */
	__u32 depth;   /* blocks of the route matched (0: none, or a key) */
	__u32 blocks;  /* blocks hashed */
	__u32 hint;    /* the client's hint, in blocks (kvs_hint_blocks) */
	__u32 prompt_tokens;
	__u32 charge; /* work charged, in blocks */
	__u32 gen;    /* the backend's route_gen when sent: a report read after
		       * its slot changed hands names a backend that is gone */
	__u64 g[KVS_REPORT_MAX_GROUPS];
};

/* chain map value (per CPU): the block hashes of the last request frame the
 * verdict routed on that CPU. Scratch space for the verdict, pinned so that
 * a test can read back what the kernel computed and compare it with
 * userspace (tests/integration/test_hash_kernel.sh). */
#define KVS_CHAIN_MAX 1024 /* = KVS_MAX_WINDOW_BLOCKS */

struct kvs_chain {
	__u64 req_id; /* the frame's req_id */
	__u32 n;      /* block hashes computed */
	__u32 pad;
	__u64 h[KVS_CHAIN_MAX];
};

/* ctl_stats map value: the controller's own counters (it is the only
 * writer), pinned beside the kernel's so one dump shows both. Any change
 * to it, a counter appended too, needs a new KVS_HO_VERSION (a take-over hands it over and reuses the pinned map:
 * tests/unit/test_ho_layout.c); a kvsplicectl of another build refuses the
 * map (kvs_pin_open: its value size differs). */
struct kvs_ctl_stats {
	__u64 slow_frames;	/* requests the controller routed */
	__u64 slow_bytes;	/* bytes it copied to do so */
	__u64 routes_installed; /* route-map entries written */
	__u64 routes_withdrawn; /* removed as the index evicted their prefix */
	__u64 errors_sent;	/* ERROR frames sent to clients */
	__u64 bad_frames;	/* malformed frames from clients */
	__u64 no_backend;	/* requests no backend could take */
	__u64 clients_accepted;
	__u64 clients_closed;
	__u64 upstream_failures;    /* upstream connections lost or refused */
	__u64 decided_prefix;	    /* slow-path decisions: longest cached prefix */
	__u64 decided_spill;	    /* a holder too loaded: a second backend */
	__u64 decided_shared;	    /* only a short shared prefix cached: by load */
	__u64 decided_cold;	    /* nobody holds it: consistent hashing */
	__u64 failed_inflight;	    /* requests answered with an ERROR as their
				  * backend went down mid-request */
	__u64 clients_half_closed;  /* clients that sent FIN (closed or
				    * half-closed): kept open until the answers
				    * they are owed are out, or they reset */
	__u64 clients_early_closed; /* clients that shut down before they were
				     * accepted: answered with an ERROR, closed */
	__u64 frame_timeouts;	    /* clients that began a frame and did not finish
				  * it within --frame-timeout-ms: ERROR timeout */
	__u64 busy_client;	    /* requests refused busy: their connection had
				  * --max-client-inflight in flight */
	__u64 health_failures;	    /* backends ejected: no PONG to the health
				  * check within three intervals */
	__u64 user_path_frames;	    /* requests the userspace data path routed */
	__u64 user_path_bytes;	    /* bytes of them it copied */
	__u64 user_path_no_client;  /* responses on the userspace path whose
				    * client had gone: dropped */
	__u64 cancels_sent;	    /* CANCELs the controller sent of its own: for
				    * requests of clients that went away, and for
				    * those it ended itself (their backend went) */
	__u64 user_path_cancels;    /* clients' CANCELs the userspace path sent on */
	__u64 user_cancels_dropped; /* ... and dropped: no such request in flight */
	__u64 reports_read;	    /* the kernel's reports the index learnt from */
	__u64 reports_bad;	    /* ... malformed, or naming no backend: ignored */
	__u64 reports_stale;	    /* ... of a backend that has left since: ignored */
	__u64 accept_failed;	    /* accepts of clients that failed (EMFILE: out
				     * of descriptors), each followed by a back-off */
	__u64 clients_shed;	    /* clients accepted on the reserve descriptor
				     * while out of them: answered busy, closed */
	__u64 clients_over_source;  /* clients refused busy: their source held
				     * --max-source-conns already */
	__u64 clients_idle_closed;  /* clients closed after --idle-timeout-ms
				     * with nothing in flight nor received */
	/* Clients over their controller budget (--ctl-rate): */
	__u64 busy_budget;    /* requests answered busy without a decision */
	__u64 budget_dropped; /* PINGs and CANCELs dropped by the userspace path
			       * (the kernel's: kvs_stats.drop_budget) */
	__u64 budget_closed;  /* connections closed for staying over it */
	__u64 decided_hot;    /* slow-path decisions: a hot prefix placed among
			       * its replicas (include/kvsplice/place.h) */
	__u64 health_held;    /* checks past their deadline not ejected: the
			       * PONG passed up unread, responses still
			       * coming, or a direct PING answered */
};

#endif /* KVSPLICE_MAPS_H */
