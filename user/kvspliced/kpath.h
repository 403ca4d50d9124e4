/* SPDX-License-Identifier: MIT */
/*
 * The kernel data path's side in the controller: the punt and inject
 * sockets, the slow path's requests, the kernel-path clients and backend
 * pools.
 */
#ifndef KVS_GW_KPATH_H
#define KVS_GW_KPATH_H

#include "gw.h"
#include "probe.h"

/* Registered in g->kpath at setup. */
extern const struct gw_path_ops gw_kpath_ops;

/* The controller's two socket pairs into the kernel. 0 or -errno. */
int gw_kpath_setup(struct gw *g);
/* Each pair alone (a controller restarted from the service manager's
 * store takes a fresh inject pair: the one it had may hold half a frame). */
int gw_kpath_setup_inject(struct gw *g);
int gw_kpath_setup_punt(struct gw *g);
/* What a connection of the kernel path with this role does on its events
 * (clients, upstreams, the controller's own pairs; NULL for others). */
const struct gw_conn_ops *gw_kpath_conn_ops(uint32_t role);
/* A client accepted onto the kernel path: spliced, then watched. 0 or
 * -errno (-EOPNOTSUPP: it closed before it could be spliced). */
int gw_kpath_client(struct gw *g, struct gw_conn *c);
/* Backend b's pool slot s: a connection made and probed (done hears how;
 * on success it splices it under the slot's key). In be->pool[s] from
 * then on. 0, or -errno (nothing is left behind). */
int gw_kpath_dial_slot(struct gw *g, uint32_t b, uint32_t s, gw_probed_fn done);
/* A connection to backend b of the controller's own, in no pool and no
 * map: a PING on it, answered within timeout_ms or failed (done hears
 * how, and closes it). The health check's second opinion (health.c).
 * 0 with *c set, or -errno (nothing is left behind). */
int gw_kpath_dial_direct(struct gw *g, uint32_t b, uint32_t timeout_ms, gw_probed_fn done,
			 struct gw_conn **c);
/* A frame from the controller, through the kernel's verdict like any
 * client's. 0 or -ENOBUFS (the inject queue is full). */
int gw_kpath_put(struct gw *g, struct kvs_msg *m, const void *payload, uint32_t len);
/* Frames already read from the punt and inject sockets (after a take-over:
 * what the old controller had read and not handled). */
void gw_kpath_drain(struct gw *g);
/* Clients whose frame began before since_ns and is not complete (the
 * kernel's record of partial frames): answered timeout, then closed. */
void gw_kpath_stale(struct gw *g, uint64_t since_ns);
/* On the tick: the kernel's progress through the injected frames. */
void gw_kpath_tick(struct gw *g);
/* Sends queued while the submission ring was full. */
void gw_kpath_kick(struct gw *g);
/* Completion handler: OP_SEND (the inject socket). */
void gw_kpath_on_send(struct gw *g, struct io_uring_cqe *cqe);

#endif
