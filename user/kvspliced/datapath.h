/* SPDX-License-Identifier: MIT */
/*
 * The kernel data path as the controller sees it: loads bpf/kvsplice.bpf.c,
 * pins its maps, attaches the stream parser and verdict to the SOCKHASH, and
 * offers the few operations the controller needs on those maps.
 */
#ifndef KVS_DATAPATH_H
#define KVS_DATAPATH_H

#include <stdbool.h>
#include <stdint.h>

#include "codec.h"
#include "kvsplice/maps.h"
#include "datapath/route_count.h"
#include "pins.h"

struct kvsplice_bpf;

struct kvs_dp_opts {
	const char *pin_dir;
	uint32_t max_payload;	      /* largest payload the kernel frames */
	uint32_t window_blocks;	      /* prefix hashing window */
	uint32_t min_match_pct;	      /* shallower matches go to the controller */
	bool release_prefill_early;   /* prefill charge off at the first CHUNK */
	uint32_t client_max_inflight; /* per client connection; 0 = no limit */
	bool kernel_place;	      /* place requests no route covers */
	uint32_t keep_balance_fp;     /* a holder's, keeping a request (kvs_place_keep) */
	uint32_t recompute_weight;    /* a recomputed token against a queued one */
	bool takeover;		      /* the pins are a running controller's, handed over */
};

struct kvs_datapath {
	struct kvsplice_bpf *skel;
	char pin_dir[256];
	int lock_fd;
	struct kvs_pin_made made_pin; /* made by this process: removed at exit if empty */
	/* Found holding a kvspliced's pins (one killed before its clean exit,
	 * or one that handed them over): removed at exit if empty, as if
	 * made here. One found empty is the operator's, and kept. */
	bool adopted_pin;
	int socks_fd, conns_fd, routes_fd, ctl_fd, stats_fd, inflight_fd, reports_fd, tenants_fd;
	uint32_t keep_balance_fp;	/* the kernel's keep bound, fixed at load */
	struct kvs_backend *backends;	/* mmap of the backends map */
	struct kvs_route_share *shares; /* mmap of the route_shares map */
	struct kvs_ttft *ttft;		/* mmap of the backend_ttft map */
	bool handed_over;		/* kvs_dp_close leaves programs attached, maps pinned */
	bool in_memory;			/* no BPF (not permitted): backends in plain memory,
			   * every map fd -1 (their operations fail: EBADF) */
	struct kvs_route_counter count; /* the kernel's count of routes */
};

int kvs_dp_open(struct kvs_datapath *dp, const struct kvs_dp_opts *o);
/* Where BPF cannot be loaded, for the userspace data path alone: the
 * backend records in this process's memory, no maps, nothing pinned.
 * 0 or -ENOMEM. */
int kvs_dp_open_memory(struct kvs_datapath *dp);
/* Detaches and frees; unpin removes the pinned maps too (neither once
 * handed_over is set). */
void kvs_dp_close(struct kvs_datapath *dp, bool unpin);
/* The pin directory's lock, let go for a controller taking over, and taken
 * back if it never did. 0 or -errno. */
void kvs_dp_release_lock(struct kvs_datapath *dp);
int kvs_dp_relock(struct kvs_datapath *dp);

/* Registers a socket: conns[cookie] = *c, then socks[key] = fd. */
int kvs_dp_add_sock(struct kvs_datapath *dp, int fd, uint64_t key, uint64_t cookie,
		    const struct kvs_conn *c);
void kvs_dp_del_sock(struct kvs_datapath *dp, uint64_t key, uint64_t cookie);
/* socks[key] alone: the kernel stops reading the socket and redirecting
 * into it (what it had queued for it is dropped); its conns entry, and
 * the in-flight count the verdict keeps there, stay until
 * kvs_dp_del_sock. */
void kvs_dp_unsplice(struct kvs_datapath *dp, uint64_t key);
/* conns[cookie] alone, for a socket of the userspace data path: shown to
 * operators (kvsplicectl conns), never seen by the verdict. */
int kvs_dp_add_conn(struct kvs_datapath *dp, uint64_t cookie, const struct kvs_conn *c);
void kvs_dp_del_conn(struct kvs_datapath *dp, uint64_t cookie);
/* A client's entry given its in-flight limit and tenant (an adopted one's
 * may be from another configuration); its counters kept. 0 or -errno. */
int kvs_dp_client_bind(struct kvs_datapath *dp, uint64_t cookie, uint32_t limit, uint32_t tenant);

/* Requests of the client with this socket cookie in flight at a backend
 * (0 if it is not in the map). */
uint32_t kvs_dp_client_inflight(struct kvs_datapath *dp, uint64_t cookie);

/* Calls stale(ctx, cookie) for each client whose frame began before
 * since_ns and has not completed (conns' partial_since_ns). Reads the conns
 * map in batches. Returns how many, or -errno. */
typedef void (*kvs_dp_cookie_fn)(void *ctx, uint64_t cookie);
int kvs_dp_stale_partials(struct kvs_datapath *dp, uint64_t since_ns, kvs_dp_cookie_fn stale,
			  void *ctx);

/* Calls fn(ctx, cookie, entry) for each client of the kernel's data path
 * in the conns map (read in batches: a snapshot a batch at a time). 0 or
 * -errno. */
typedef void (*kvs_dp_client_fn)(void *ctx, uint64_t cookie, const struct kvs_conn *c);
int kvs_dp_walk_clients(struct kvs_datapath *dp, kvs_dp_client_fn fn, void *ctx);

/* Entries in the routes map as the kernel counts them (kvs_count_routes:
 * one system call, LRU evictions included), or -EOPNOTSUPP on a kernel
 * without the count (before Linux 6.6) or without BPF. */
long kvs_dp_kcount_routes(struct kvs_datapath *dp);
/* Entries in the routes map, walked in batches (tens of ms when full:
 * gw_routes_count asks kvs_dp_kcount_routes first), or -errno. */
long kvs_dp_count_routes(struct kvs_datapath *dp);

/* Sets the fields the controller owns; leaves the kernel's counters alone. */
void kvs_dp_set_backend(struct kvs_datapath *dp, uint32_t b, uint32_t state, uint32_t pool_size,
			uint32_t max_outstanding);
/* The fields kept for operators (kvsplicectl, bpftool): its address, its
 * last PONG. */
void kvs_dp_set_backend_addr(struct kvs_datapath *dp, uint32_t b, const struct kvs_endpoint *a);
void kvs_dp_set_report(struct kvs_datapath *dp, uint32_t b, const struct kvs_be_report *r);
/* Its placement seed (kvs_str_hash of ADDR:PORT, include/kvsplice/
 * place.h), as the userspace policy has it. */
void kvs_dp_set_place_seed(struct kvs_datapath *dp, uint32_t b, uint64_t seed);
/* Why it is not up, for operators ("" once it is). */
void kvs_dp_set_reason(struct kvs_datapath *dp, uint32_t b, const char *why);
/* Backend b was removed: its record is emptied (ABSENT, counters zero) for
 * the next backend that takes the slot; its routes stay void (route_gen
 * moves on). Only once none of its sockets is in the SOCKHASH. */
void kvs_dp_clear_backend(struct kvs_datapath *dp, uint32_t b);
/* Backend b's first-token counts (backend_ttft) zeroed. */
void kvs_dp_clear_ttft(struct kvs_datapath *dp, uint32_t b);
/*
 * The userspace data path's share of a backend's counts, kept in the same
 * map as the kernel's so that load, limits and reports see both paths: a
 * request of bytes charging work tokens sent to b; a response frame of
 * bytes from b (ends: its END or ERROR, releasing release tokens; for an
 * END e, its tokens and first-token time as it reported them, predicted
 * what the charge implied was cached, as the kernel's account_end() does);
 * work released early (its prefill, at the first CHUNK).
 */
void kvs_dp_user_sent(struct kvs_datapath *dp, uint32_t b, uint64_t bytes, uint64_t work);
void kvs_dp_user_response(struct kvs_datapath *dp, uint32_t b, uint64_t bytes, bool ends,
			  uint64_t release);
void kvs_dp_user_end_report(struct kvs_datapath *dp, uint32_t b, const struct kvs_end_info *e,
			    uint64_t predicted, uint64_t window_tokens);
void kvs_dp_user_release(struct kvs_datapath *dp, uint32_t b, uint64_t work);
uint64_t kvs_dp_outstanding(const struct kvs_datapath *dp, uint32_t b);
/* Outstanding work in tokens, and the limit above which the kernel defers
 * requests for backend b to the controller (0: none). */
uint64_t kvs_dp_outstanding_work(const struct kvs_datapath *dp, uint32_t b);
/* Work charged and requests sent to backend b over all time. */
void kvs_dp_charged(const struct kvs_datapath *dp, uint32_t b, uint64_t *tokens,
		    uint64_t *requests);
void kvs_dp_set_work_limit(struct kvs_datapath *dp, uint32_t b, uint64_t limit);
/* The fleet's charged work by hot window (include/kvsplice/place.h, "Hot
 * prefixes"), as the kernel reads it from backend b's record. */
void kvs_dp_set_hot(struct kvs_datapath *dp, uint32_t b, const struct kvs_hot_fleet *f);

/* At most this many routes per kvs_dp_add_routes (a request installs its
 * cache key, hint and checkpoints: 18). */
#define KVS_DP_MAX_ROUTE_BATCH 32
/* Routes hashes[i] -> backend at depths[i] (0 for a cache key), i < n, in
 * one system call where the kernel takes batches, for a client of tenant
 * (0: none). A route the map holds keeps its counters (hits, hot window)
 * and counts against the share once. How many were installed (all of
 * them, unless the map refused one; none when the routes new to the map
 * would overflow the tenant's share of it). */
uint32_t kvs_dp_add_routes(struct kvs_datapath *dp, const uint64_t *hashes, const uint32_t *depths,
			   uint32_t n, uint32_t backend, uint32_t tenant);
/* Removes the route for hash if it still names backend b. 0 or -errno. */
int kvs_dp_del_route(struct kvs_datapath *dp, uint64_t hash, uint32_t b);
/* The same for b->e[0..b->n), in one system call; how many were removed. */
uint32_t kvs_dp_del_routes(struct kvs_datapath *dp, struct kvs_withdraw_batch *b);

/* A tenant's share of the routes map (struct kvs_route_share), through
 * the mmap, with atomic adds as the kernel's: take counts n routes about to
 * be installed (false, the request's refusal counted, when they would
 * overflow the share; true and nothing counted without one), put n removed, adjust a
 * recount's correction (put and adjust never take a count below 0), count routes
 * trimmed; set the share (0: none). */
bool kvs_dp_share_take(struct kvs_datapath *dp, uint32_t tenant, uint32_t n);
void kvs_dp_share_put(struct kvs_datapath *dp, uint32_t tenant, uint32_t n);
void kvs_dp_share_adjust(struct kvs_datapath *dp, uint32_t tenant, int64_t delta);
void kvs_dp_share_set(struct kvs_datapath *dp, uint32_t tenant, uint64_t share);
void kvs_dp_share_trimmed(struct kvs_datapath *dp, uint32_t tenant, uint64_t n);
void kvs_dp_share_read(const struct kvs_datapath *dp, uint32_t tenant, struct kvs_route_share *rs);
/* Every route in the map, read in batches. 0 or -errno. */
typedef void (*kvs_dp_route_fn)(void *ctx, uint64_t hash, const struct kvs_route *r);
int kvs_dp_walk_routes(struct kvs_datapath *dp, kvs_dp_route_fn fn, void *ctx);
/*
 * Backend b is down and its connections closed: calls fail(ctx, client
 * cookie, req_id) for each request the kernel sent it that has not ended,
 * removes their records, and zeroes b's outstanding counts. Returns how
 * many. Call only once b's upstream sockets are gone, or a request sent
 * meanwhile would be counted on a backend no one will answer for.
 */
typedef void (*kvs_dp_fail_fn)(void *ctx, uint64_t conn, uint64_t req_id);
int kvs_dp_fail_inflight(struct kvs_datapath *dp, uint32_t b, kvs_dp_fail_fn fail, void *ctx);
/* Calls fn(ctx, key, record) for each record of the inflight map (read in
 * batches). How many records were read, or -errno. */
typedef void (*kvs_dp_inflight_fn)(void *ctx, const struct kvs_req_key *k,
				   const struct kvs_inflight *rec);
int kvs_dp_walk_inflight(struct kvs_datapath *dp, kvs_dp_inflight_fn fn, void *ctx);
/* Whether the inflight map still holds k (its request has not ended). */
bool kvs_dp_inflight_has(struct kvs_datapath *dp, const struct kvs_req_key *k);
/* Voids every route to backend b at once (it left, or came back empty). */
void kvs_dp_withdraw_routes(struct kvs_datapath *dp, uint32_t b);
/* Deletes the routes to b that are void (b's slot has moved on since
 * they were installed), their tenants' counts lowered (kvs_withdraw): for
 * a backend removed, whose routes would otherwise hold map entries and
 * their tenants' shares until the LRU or a trim took them. Walks the whole
 * map. How many, or -errno. */
long kvs_dp_purge_routes(struct kvs_datapath *dp, uint32_t b);
/* Whether backend b's route_gen is still gen (it has not left since). */
int kvs_dp_gen_current(const struct kvs_datapath *dp, uint32_t b, uint32_t gen);
/* Whether a route read from the map is current. */
int kvs_dp_route_current(const struct kvs_datapath *dp, const struct kvs_route *r);
/* Tokens generated, from its ENDs, and its ENDs and ERRORs (a snapshot). */
void kvs_dp_output_counters(const struct kvs_datapath *dp, uint32_t b, uint64_t *output,
			    uint64_t *ends);
/* The output tokens a request to b is charged for at most (the kernel
 * reads it: kvs_charged_output). */
void kvs_dp_set_expect_output(struct kvs_datapath *dp, uint32_t b, uint64_t v);
/* The backend's END-report counters (a snapshot): cached tokens predicted,
 * predicted and not there, there and not predicted (kvs_unexpected_cached). */
void kvs_dp_end_counters(const struct kvs_datapath *dp, uint32_t b, uint64_t *predicted,
			 uint64_t *mispredicted, uint64_t *unexpected);
void kvs_dp_set_index_blocks(struct kvs_datapath *dp, uint32_t b, uint64_t blocks);
/* The route for hash: 0 and *r filled, or -ENOENT. */
int kvs_dp_get_route(struct kvs_datapath *dp, uint64_t hash, struct kvs_route *r);
int kvs_dp_publish_ctl(struct kvs_datapath *dp, const struct kvs_ctl_stats *s);

#endif
