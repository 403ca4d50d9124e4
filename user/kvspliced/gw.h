/* SPDX-License-Identifier: MIT */
/*
 * The controller's state, shared by the files of the controller: the event
 * loop (gateway.c) and the operator's commands (gw_control.c). Not an API:
 * nothing outside the controller includes it.
 */
#ifndef KVS_GW_INTERNAL_H
#define KVS_GW_INTERNAL_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "admission.h"
#include "buf.h"
#include "codec.h"
#include "datapath.h"
#include "gateway.h"
#include "idmap.h"
#include "metrics.h"
#include "netutil.h"
#include "policy.h"

/* io_uring user_data: the operation in the top byte, the connection's slot
 * and generation below (a stale completion for a reused slot is told apart). */
#define OP_ACCEPT 1ull
#define OP_RECV 2ull
#define OP_SEND 3ull
#define OP_TICK 4ull
#define OP_POLL 5ull
#define OP_HANDOVER 6ull /* a controller connected to take over */
#define OP_CANCEL 7ull
#define OP_METRICS_ACCEPT 8ull
#define OP_CONTROL_ACCEPT 9ull
#define OP_CSEND 10ull /* a send on a connection of the userspace data path */
#define ROLE_METRICS 101 /* a scrape of --metrics; not in any map */
#define ROLE_CONTROL 102 /* a kvsplicectl command; not in any map */
#define ROLE_UP_USER 103 /* an upstream connection of the userspace data path */

/* The controller's reading end of the punt pair: not in the SOCKHASH. */
#define ROLE_PUNT_READER 100

/* A request the userspace data path sent and has not seen end. */
struct gw_ureq {
	uint64_t req_id;
	uint32_t backend;
	uint32_t pad;
	uint64_t held_tokens;    /* work it still charges its backend */
	uint64_t prefill_tokens; /* of which prefill, until its first CHUNK */
};

/* Bytes for one socket, sent in order (user/gw_sendq.c): append to
 * gw_sendq_buf(); out[cur ^ 1] is the one being sent. */
struct gw_sendq {
	struct kvs_buf out[2];
	int cur;
	bool pending; /* a send is in flight */
};

/* A connection of the userspace data path: the controller reads and
 * writes it itself (no BPF). */
struct gw_upath {
	struct gw_sendq q;
	/* A client's requests in flight (at most --max-client-inflight). */
	struct gw_ureq *reqs;
	uint32_t nreqs, capreqs;
};

struct gw_conn {
	int fd;
	uint32_t id;  /* slot in gw.conns */
	uint32_t gen; /* tells a stale completion from a reused slot */
	uint32_t role;
	uint32_t backend, slot;
	uint64_t cookie, key;
	struct kvs_buf rx;
	bool recv_pending;
	bool poll_pending;
	bool in_map;
	bool closing;         /* torn down; freed when its recv/poll returns */
	bool half_closed;     /* client sent FIN: closed once its answers are out */
	bool in_handler;      /* its bytes are being handled: freed after, not during */
	bool in_conns;        /* userspace path: in the conns map (for operators) */
	uint64_t partial_since_ns; /* userspace path: a frame began then, unfinished */
	uint64_t close_at_ns; /* close once its error frame had time to go */
	uint64_t half_close_deadline_ns;
	struct gw_upath *up;  /* on the userspace data path; NULL on the kernel's */
};

static inline uint64_t ud(uint64_t op, const struct gw_conn *c)
{
	return op << 56 | (c ? ((uint64_t)(c->gen & 0xffffff) << 32 | c->id) : 0);
}

struct gw_backend {
	/* Slot state: a slot holds a backend from its add (at start, by
	 * kvsplicectl or a reload) to its removal; its index is the one the
	 * kernel's maps and the gw_backend header field use. */
	bool present;
	bool draining;         /* no new requests (operator's drain) */
	bool removing;         /* draining; removed once nothing is in flight */
	uint64_t remove_deadline_ns; /* then its requests are failed, it goes */
	struct kvs_addr addr;
	char name[64];         /* addr as ADDR:PORT */
	uint64_t fb_predicted, fb_mispredicted; /* END counters at the last tick */
	struct gw_conn *pool[KVS_MAX_POOL];
	struct gw_conn *upool[KVS_MAX_POOL]; /* the userspace data path's own */
	bool up;
	uint64_t retry_at_ns;
	uint32_t backoff_ms;
	uint32_t unseen; /* requests the controller sent it that the kernel has
			  * not read yet (so not counted in outstanding) */
	/* Health check: a PING every --health-interval-ms; no PONG within
	 * three intervals and the backend is ejected (down, with back-off). */
	uint64_t ping_sent_ns; /* of the PING not answered yet; 0: none */
	uint64_t next_ping_ns;
	uint32_t ping_seq;
	bool probation; /* ejected by the health check: no work until a PONG */
};

struct gw {
	const struct gw_config *cfg; /* = &live */
	struct gw_config live; /* as started, with what reloads changed */
	const struct gw_hooks *hooks;
	uint32_t nslots; /* backend slots in use: be[0..nslots) (some may be empty) */
	uint64_t started_ns;
	struct io_uring ring;
	struct kvs_datapath dp;
	struct kvs_admission adm; /* XDP admission, if configured */
	int listen_fd;
	struct gw_conn **conns;
	uint32_t conns_cap;
	uint32_t next_gen;
	struct gw_backend be[KVS_MAX_BACKENDS];
	struct kvs_idmap clients; /* cookie -> struct gw_conn */
	struct kvs_policy policy;
	struct gw_conn *punt_k;   /* kernel's end of the punt pair */
	struct gw_conn *punt;     /* controller's end: frames to handle */
	int inject_fd;          /* the controller's end: it writes here */
	struct gw_conn *inject; /* the kernel's end, in the SOCKHASH */
	struct gw_sendq inject_q; /* frames for the inject socket */
	struct kvs_ctl_stats ctl;
	struct kvs_ctl_stats ctl_published; /* what the ctl_stats map holds */
	uint64_t *hashes; /* scratch: block hashes of the frame being routed */
	/* Routes the index evicted, withdrawn together after the decision or
	 * tick that evicted them (gw_withdraw_flush) */
	struct kvs_withdraw_batch withdraw;
	struct __kernel_timespec tick;
	/* Frames queued for the inject socket (the last one's number), and
	 * the kernel's count of those it has read when last looked at. The
	 * requests among them wait in unseen_q (their number and backend)
	 * until the kernel's count passes them: until then a backend's load
	 * is its kernel count plus its unseen ones. */
	uint64_t inject_queued, inject_seen_last_tick;
	uint32_t inject_stall_ticks; /* ticks the kernel's count has not moved */
	struct gw_unseen { uint64_t seq; uint32_t backend; } *unseen_q;
	uint32_t uq_head, uq_len, uq_cap;
	uint64_t next_partial_scan_ns; /* of clients with an unfinished frame */
	int ho_fd;        /* --handover-socket, listening; -1 if none */
	int ho_pending;   /* a controller waiting to take over; -1 if none */
	int metrics_fd;   /* --metrics, listening; -1 if none */
	int control_fd;   /* kvsplicectl's Unix socket, listening; -1 if none */
	char control_path[256];
	char ho_path[256]; /* the hand-over socket (--handover-socket or default) */
	char exe[4096];    /* this program, to start its successor on an upgrade */
	bool user_path;    /* new clients go on the userspace data path */
	pid_t upgrade_pid; /* the successor started by the last upgrade; 0: none */
	int upgrade_status; /* its exit status if it failed; -1 while it runs */
	struct kvs_decide_hist decide; /* slow-path decision latency */
	bool quiescing;   /* handing over: arm no recv, re-arm no accept */
	bool accepting;   /* the multishot accept is armed */
	bool handed_over; /* done: leave the loop, touch no socket or map */
	/* The work limit's slack: a typical request's charge (moving
	 * average), from the kernel's counters as of the last refresh. */
	uint64_t typical_charge, seen_charged, seen_sent;
};

/* ---- backends (gateway.c) ---- */

/* The slot of the backend named ADDR:PORT (as kvs_addr_str writes it), or
 * -ENOENT. */
int gw_backend_find(const struct gw *g, const char *name);
/* Adds a backend in a free slot and connects it (a backend that refuses is
 * retried with back-off, like one given at start). Slot or -errno:
 * -EEXIST (already there), -ENOSPC (KVS_MAX_BACKENDS in use). */
int gw_backend_add(struct gw *g, const struct kvs_addr *a);
/* Drain on: no new requests; in-flight ones finish. Off: back in service
 * (and a pending removal is called off). */
void gw_backend_drain(struct gw *g, uint32_t b, bool on);
/* Drains b, then removes it once nothing is in flight there, or at
 * --drain-timeout-ms (then what it still owes is answered backend_gone). */
void gw_backend_remove(struct gw *g, uint32_t b);
/* What kvsplicectl shows as its state. */
enum kvs_backend_state gw_backend_state(const struct gw *g, uint32_t b);
/* The backend list becomes addrs[0..n): backends not in it are removed
 * (drained first), new ones added. Counts what it did in *added and
 * *removed. 0 or -errno (-ENOSPC: no slot for one; the rest applied). */
int gw_backends_apply(struct gw *g, const struct kvs_addr *addrs, uint32_t n, uint32_t *added,
		      uint32_t *removed);
/* Re-reads the configuration (gw_hooks.load) and applies its backend
 * list. 0 or -errno; a message for the operator in msg either way. */
int gw_reload(struct gw *g, char *msg, size_t len);

/* Starts this program's file anew (a new binary, if one was installed) with
 * the same arguments and --takeover: it takes every socket over and this
 * controller exits. Returns the successor's pid, or -errno; a message for
 * the operator in msg either way. */
int gw_upgrade(struct gw *g, char *msg, size_t len);

/* ---- the event loop's pieces the other files use (gateway.c) ---- */

struct io_uring_sqe *gw_get_sqe(struct gw *g);

void gw_sendq_init(struct gw_sendq *q, size_t limit);
void gw_sendq_free(struct gw_sendq *q);
static inline struct kvs_buf *gw_sendq_buf(struct gw_sendq *q)
{
	return &q->out[q->cur];
}
/* Something is queued or being sent. */
bool gw_sendq_busy(const struct gw_sendq *q);
/* Starts a send on fd if none is in flight and something is queued; its
 * completion carries udata. */
void gw_sendq_kick(struct gw *g, struct gw_sendq *q, int fd, uint64_t udata);
/* A send completed with res: consumes what went and kicks the rest. res if
 * it is an error (nothing else done), else 0. */
int gw_sendq_done(struct gw *g, struct gw_sendq *q, int fd, uint64_t udata, int res);
/* Everything queued, with blocking sends on fd (no send may be in flight).
 * 0 or -errno. */
int gw_sendq_flush_sync(struct gw_sendq *q, int fd);
struct gw_conn *gw_conn_new(struct gw *g, int fd, uint32_t role);
/* Out of every map and closed once no io_uring operation points at it. */
void gw_conn_close(struct gw *g, struct gw_conn *c);
/* Frees c if no operation is pending on it (after gw_conn_close). */
void gw_conn_release(struct gw *g, struct gw_conn *c);
int gw_arm_recv(struct gw *g, struct gw_conn *c);
/* An ERROR frame to a client, by whichever path the client is on. */
void gw_send_error(struct gw *g, uint64_t client, uint64_t req_id, int code, const char *msg);
/* A request over its client's --max-client-inflight: answered busy. */
void gw_refuse_busy_client(struct gw *g, struct gw_conn *c, uint64_t req_id);
/* The routing decision for a request from client c: on success 0, with
 * m->gw_backend and m->gw_conn set and *backend the choice; otherwise the
 * client has been answered with an ERROR and -1 is returned. kernel: also
 * consult and install the kernel's routes (the kernel path's decisions). */
int gw_decide(struct gw *g, struct gw_conn *c, struct kvs_msg *m, const uint8_t *prompt,
	      bool kernel, uint32_t *backend);
void gw_backend_down(struct gw *g, uint32_t b, const char *why);
/* The PONG the gateway answers a client's PING with: the fleet's requests
 * in flight as its load. */
void gw_pong_payload(struct gw *g, uint8_t payload[sizeof(struct kvs_load)]);

/* ---- the userspace data path (gw_userpath.c) ---- */

/* A client accepted onto the userspace data path. 0 or -errno. */
int gw_up_client(struct gw *g, struct gw_conn *c);
/* Bytes arrived on a connection of the userspace data path (c->rx). */
void gw_up_client_frames(struct gw *g, struct gw_conn *c);
void gw_up_upstream_frames(struct gw *g, struct gw_conn *c);
/* Sends queued while the submission ring was full: retried on the tick. */
void gw_up_kick_all(struct gw *g);
/* A send on c completed with res. */
void gw_up_on_send(struct gw *g, struct gw_conn *c, int res);
/* Appends a frame for c's peer; queues the send. 0 or -ENOBUFS (the peer
 * does not read: its queue is at its limit). */
int gw_up_put(struct gw *g, struct gw_conn *c, const struct kvs_msg *m, const void *payload);
int gw_up_error(struct gw *g, struct gw_conn *c, uint64_t req_id, int code, const char *msg);
/* Backend b's userspace upstream connections (--pool of them). 0 or -errno. */
int gw_up_connect(struct gw *g, uint32_t b);
void gw_up_disconnect(struct gw *g, uint32_t b);
/* Backend b went down: every request the userspace path sent it is
 * answered backend_gone (fail) and forgotten. Returns how many. */
int gw_up_fail_backend(struct gw *g, uint32_t b, void (*fail)(void *ctx, uint64_t client,
							     uint64_t req_id),
		       void *ctx);
/* Requests a client of the userspace path has in flight, plus one while
 * answers wait to be written to it: 0 when it is owed nothing. */
uint32_t gw_up_inflight(const struct gw_conn *c);
void gw_up_free(struct gw_conn *c);
/* Clients of the userspace path whose frame began before since_ns and is
 * not complete: answered ERROR timeout and closed (the kernel path's
 * strparser-backed check is on_stale_partial()). */
void gw_up_stale(struct gw *g, uint64_t since_ns);
/* Clients on each path. */
void gw_up_count(const struct gw *g, uint32_t *kernel, uint32_t *user);

/* New clients go on the userspace data path (user) or the kernel's; those
 * connected stay on theirs until they close. Switching to user connects
 * the userspace path's upstream pools. 0 or -errno. */
int gw_set_datapath(struct gw *g, bool user);

/* ---- the control socket (gw_control.c) ---- */

/* Listens on path (mode 0600; its directory made 0700). fd or -errno:
 * -EADDRINUSE when another controller answers there. */
int gw_control_listen(const char *path);
/* Runs one command line from kvsplicectl and writes the reply to out:
 * "ok" or "error: MESSAGE" on the first line, then the body (JSON when the
 * line has --json). */
void gw_control_run(struct gw *g, char *line, FILE *out);

#endif
