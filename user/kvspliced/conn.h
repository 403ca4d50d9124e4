/* SPDX-License-Identifier: MIT */
/* Connections: their table, life cycle, reads and hang-up watches. */
#ifndef KVS_GW_CONN_H
#define KVS_GW_CONN_H

#include "gw.h"

/* A connection in a free slot of g->conns; ops says what its owner does
 * with what happens on it. NULL if out of memory (fd left open). */
struct gw_conn *gw_conn_new(struct gw *g, int fd, uint32_t role, const struct gw_conn_ops *ops);
/* Out of every map and closed once no io_uring operation points at it. */
void gw_conn_close(struct gw *g, struct gw_conn *c);
/* A hang-up handler for connections that need nothing but closing. */
void gw_conn_drop(struct gw *g, struct gw_conn *c, const char *why);
/* Frees c if no operation is pending on it (after gw_conn_close). */
void gw_conn_release(struct gw *g, struct gw_conn *c);
/* Closes and frees c now (teardown: the ring is gone). */
void gw_conn_free(struct gw *g, struct gw_conn *c);
/* The userspace path's state for c: a send queue of limit bytes a buffer,
 * no requests yet. 0 or -ENOMEM. Freed with c. */
int gw_conn_attach_upath(struct gw_conn *c, size_t limit);
/* A receive into c->rx; its completion goes to c->ops->on_bytes. */
int gw_arm_recv(struct gw *g, struct gw_conn *c);
/* A watch for hang-ups and errors on a socket the controller does not
 * read; c->ops->on_fin / on_hangup hear of them. */
int gw_arm_watch(struct gw *g, struct gw_conn *c);
/* The socket options every spliced socket needs, then into the SOCKHASH
 * under key (and the conns map), then read (the inject socket) or watched
 * (every other). 0 or -errno; -EOPNOTSUPP: not established any more. */
/* The limits and the tenant a new or adopted client gets by where it
 * comes from. A client from a --front-source (a kvsplice-http front, many
 * users on one connection) gets --max-front-inflight and no budget of
 * controller work: sets c->max_inflight and c->budget (--ctl-rate for
 * every other client), which gw_conn_splice puts in the kernel's conns
 * map, and c->front. Any
 * other gets its --tenant-source's tenant (c->tenant, into the map too) and
 * is counted in g->sources until it is closed: -EUSERS if its source now
 * holds more than --max-source-conns (counted all the same), else 0. */
int gw_client_bind(struct gw *g, struct gw_conn *c);
int gw_conn_splice(struct gw *g, struct gw_conn *c, uint64_t key, uint32_t backend, uint32_t slot);
/* A client shut down its sending side and may still read: it is closed
 * once its answers are out (gw_conns_tick). */
void gw_conn_half_close(struct gw *g, struct gw_conn *c);
/* A one-request connection of a service listener (metrics, control):
 * read, and closed within 2 s if it sends nothing. */
void gw_service_conn(struct gw *g, int fd, uint32_t role, const struct gw_conn_ops *ops);
/* An ERROR frame to a client, by whichever path the client is on: the
 * answer to a request it was handed (or a dead backend owed). */
void gw_send_error(struct gw *g, uint64_t client, uint64_t req_id, int code, const char *msg);
/* One about the connection (a bad frame, a timeout, the idle close, a
 * stop), which ends none of its requests: the kernel leaves its count of
 * them in flight as it is (KVS_GW_NOTICE). */
void gw_send_notice(struct gw *g, uint64_t client, uint64_t req_id, int code, const char *msg);
/* An ERROR written on the socket itself, for a client the kernel cannot
 * reach (not spliced, or its parser stopped); best effort. */
void gw_answer_direct(int fd, uint64_t cookie, int code, const char *msg);
/* A client turned away before it was spliced: an ERROR on the socket, and
 * what it sent already read and dropped, so that closing it (the caller's
 * part) sends a FIN rather than a reset that could destroy the ERROR on
 * its way. */
void gw_refuse_direct(int fd, int code, const char *msg);
/* A client hung up or failed (why, for the log): closed; if the kernel's
 * parser timed its frame out, told so on the socket and closed lingering
 * (gw_conn_linger). */
void gw_client_lost(struct gw *g, struct gw_conn *c, const char *why);
/* The gateway's FIN on a client it is done with, after what it had sent
 * (on the userspace path, once its queue is out: the tick); nothing new
 * goes to it, and what it still sends is read and dropped until it
 * closes, or for LINGER_MS at most (close_at_ns). Closed at once with
 * bytes unread, its socket would send a reset, which can destroy the
 * gateway's last frames still on their way and tells the client "reset",
 * not why. If it cannot be read it is closed at once (and freed if
 * nothing was pending on it: c must not be used after). */
void gw_conn_linger(struct gw *g, struct gw_conn *c, uint64_t now);
/* On the tick: connections whose grace ran out are closed (a client that
 * may still send lingers first), half-closed clients owed nothing more
 * are given theirs. */
void gw_conns_tick(struct gw *g, uint64_t now);
/* c's socket is connecting (kvs_connect_start said so): the event loop
 * waits for its handshake and then calls c->ops->on_connected, which
 * must look by timeout_ms (c->connect_by_ns; 0 once it is over). Nothing
 * waits on a handshake: a host that has gone (its SYNs unanswered) held
 * the event loop at every try. 0 or -errno. */
int gw_conn_await_connect(struct gw *g, struct gw_conn *c, uint32_t timeout_ms);
/* Completion handlers: OP_RECV, OP_POLL, OP_CONNECT. */
void gw_conn_on_recv(struct gw *g, struct io_uring_cqe *cqe);
void gw_conn_on_poll(struct gw *g, struct io_uring_cqe *cqe);
void gw_conn_on_connect(struct gw *g, struct io_uring_cqe *cqe);

#endif
