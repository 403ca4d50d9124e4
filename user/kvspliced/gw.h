/* SPDX-License-Identifier: MIT */
/*
 * The controller's types: its state (struct gw), connections, backend
 * slots, and the tables through which the loop and the lower parts reach
 * the handlers that higher parts registered at setup. Types only: each
 * module's header says what it offers. Not an API: nothing outside
 * user/kvspliced includes it.
 */
#ifndef KVS_GW_H
#define KVS_GW_H

#include <bpf/libbpf.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "admission.h"
#include "buf.h"
#include "codec.h"
#include "datapath.h"
#include "kvsplice/place.h"
#include "gateway.h"
#include "idmap.h"
#include "metrics.h"
#include "netutil.h"
#include "policy.h"
#include "route_shares.h"
#include "sources.h"
#include "tenant.h"

/* A client or service connection that is rejected or done gets this long
 * for its last frame to leave before it is closed. */
#define ERROR_GRACE_MS 200
/* Then a client that may still be sending gets the gateway's FIN and this
 * long to close its side, what it sends meanwhile read and dropped
 * (gw_conn_linger). */
#define LINGER_MS 1000
/* How long a half-closed client may wait for the answers it is owed. */
#define HALF_CLOSE_MAX_MS (300 * 1000)

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
#define OP_CSEND 10ull	 /* a send on a connection of the userspace data path */
#define OP_REPORTS 11ull /* the kernel's reports ring has some */
#define OP_CONNECT 13ull /* a new upstream connection's handshake is over */
#define GW_OPS 14	 /* op codes are below this */
#define ROLE_METRICS 101 /* a scrape of --metrics; not in any map */
#define ROLE_CONTROL 102 /* a kvsplicectl command; not in any map */
#define ROLE_UP_USER 103 /* an upstream connection of the userspace data path */
#define ROLE_CANCEL 104	 /* CANCELs to a backend that went down (cancel.c) */
/* The clients' accept waited out its back-off (client.c). */
#define OP_ACCEPT_RETRY 12ull

/* The controller's reading end of the punt pair: not in the SOCKHASH. */
#define ROLE_PUNT_READER 100

/* A request the userspace data path sent and has not seen end. */
struct gw_ureq {
	uint64_t req_id;
	uint32_t backend;
	uint32_t out_tokens;	 /* output tokens charged (kvs_charged_output) */
	uint64_t held_tokens;	 /* work it still charges its backend */
	uint64_t prefill_tokens; /* of which prefill, until its first CHUNK */
};

/* Bytes for one socket, sent in order (sendq.c): append to gw_sendq_buf();
 * out[cur ^ 1] is the one being sent. */
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
	/* Its conns map entry (kvsplicectl conns), counted here as frames
	 * pass and written on the tick once they moved: the verdict's
	 * counts for a kernel-path socket, at a map write a tick at most. */
	struct kvs_conn shown;
	bool shown_moved;
};

struct gw;
struct gw_conn;

/* What a connection's owner does with what happens on it: set by the part
 * that made the connection (kpath.c for the kernel path's clients, pools
 * and pairs, also when accepted by client.c or adopted by handover.c;
 * upath.c, scrape.c, control.c for theirs), called by conn.c's completion
 * handlers. */
struct gw_conn_ops {
	/* Bytes arrived in c->rx (connections the controller reads). */
	void (*on_bytes)(struct gw *g, struct gw_conn *c);
	/* The peer hung up or failed (poll or recv said so). */
	void (*on_hangup)(struct gw *g, struct gw_conn *c, const char *why);
	/* The peer shut down its sending side (FIN) and may still read: true
	 * if that was taken as a half-close, false to treat it as a hang-up. */
	bool (*on_fin)(struct gw *g, struct gw_conn *c);
	/* Answers a client is still owed (half-closed clients wait for 0). */
	uint32_t (*inflight)(struct gw *g, const struct gw_conn *c);
	/* The connection is being closed, whoever closes it, while it is
	 * still in the maps: a client's requests in flight are cancelled. */
	void (*on_close)(struct gw *g, struct gw_conn *c);
	/* A connect begun without waiting (gw_conn_await_connect) is over:
	 * kvs_connect_result(c->fd) says how. */
	void (*on_connected)(struct gw *g, struct gw_conn *c);
};

/* What differs between the kernel's data path (kpath.c) and the userspace
 * one (upath.c), for the parts below both (backends, connections, the
 * decision): registered in struct gw at setup. */
struct gw_path_ops {
	/* An ERROR frame to client (c: its connection, NULL if unknown);
	 * notice: about the connection, ending none of its requests
	 * (KVS_GW_NOTICE). 0, or -errno if it could not be queued. */
	int (*send_error)(struct gw *g, struct gw_conn *c, uint64_t client, uint64_t req_id,
			  int code, const char *msg, bool notice);
	/* Backend b's connections for this path. 0 or -errno. */
	int (*connect)(struct gw *g, uint32_t b);
	void (*disconnect)(struct gw *g, uint32_t b);
	/* b went down: every request this path sent it is answered through
	 * fail(). Returns how many. */
	int (*fail_backend)(struct gw *g, uint32_t b,
			    void (*fail)(void *ctx, uint64_t client, uint64_t req_id), void *ctx);
};

/* A completion's handler, by op code (loop.c dispatches). */
typedef void (*gw_op_fn)(struct gw *g, struct io_uring_cqe *cqe);

struct gw_conn {
	int fd;
	uint32_t id;  /* slot in gw.conns */
	uint32_t gen; /* tells a stale completion from a reused slot */
	uint32_t role;
	const struct gw_conn_ops *ops;
	uint32_t backend, slot;
	uint64_t cookie, key;
	uint32_t max_inflight; /* CLIENT: a front's own limit; 0: the gateway's */
	uint32_t tenant;       /* CLIENT: its tenant (tenant.h); 0: none */
	bool front;	       /* CLIENT: from a --front-source (gw_client_bind) */
	bool src_counted;      /* CLIENT: counted in gw.sources under src */
	struct kvs_source_key src;
	/* CLIENT: when it was last seen active (idle.c), and the conns map's
	 * counts for it then (kernel path). */
	uint64_t active_ns;
	uint64_t seen_frames, seen_bytes;
	/* CLIENT: what it may make the controller do (--ctl-rate; no limit
	 * for a front). The kernel path's copy, which the verdict takes
	 * from, is its conns entry; the userspace path takes from this one. */
	struct kvs_budget budget;
	struct kvs_buf rx;
	bool recv_pending;
	bool poll_pending;
	bool in_map;
	bool closing;		   /* torn down; freed when its recv/poll returns */
	bool half_closed;	   /* client sent FIN: closed once its answers are out */
	bool in_handler;	   /* its bytes are being handled: freed after, not during */
	bool in_conns;		   /* userspace path: in the conns map (for operators) */
	uint64_t partial_since_ns; /* userspace path: a frame began then, unfinished */
	uint64_t close_at_ns;	   /* close once its error frame had time to go */
	uint64_t half_close_deadline_ns;
	/* CLIENT, a stop (stop.c): when it was told the connection closes
	 * (ERROR busy, req_id 0; 0: not yet). */
	uint64_t goaway_ns;
	/* CLIENT: the gateway is done with it (gw_conn_linger): it sends
	 * nothing new, what comes is read and dropped until the client
	 * closes, or close_at_ns; shut_wr once its FIN has gone (on the
	 * userspace path, once what was queued before has). */
	bool lingering, shut_wr;
	uint64_t linger_bytes; /* read and dropped while lingering */
	/* A new upstream connection whose first PING is not answered yet
	 * (probe.c): in no data path until it is. */
	bool probing;
	/* Its handshake under way until then (0: connected), the event
	 * loop's poll for it pending (connect_pending): conn.c. */
	uint64_t connect_by_ns;
	bool connect_pending;
	/* ROLE_CANCEL: its backend's name, for the log (the slot may hold
	 * another by the time the handshake is over) */
	char dialed[48];
	uint64_t probe_id, probe_deadline_ns;
	uint32_t probe_instance;  /* what its PONG said of the backend; 0: none */
	uint32_t probe_known;	  /* its backend's instance when the probe went */
	uint32_t probe_kv_blocks; /* the KV capacity its PONG said; 0: none */
	/* Handed to the service manager's descriptor store (fdstore.c):
	 * closing it must shut the socket down, or the store's copy keeps
	 * the connection open. */
	bool fdstored;
	void (*probed)(struct gw *g, struct gw_conn *c, int err, const char *why);
	struct gw_upath *up; /* on the userspace data path; NULL on the kernel's */
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
	bool draining;		     /* no new requests (operator's drain) */
	bool removing;		     /* draining; removed once nothing is in flight */
	uint64_t remove_deadline_ns; /* then its requests are failed, it goes */
	struct kvs_addr addr;
	char name[64]; /* addr as ADDR:PORT */
	/* END counters when the index was last corrected */
	uint64_t fb_predicted, fb_mispredicted, fb_unexpected;
	uint64_t fb_peak_work; /* the most outstanding work since them */
	struct gw_conn *pool[KVS_MAX_POOL];
	struct gw_conn *upool[KVS_MAX_POOL]; /* the userspace data path's own */
	/* The kernel's pool (pool.c): its slots 0..pool_n-1 take requests
	 * (the backends map's pool_size). A take-over starts with the pool
	 * it was handed and reaches --pool while serving: slots opened and
	 * probed before they are published, surplus ones closed once nothing
	 * they may carry is in flight. */
	uint32_t pool_n;
	uint64_t pool_retry_ns;	  /* a new slot's connection failed: next try */
	bool pool_said_failed;	  /* that was logged (once until it works) */
	uint8_t retire_phase;	  /* surplus slots: 0 none, 1 unpublished, 2 waiting */
	uint64_t retire_since_ns; /* waiting since (warned after --drain-timeout-ms) */
	bool retire_warned;
	struct kvs_req_key *retire_keys; /* requests that may be on a surplus slot */
	uint32_t nretire;
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
	uint32_t ping_known; /* its instance as known when that PING went */
	bool probation;	     /* ejected by the health check: no work until a PONG */
	/* Its PONGs say NOT_READY: since the PING its first such answer
	 * replied to (0: its last answer was ready). Three intervals of that
	 * and it is ejected, as if it had not answered. */
	uint64_t unready_since_ns;
	bool said_not_ready;	/* logged; logged again only after a ready answer */
	bool said_unready_wait; /* logged its ejection waiting for its requests */
	bool said_probation;	/* its probation since the last ejection logged */
	bool pong_held;		/* this check's PONG waited unread past its deadline */
	/* What else says it is alive while a check waits (health.c): its
	 * response frames (the backends map's resp_frames, as last read)
	 * and when they last moved (or the PING went); its direct PING (on
	 * a connection of its own: its id and gen while it runs) and when
	 * one last answered ready (0: none for this check); whether each
	 * kept the check (logged once). */
	uint64_t heard_frames, heard_ns, answered_ns;
	bool said_heard, direct_running, said_direct;
	uint32_t direct_id, direct_gen;
	uint32_t probing;   /* its new connections not through their probe yet */
	bool said_not_kvs1; /* logged that it does not speak KVS1 (once) */
	bool said_down;	    /* logged down or unreachable; again once it was up */
	/* Added by kvsplicectl and not yet answered for: what it meets is
	 * the command's answer, logged once with it (added or refused), not
	 * as a listed backend's unreachable, retried, removed. */
	bool on_trial;
	/* Its routes and index (backend.c, "silent"): routes_live while the
	 * map may hold current routes of it; silent_since_ns, when it went
	 * down without its cache known lost (kept until then plus
	 * gw_silent_keep_ns); 0: not silent. */
	bool routes_live;
	uint64_t silent_since_ns;
	long routes_purged; /* by the last withdrawal, for the removal's log */
	/* The instance its PONGs last said (include/kvsplice/proto.h,
	 * KVS_OFF_INSTANCE): another one is a restart, its cache gone
	 * (gw_backend_instance). 0: none said yet (or a take-over from a
	 * controller before it, or after a crash). */
	uint32_t instance;
	uint64_t restarts; /* restarts seen (kvsplice_backend_restarts_total) */
};

/* The service manager's descriptor store, as this controller uses it
 * (fdstore.c). */
struct gw_fdstore {
	bool on;	    /* $NOTIFY_SOCKET set and --fd-store yes */
	bool listen_in;	    /* the listening socket handed in */
	bool metrics_in;    /* --metrics' */
	bool said;	    /* logged that it is in use */
	bool failing;	    /* the last hand-in failed (logged once) */
	bool fresh_punt;    /* restarted with a new punt pair, not the kept one */
	bool restarted;	    /* started with the store's sockets after a crash */
	uint64_t fds, msgs; /* handed in so far, in this many datagrams */
};

/* The clients' accept when descriptors run out (client.c). */
struct gw_accept {
	/* A descriptor held to be let go when the gateway is full, so that
	 * the clients waiting can be accepted and told so; -1: none. */
	int reserve_fd;
	bool waiting;		     /* backing off: a timeout, no accept, armed */
	bool fd_freed;		     /* a connection closed while waiting */
	bool resume_asked;	     /* the timeout is being removed: accept now */
	uint32_t delay_ms;	     /* the last back-off; 0 after an accept */
	struct __kernel_timespec ts; /* the armed timeout's (read at submission) */
	uint64_t fails, shed;	     /* since the last accept_failed line */
	int last_err;
	uint64_t logged_ns; /* of that line */
};

struct gw {
	const struct gw_config *cfg; /* = &live */
	/* cfg->front_sources, parsed at start (a change takes a restart) */
	struct kvs_cidr fronts[KVS_ADM_MAX_LIST];
	uint32_t nfronts;
	struct gw_tenants tenants; /* cfg->tenant_sources, likewise */
	struct gw_shares shares;   /* their shares of the routes map */
	struct gw_config live;	   /* as started, with what reloads changed */
	const struct gw_hooks *hooks;
	uint32_t nslots; /* backend slots in use: be[0..nslots) (some may be empty) */
	uint64_t started_ns;
	struct io_uring ring;
	gw_op_fn on_op[GW_OPS]; /* completion handlers, set at setup (gw.c) */
	const struct gw_path_ops *kpath, *upath;
	/* A backend's PONG to the controller's health check (health.c) */
	void (*on_backend_pong)(struct gw *g, const struct kvs_msg *m, const uint8_t *payload);
	struct kvs_datapath dp;
	struct kvs_admission adm; /* XDP admission, if configured */
	int listen_fd;
	struct gw_conn **conns;
	uint32_t conns_cap;
	uint32_t next_gen;
	struct gw_backend be[KVS_MAX_BACKENDS];
	struct kvs_idmap clients; /* cookie -> struct gw_conn */
	/* Clients by source (--max-source-conns), the accept when out of
	 * descriptors (client.c), the next idle scan (idle.c). */
	struct kvs_sources sources;
	struct gw_accept acc;
	uint64_t next_idle_scan_ns;
	struct kvs_policy policy;
	struct ring_buffer *reports; /* the kernel's reports (reports.c); NULL: none */
	bool reports_armed;	     /* a poll on it is in the ring */
	struct gw_conn *punt_k;	     /* kernel's end of the punt pair */
	struct gw_conn *punt;	     /* controller's end: frames to handle */
	int inject_fd;		     /* the controller's end: it writes here */
	struct gw_conn *inject;	     /* the kernel's end, in the SOCKHASH */
	struct gw_sendq inject_q;    /* frames for the inject socket */
	struct kvs_ctl_stats ctl;
	struct kvs_ctl_stats ctl_published; /* what the ctl_stats map holds */
	uint64_t *hashes;		    /* scratch: block hashes of the frame being routed */
	/* Routes the index evicted, withdrawn together after the decision or
	 * tick that evicted them (decide.c) */
	struct kvs_withdraw_batch withdraw;
	struct __kernel_timespec tick;
	/* Frames queued for the inject socket (the last one's number), and
	 * the kernel's count of those it has read when last looked at. The
	 * requests among them wait in unseen_q (their number and backend)
	 * until the kernel's count passes them: until then a backend's load
	 * is its kernel count plus its unseen ones. */
	uint64_t inject_queued, inject_seen_last_tick;
	uint32_t inject_stall_ticks; /* ticks the kernel's count has not moved */
	struct gw_unseen {
		uint64_t seq;
		uint32_t backend;
	} * unseen_q;
	uint32_t uq_head, uq_len, uq_cap;
	/* Kernel-path clients gone since the last tick with requests in
	 * flight: their requests are cancelled on the tick, in one walk of
	 * the inflight map for all of them (kpath.c). */
	uint64_t *gone;
	uint32_t ngone, capgone;
	uint64_t next_partial_scan_ns; /* of clients with an unfinished frame */
	int ho_fd;		       /* --handover-socket, listening; -1 if none */
	int ho_pending;		       /* a controller waiting to take over; -1 if none */
	int metrics_fd;		       /* --metrics, listening; -1 if none */
	int control_fd;		       /* kvsplicectl's Unix socket, listening; -1 if none */
	char control_path[256];
	char ho_path[256];	       /* the hand-over socket (--handover-socket or default) */
	char exe[4096];		       /* this program, to start its successor on an upgrade */
	bool user_path;		       /* new clients go on the userspace data path */
	pid_t upgrade_pid;	       /* the successor started by the last upgrade; 0: none */
	int upgrade_status;	       /* its exit status if it failed; -1 while it runs */
	struct kvs_decide_hist decide; /* slow-path decision latency */
	bool quiescing;		       /* handing over: arm no recv, re-arm no accept */
	/* Stopping: accepting no client, backends drained, waiting until
	 * stop_until_ns for the requests in flight (gw.c, stop_drain). */
	bool stopping;
	uint64_t stop_until_ns, stop_drained_ns; /* the limit; when none was left */
	/* Its clients (stop.c): told the connection closes; closed once
	 * quiet, or still sending at the limit; for the log at the end. */
	uint32_t stop_told, stop_quiet, stop_cut;
	bool accepting;	  /* the multishot accept is armed */
	bool handed_over; /* done: leave the loop, touch no socket or map */
	/* The work limit's slack: a typical request's charge (moving
	 * average), from the kernel's counters as of the last refresh. */
	uint64_t typical_charge, seen_charged, seen_sent;
	/* The hot share (include/kvsplice/place.h, "Hot prefixes"): work a
	 * backend up takes per window, from the fleet's charged work. */
	struct kvs_hot_fleet hot_fleet;
	uint64_t health_tick_ns; /* the health check's last tick (health.c) */
	/* Output tokens a request is charged for at most, learnt from the
	 * ENDs (kvs_expect_output), and the counts it was last updated from. */
	uint64_t expect_output, seen_output, seen_ends;
	struct gw_fdstore fdstore;
	/* The successor of the last upgrade (upgrade_pid): when it was
	 * started, and when it is killed if it has not begun taking over by
	 * then (0: never - it has begun, or none runs). upgrade.c */
	uint64_t upgrade_started_ns, upgrade_deadline_ns;
};

#endif
