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
	uint64_t close_at_ns; /* close once its error frame had time to go */
	uint64_t half_close_deadline_ns;
};

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
	bool up;
	uint64_t retry_at_ns;
	uint32_t backoff_ms;
	uint32_t sent_recently; /* requests sent that the kernel may not count yet */
	uint64_t sent_epoch;
	/* Health check: a PING every --health-interval-ms; no PONG within
	 * three intervals and the backend is ejected (down, with back-off). */
	uint64_t ping_sent_ns; /* of the PING not answered yet; 0: none */
	uint64_t next_ping_ns;
	uint32_t ping_seq;
	struct kvs_load_info load; /* its last PONG's report */
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
	struct kvs_buf out[2];  /* append to out[out_cur]; the other is sending */
	int out_cur;
	bool send_pending;
	struct kvs_ctl_stats ctl;
	struct kvs_ctl_stats ctl_published; /* what the ctl_stats map holds */
	uint64_t *hashes; /* scratch: block hashes of the frame being routed */
	struct __kernel_timespec tick;
	/* Frames queued for the inject socket, against the kernel's count of
	 * those it has read: when equal, every request the controller sent is
	 * in the kernel's per-client and per-backend counts, and the epoch
	 * moves on, voiding the controller's own recent counts. */
	uint64_t inject_queued, inject_seen_last_tick;
	uint64_t inject_epoch;
	uint64_t next_partial_scan_ns; /* of clients with an unfinished frame */
	int ho_fd;        /* --handover-socket, listening; -1 if none */
	int ho_pending;   /* a controller waiting to take over; -1 if none */
	int metrics_fd;   /* --metrics, listening; -1 if none */
	int control_fd;   /* kvsplicectl's Unix socket, listening; -1 if none */
	char control_path[256];
	char ho_path[256]; /* the hand-over socket (--handover-socket or default) */
	char exe[4096];    /* this program, to start its successor on an upgrade */
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

/* ---- the control socket (gw_control.c) ---- */

/* Listens on path (mode 0600; its directory made 0700). fd or -errno:
 * -EADDRINUSE when another controller answers there. */
int gw_control_listen(const char *path);
/* Runs one command line from kvsplicectl and writes the reply to out:
 * "ok" or "error: MESSAGE" on the first line, then the body (JSON when the
 * line has --json). */
void gw_control_run(struct gw *g, char *line, FILE *out);

#endif
