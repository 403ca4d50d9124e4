/* SPDX-License-Identifier: MIT */
/*
 * Backend slots: added, connected, ejected (down, with back-off), drained,
 * removed; the state the kernel and kvsplicectl see of each.
 */
#ifndef KVS_GW_BACKEND_H
#define KVS_GW_BACKEND_H

#include "gw.h"

/* What kvsplicectl shows as its state. */
enum kvs_backend_state gw_backend_state(const struct gw *g, uint32_t b);
/* The kernel follows routes to b, and sends it requests, only while UP:
 * its state and limits into the backends map. */
void gw_publish_backend(struct gw *g, uint32_t b);
/* Takes slot b for the backend at a (no connection yet). */
void gw_slot_fill(struct gw *g, uint32_t b, const struct kvs_addr *a);
/* Connects both paths' connections to b and writes each its probe's PING;
 * b is up once every one has answered ready (gw_backend_probed), the
 * answers read by whoever calls gw_probe_settle(). On failure b is down
 * (retried with back-off). 0 or -errno. */
int gw_backend_dial(struct gw *g, uint32_t b);
/* The same, then the answers waited for in place, up to wait_ms (0: left
 * to the event loop). 0 once b is up; -EINPROGRESS while its probes run;
 * another -errno when it is down. */
int gw_backend_connect(struct gw *g, uint32_t b, uint32_t wait_ms);
/* One of b's new connections answered its probe (err 0) or failed it
 * (probe.h says how; why says it for the log and kvsplicectl): all of them
 * answered, b is up; one failed, b is down (retried with back-off). */
void gw_backend_probed(struct gw *g, uint32_t b, int err, const char *why);
/* b said it is ready, or not (its PONG's NOT_READY flag): logged when that
 * changes. */
void gw_backend_readiness(struct gw *g, uint32_t b, bool ready);
/* b is down (why, for the log): its connections closed, every request it
 * owed answered backend_gone; retried after a back-off. Its cache is gone
 * with it (it closed or refused its connections, said it is not ready,
 * spoke wrongly, was removed): its routes are withdrawn and deleted from
 * the map, its index forgotten. */
void gw_backend_down(struct gw *g, uint32_t b, const char *why);
/* b is down as gw_backend_down says, but only silent (no answer in time,
 * the network unreachable): a process that hangs or is cut off keeps its
 * cache, so its routes and index are kept (the kernel follows no route to
 * a backend that is not up) until it is back, or withdrawn as above once
 * it has been down gw_silent_keep_ns, or as soon as it fails in a way that
 * says its cache is gone. */
void gw_backend_silent(struct gw *g, uint32_t b, const char *why);
/* b's PONG (a health check's or a new connection's probe) said it is
 * instance (0: it does not say; nothing done). Another than the one it
 * said before: it restarted and its cache is gone, whatever it looks like
 * otherwise (it may have come back within the health interval, or while
 * only silent): its routes are withdrawn and its index forgotten as
 * gw_backend_down does, up or not, logged backend_restarted and counted.
 * known: the instance this controller knew of b when it sent the PING
 * answered (be->ping_known, c->probe_known); when it has learned another
 * since, from another connection, the answer is not compared: it may have
 * been written before that one (a health PONG waiting in the punt socket
 * behind a new connection's probe), and reading the former instance's
 * answer last would count a restart back to it. */
void gw_backend_instance(struct gw *g, uint32_t b, uint32_t instance, uint32_t known);

/*
 * b said its KV capacity, kv_blocks 16-token blocks (a PONG with
 * KVS_LOAD_F_KV_BLOCKS: a health check's, or a new connection's probe,
 * so that it is known before the backend's first request); 0 says
 * nothing. With --backend-kv-reports its index takes that size, and the
 * reports' corrections move around it (kvs_policy_set_capacity). Said in
 * every PONG; acted on when it changes (a first PONG, a server restarted
 * with another memory budget).
 */
void gw_backend_capacity(struct gw *g, uint32_t b, uint32_t kv_blocks);
/* How long a silent backend's routes are kept: ten health-check intervals
 * (of a second when checks are off). */
uint64_t gw_silent_keep_ns(const struct gw *g);
/* Whether a connection or probe failure err (-errno) leaves the backend
 * only silent rather than gone: timed out, network or host unreachable. */
bool gw_backend_err_silent(int err);
/* The slot of the backend named ADDR:PORT (as kvs_addr_str writes it), or
 * -ENOENT. */
int gw_backend_find(const struct gw *g, const char *name);
/* Adds a backend in a free slot and connects it (a backend that refuses is
 * retried with back-off, like one given at start). Slot or -errno:
 * -EEXIST (already there), -ENOSPC (KVS_MAX_BACKENDS in use). */
int gw_backend_add(struct gw *g, const struct kvs_addr *a);
/* The same on trial (kvsplicectl backend add): nothing is logged of it
 * until the caller answers, with gw_backend_admit (event=backend_added,
 * with its state) or gw_backend_withdraw (nothing: the caller says why it
 * refused). */
int gw_backend_try(struct gw *g, const struct kvs_addr *a);
void gw_backend_admit(struct gw *g, uint32_t b);
/* b is down and neither connecting nor answering: refused, timed out,
 * not KVS1 (one whose probes are still out, or that answers not ready, is
 * not: it is there). */
bool gw_backend_unreachable(const struct gw *g, uint32_t b);
/* Removes b at once, with nothing in flight there: for a backend just
 * added that never came up (kvsplicectl backend add of one that cannot be
 * reached). Logs nothing of a backend on trial (gw_backend_try). */
void gw_backend_withdraw(struct gw *g, uint32_t b);
/* Drain on: no new requests; in-flight ones finish. Off: back in service
 * (and a pending removal is called off). */
void gw_backend_drain(struct gw *g, uint32_t b, bool on);
/* Drains b, then removes it once nothing is in flight there, or at
 * --drain-timeout-ms (then what it still owes is answered backend_gone). */
void gw_backend_remove(struct gw *g, uint32_t b);
/* The backend list becomes addrs[0..n): backends not in it are removed
 * (drained first), new ones added. Counts what it did in *added and
 * *removed. 0 or -errno (-ENOSPC: no slot for one; the rest applied). */
int gw_backends_apply(struct gw *g, const struct kvs_addr *addrs, uint32_t n, uint32_t *added,
		      uint32_t *removed);
/* On the tick: removals that may complete, backends due for a retry. */
void gw_backends_tick(struct gw *g, uint64_t now);
/* The PONG the gateway answers a client's PING with, ask being the PING's
 * cache_key: 0, the fleet (its backends, those in service, the requests
 * in flight); s + 1, backend slot s (include/kvsplice/proto.h). */
void gw_pong_payload(struct gw *g, uint64_t ask, uint8_t payload[sizeof(struct kvs_load)]);

#endif
