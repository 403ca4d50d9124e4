// SPDX-License-Identifier: MIT
/*
 * Connections: their table, life cycle, reads and hang-up watches. Who owns
 * which socket:
 *
 *   client sockets    the kernel reads and writes them; the controller only
 *                     watches them for hang-ups (poll), and reads one only
 *                     once it is out of the SOCKHASH, closing
 *                     (gw_conn_linger).
 *   upstream sockets  likewise.
 *   punt socket       a loopback pair: the kernel redirects what it does not
 *                     route itself into one end (in the SOCKHASH); the
 *                     controller reads the other, a plain socket.
 *   inject socket     a loopback pair: the controller writes into one end;
 *                     the other sits in the SOCKHASH, so whatever the
 *                     controller sends is routed by the verdict like any
 *                     other frame. The kernel stays the only writer into
 *                     every spliced socket (docs/ARCHITECTURE.md).
 *
 * On the userspace data path the controller reads and writes clients and
 * its own upstream connections itself (upath.c).
 */
#include "conn.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "codec.h"
#include "log.h"
#include "loop.h"
#include "sendq.h"

#define RECV_CHUNK 65536

struct gw_conn *gw_conn_new(struct gw *g, int fd, uint32_t role, const struct gw_conn_ops *ops)
{
	struct gw_conn *c;
	uint32_t i;

	for (i = 0; i < g->conns_cap && g->conns[i]; i++)
		;
	if (i == g->conns_cap) {
		uint32_t ncap = g->conns_cap ? g->conns_cap * 2 : 64;
		struct gw_conn **n = realloc(g->conns, ncap * sizeof(*n));

		if (!n)
			return NULL;
		memset(n + g->conns_cap, 0, (ncap - g->conns_cap) * sizeof(*n));
		g->conns = n;
		g->conns_cap = ncap;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->fd = fd;
	c->id = i;
	c->gen = ++g->next_gen;
	c->role = role;
	c->ops = ops;
	c->cookie = kvs_sock_cookie(fd);
	c->active_ns = kvs_now_ns();
	kvs_buf_init(&c->rx, KVS_HDR_LEN + (size_t)g->cfg->max_payload + RECV_CHUNK);
	g->conns[i] = c;
	return c;
}

int gw_conn_attach_upath(struct gw_conn *c, size_t limit)
{
	c->up = calloc(1, sizeof(*c->up));
	if (!c->up)
		return -ENOMEM;
	gw_sendq_init(&c->up->q, limit);
	return 0;
}

static void upath_free(struct gw_conn *c)
{
	if (!c->up)
		return;
	gw_sendq_free(&c->up->q);
	free(c->up->reqs);
	free(c->up);
	c->up = NULL;
}

void gw_conn_free(struct gw *g, struct gw_conn *c)
{
	close(c->fd);
	if (g->acc.waiting) /* the clients' accept may take it now */
		g->acc.fd_freed = true;
	kvs_buf_free(&c->rx);
	upath_free(c);
	g->conns[c->id] = NULL;
	free(c);
}

/* Takes the socket out of the data path and closes it once no io_uring
 * request still points at its buffer. */
void gw_conn_close(struct gw *g, struct gw_conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	if (c->ops && c->ops->on_close && !c->lingering) /* (a linger ran it) */
		c->ops->on_close(g, c);
	if (c->lingering)
		pr_debug("event=client_linger_done conn=%llu dropped_bytes=%llu",
			 (unsigned long long)c->cookie, (unsigned long long)c->linger_bytes);
	if (c->in_map) {
		kvs_dp_del_sock(&g->dp, c->key, c->cookie);
		c->in_map = false;
	}
	if (c->in_conns) {
		kvs_dp_del_conn(&g->dp, c->cookie);
		c->in_conns = false;
	}
	if (c->role == KVS_ROLE_CLIENT) {
		g->ctl.clients_closed++;
		kvs_idmap_del(&g->clients, c->cookie);
		if (c->src_counted)
			kvs_sources_del(&g->sources, &c->src);
		c->src_counted = false;
	}
	/* Shut down, not only closed later: a pending op completes, and a copy
	 * in systemd's descriptor store (fdstore.c), which would keep the
	 * connection open, sees it closed and is dropped. */
	if (c->fdstored || c->recv_pending || c->poll_pending || c->connect_pending ||
	    (c->up && c->up->q.pending))
		shutdown(c->fd, SHUT_RDWR);
	gw_conn_release(g, c);
}

void gw_conn_drop(struct gw *g, struct gw_conn *c, const char *why)
{
	gw_conn_close(g, c);
}

void gw_conn_release(struct gw *g, struct gw_conn *c)
{
	if (!c->recv_pending && !c->poll_pending && !c->connect_pending &&
	    !(c->up && c->up->q.pending) && !c->in_handler)
		gw_conn_free(g, c);
}

int gw_arm_recv(struct gw *g, struct gw_conn *c)
{
	struct io_uring_sqe *sqe;
	int err;

	if (c->closing || c->recv_pending || g->quiescing)
		return 0;
	err = kvs_buf_reserve(&c->rx, RECV_CHUNK);
	if (err == -ENOBUFS) /* a whole max frame is buffered: reserve less */
		err = kvs_buf_room(&c->rx) ? 0 : -ENOBUFS;
	if (err)
		return err;
	sqe = gw_get_sqe(g);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_recv(sqe, c->fd, kvs_buf_tail(&c->rx), kvs_buf_room(&c->rx), 0);
	io_uring_sqe_set_data64(sqe, ud(OP_RECV, c));
	c->recv_pending = true;
	return 0;
}

/* Hang-ups and errors on a socket the controller does not read. */
int gw_arm_watch(struct gw *g, struct gw_conn *c)
{
	struct io_uring_sqe *sqe;

	if (c->closing || c->poll_pending)
		return 0;
	sqe = gw_get_sqe(g);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, c->fd, POLLRDHUP | POLLERR | POLLHUP);
	io_uring_sqe_set_data64(sqe, ud(OP_POLL, c));
	c->poll_pending = true;
	return 0;
}

/* A client from a --front-source carries many users' requests: it gets
 * the front limit and no budget of controller work, in the kernel (the
 * conns map) and the userspace path, and is neither counted by source nor
 * closed when idle. Any other client gets the budget (--ctl-rate), and
 * is bound to its --tenant-source's tenant, if any, and counted against its
 * source (until it is closed), even past the limit: a client taken over
 * from the previous controller stays. */
int gw_client_bind(struct gw *g, struct gw_conn *c)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	uint32_t max = g->cfg->max_source_conns;
	int n;

	c->max_inflight = 0;
	c->tenant = 0;
	c->front = false;
	c->budget = (struct kvs_budget){ .rate = g->cfg->ctl_rate,
					 .burst = g->cfg->ctl_burst,
					 .close_after = g->cfg->ctl_close_after };
	if (getpeername(c->fd, (struct sockaddr *)&ss, &len))
		return 0;
	if (g->nfronts && kvs_cidr_contains(g->fronts, g->nfronts, &ss)) {
		c->front = true;
		c->budget.rate = 0;
		c->max_inflight = g->cfg->front_max_inflight ? g->cfg->front_max_inflight :
							       UINT32_MAX;
		pr_debug("event=front_accepted conn=%llu limit=%u", (unsigned long long)c->cookie,
			 c->max_inflight);
		return 0;
	}
	c->tenant = gw_tenant_of(&g->tenants, &ss);
	if (c->tenant)
		pr_debug("event=tenant_bound conn=%llu tenant=%u", (unsigned long long)c->cookie,
			 c->tenant);
	if (c->src_counted || !kvs_source_of(&ss, &c->src))
		return 0;
	n = kvs_sources_add(&g->sources, &c->src);
	if (n < 0) /* out of memory: let in, uncounted */
		return 0;
	c->src_counted = true;
	return max && (uint32_t)n > max ? -EUSERS : 0;
}

/* Socket options every spliced socket needs, then into the maps. */
int gw_conn_splice(struct gw *g, struct gw_conn *c, uint64_t key, uint32_t backend, uint32_t slot)
{
	struct kvs_conn kc = {
		.role = c->role,
		.by_role.backend = backend,
		.slot = slot,
		.limit = c->max_inflight,
		.ctl = c->budget,
	};
	/* The strparser's own frame timer, a backstop at twice the timeout:
	 * the controller answers stalled frames first (on_stale_partial). */
	uint64_t backstop_ms = 2ull * g->cfg->frame_timeout_ms;
	struct timeval tv = {
		.tv_sec = (time_t)(backstop_ms / 1000),
		.tv_usec = (suseconds_t)(backstop_ms % 1000) * 1000,
	};
	int err;

	/* The strparser aborts frames larger than the receive buffer and
	 * frames not complete within the socket's receive timeout. */
	err = kvs_size_rcvbuf(c->fd, KVS_HDR_LEN + g->cfg->max_payload);
	if (err)
		return err;
	if (setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		return -errno;
	kvs_set_nodelay(c->fd);
	kvs_sock_endpoints(c->fd, &kc.local, &kc.remote);
	/* (backend, by_role's other half, is an upstream's) */
	if (c->role == KVS_ROLE_CLIENT)
		kc.by_role.tenant = c->tenant;
	c->key = key;
	c->backend = backend;
	c->slot = slot;
	err = kvs_dp_add_sock(&g->dp, c->fd, key, c->cookie, &kc);
	if (err)
		return err;
	c->in_map = true;
	/*
	 * Bytes that arrived before the socket joined the SOCKHASH (a client
	 * that sends right after connect) raise no data-ready event, so the
	 * strparser would not see them until more bytes came. Setting
	 * SO_RCVLOWAT makes TCP call tcp_data_ready(), which runs the parser
	 * over what is already queued (docs/ARCHITECTURE.md, "Bytes that
	 * predate the map"; the stalls it prevents: docs/EVALUATION.md,
	 * "Correctness figures from the test suite").
	 */
	if (setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &(int){ 1 }, sizeof(int)))
		return -errno;
	/* Only the inject socket's own queue is read (frames the kernel could
	 * not deliver come back there); every other spliced socket is only
	 * watched. */
	return c->role == KVS_ROLE_INJECT ? gw_arm_recv(g, c) : gw_arm_watch(g, c);
}

void gw_conn_half_close(struct gw *g, struct gw_conn *c)
{
	g->ctl.clients_half_closed++;
	c->half_closed = true;
	c->half_close_deadline_ns = kvs_now_ns() + HALF_CLOSE_MAX_MS * 1000000ull;
	pr_debug("event=client_half_closed conn=%llu inflight=%u", (unsigned long long)c->cookie,
		 c->ops->inflight(g, c));
}

void gw_service_conn(struct gw *g, int fd, uint32_t role, const struct gw_conn_ops *ops)
{
	struct gw_conn *c = gw_conn_new(g, fd, role, ops);

	if (!c) {
		close(fd);
		return;
	}
	c->close_at_ns = kvs_now_ns() + 2000000000ull; /* a client that sends nothing */
	if (gw_arm_recv(g, c))
		gw_conn_close(g, c);
}

/* An ERROR written on the socket itself, for a client the kernel cannot
 * reach (not spliced, or its parser stopped); best effort, the peer may be
 * gone. */
void gw_answer_direct(int fd, uint64_t cookie, int code, const char *msg)
{
	struct kvs_buf b;

	kvs_buf_init(&b, 0);
	if (!kvs_put_error(&b, 0, cookie, (uint16_t)code, msg))
		(void)!send(fd, kvs_buf_head(&b), b.len, MSG_DONTWAIT | MSG_NOSIGNAL);
	kvs_buf_free(&b);
}

void gw_refuse_direct(int fd, int code, const char *msg)
{
	char scratch[4096];

	gw_answer_direct(fd, kvs_sock_cookie(fd), code, msg);
	for (int i = 0; i < 16 && recv(fd, scratch, sizeof(scratch), MSG_DONTWAIT) > 0; i++)
		;
}

void gw_client_lost(struct gw *g, struct gw_conn *c, const char *why)
{
	int err = 0;
	socklen_t len = sizeof(err);

	/* The strparser gave up on a frame (its backstop timer): still say
	 * why, on the socket itself, unless the controller's timeout has (or
	 * the gateway closes its side already), and close as every other
	 * close of a client by the gateway does, lingering: the client may
	 * still be sending the frame. */
	if (!getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) && err == ETIMEDOUT &&
	    !c->lingering) {
		if (!c->close_at_ns) {
			g->ctl.frame_timeouts++;
			gw_answer_direct(c->fd, c->cookie, KVS_E_TIMEOUT,
					 "kvsplice: frame not complete in time");
		}
		gw_conn_linger(g, c, kvs_now_ns());
		return;
	}
	pr_debug("event=client_closed conn=%llu reason=\"%s\"", (unsigned long long)c->cookie, why);
	gw_conn_close(g, c);
}

static void send_error(struct gw *g, uint64_t client, uint64_t req_id, int code, const char *msg,
		       bool notice)
{
	struct gw_conn *c = kvs_idmap_get(&g->clients, client);
	const struct gw_path_ops *path = c && c->up ? g->upath : g->kpath;

	if (c && c->lingering) /* the gateway is done with it (gw_conn_linger) */
		return;
	if (path->send_error(g, c, client, req_id, code, msg, notice) == 0)
		g->ctl.errors_sent++;
}

void gw_send_error(struct gw *g, uint64_t client, uint64_t req_id, int code, const char *msg)
{
	send_error(g, client, req_id, code, msg, false);
}

void gw_send_notice(struct gw *g, uint64_t client, uint64_t req_id, int code, const char *msg)
{
	send_error(g, client, req_id, code, msg, true);
}

/* A half-closed client that reset or went away since: nothing can reach it. */
static bool client_gone(const struct gw_conn *c)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	return getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) || ti.tcpi_state == TCP_CLOSE;
}

/* The FIN, once nothing queued before the linger is still to go: what the
 * userspace path queued (the ERROR among it) would be lost to EPIPE. The
 * kernel's path has no queue left: out of the SOCKHASH, its psock's went
 * with it. */
static void linger_fin(struct gw_conn *c)
{
	if (c->shut_wr || (c->up && gw_sendq_busy(&c->up->q)))
		return;
	shutdown(c->fd, SHUT_WR);
	c->shut_wr = true;
}

void gw_conn_linger(struct gw *g, struct gw_conn *c, uint64_t now)
{
	pr_debug("event=client_lingering conn=%llu", (unsigned long long)c->cookie);
	c->lingering = true;
	c->close_at_ns = now + LINGER_MS * 1000000ull;
	/* Nothing more reaches it: its requests still at backends are
	 * cancelled now (as at a close: ops->on_close), not once it closes,
	 * nor never if it is let go in an upgrade. */
	if (c->ops && c->ops->on_close)
		c->ops->on_close(g, c);
	kvs_buf_consume(&c->rx, c->rx.len); /* (frames nobody will parse) */
	/* The controller reads what comes, and drops it (gw_conn_on_recv).
	 * Not the kernel: its verdict would send a request on to a backend
	 * whose answer cannot be delivered now, and its parser, holding a
	 * frame begun, gives up on it at the socket's receive timeout
	 * (gw_conn_splice), and then nobody reads at all: the close
	 * would reset. Out of the SOCKHASH before the FIN: a redirect the
	 * kernel still had queued for it, sent after, would fail and set
	 * the socket's error. (Its in-flight count stays in conns.) */
	if (!c->up && c->in_map)
		kvs_dp_unsplice(&g->dp, c->key);
	linger_fin(c);
	if (gw_arm_recv(g, c))
		gw_conn_close(g, c);
}

void gw_conns_tick(struct gw *g, uint64_t now)
{
	for (uint32_t i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];

		if (!c || c->closing)
			continue;
		if (c->lingering) {
			linger_fin(c);
			/* (a linger begun while quiescing for a handover that
			 * then failed armed nothing) */
			if (!c->recv_pending && gw_arm_recv(g, c)) {
				gw_conn_close(g, c);
				continue;
			}
		}
		if (c->close_at_ns && now >= c->close_at_ns) {
			if (c->role == KVS_ROLE_CLIENT && !c->lingering && !c->half_closed &&
			    !client_gone(c))
				gw_conn_linger(g, c, now);
			else
				gw_conn_close(g, c);
		} else if (c->half_closed && !c->close_at_ns && client_gone(c)) {
			gw_conn_close(g, c);
		} else if (c->half_closed && !c->close_at_ns &&
			   (now >= c->half_close_deadline_ns || c->ops->inflight(g, c) == 0)) {
			/* The last answer may still sit in the kernel's queue
			 * for the socket: give it the same grace as an error. */
			if (now >= c->half_close_deadline_ns)
				pr_info("event=half_close_timeout conn=%llu",
					(unsigned long long)c->cookie);
			c->close_at_ns = now + ERROR_GRACE_MS * 1000000ull;
		}
	}
}

/* A FIN where the owner takes it as a half-close (a client that may still
 * read its answers), else a hang-up: always, once the gateway has shut its
 * own side (nothing more can be answered). */
static bool on_fin(struct gw *g, struct gw_conn *c)
{
	return !c->lingering && c->ops->on_fin && c->ops->on_fin(g, c);
}

/* The connection an op of it completed for, its pending flag cleared; NULL
 * if it is gone, or closing (then released once nothing else is pending). */
static struct gw_conn *completed(struct gw *g, struct io_uring_cqe *cqe, size_t pending)
{
	struct gw_conn *c = gw_conn_of(g, io_uring_cqe_get_data64(cqe));

	if (!c)
		return NULL;
	*(bool *)((char *)c + pending) = false;
	if (c->closing) {
		gw_conn_release(g, c);
		return NULL;
	}
	return c;
}

void gw_conn_on_poll(struct gw *g, struct io_uring_cqe *cqe)
{
	struct gw_conn *c = completed(g, cqe, offsetof(struct gw_conn, poll_pending));
	int res = cqe->res;

	if (!c)
		return;
	/* Lingering, its read hears the FIN or the error, after what is
	 * queued before it (closed here, that could reset) */
	if (c->lingering && c->recv_pending)
		return;
	if (res > 0 && (res & POLLRDHUP) && !(res & (POLLERR | POLLHUP)) && on_fin(g, c))
		return;
	c->ops->on_hangup(g, c, res < 0 ? strerror(-res) : (res & POLLERR) ? "error" : "eof");
}

int gw_conn_await_connect(struct gw *g, struct gw_conn *c, uint32_t timeout_ms)
{
	struct io_uring_sqe *sqe = gw_get_sqe(g);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, c->fd, POLLOUT);
	io_uring_sqe_set_data64(sqe, ud(OP_CONNECT, c));
	c->connect_pending = true;
	c->connect_by_ns = kvs_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	return 0;
}

void gw_conn_on_connect(struct gw *g, struct io_uring_cqe *cqe)
{
	struct gw_conn *c = completed(g, cqe, offsetof(struct gw_conn, connect_pending));

	if (!c)
		return;
	/* (over already: seen in place by probe.c, or given up on) */
	if (c->connect_by_ns && c->ops->on_connected)
		c->ops->on_connected(g, c);
}

void gw_conn_on_recv(struct gw *g, struct io_uring_cqe *cqe)
{
	struct gw_conn *c = completed(g, cqe, offsetof(struct gw_conn, recv_pending));
	int res = cqe->res;

	if (!c)
		return;
	if (res == -ECANCELED) /* handing over: the bytes stay in the socket */
		return;
	if (res == 0 && on_fin(g, c))
		return;
	if (res == -EPIPE && c->lingering) {
		/* a send on our side, shut already, failed (the kernel's
		 * last redirect, or the userspace path's): the client may
		 * still be sending */
		if (gw_arm_recv(g, c))
			c->ops->on_hangup(g, c, "recv");
		return;
	}
	if (res <= 0) {
		c->ops->on_hangup(g, c, res == 0 ? "eof" : strerror(-res));
		return;
	}
	kvs_buf_commit(&c->rx, (size_t)res);
	if (c->lingering) { /* the gateway is done with it: dropped */
		c->linger_bytes += c->rx.len;
		kvs_buf_consume(&c->rx, c->rx.len);
		if (gw_arm_recv(g, c))
			c->ops->on_hangup(g, c, "recv");
		return;
	}
	if (c->role == KVS_ROLE_CLIENT) /* the userspace path's: idle.c */
		c->active_ns = kvs_now_ns();
	c->in_handler = true; /* what it triggers may close it (a backend's death) */
	c->ops->on_bytes(g, c);
	c->in_handler = false;
	if (c->closing) {
		gw_conn_release(g, c);
		return;
	}
	if (c->close_at_ns) /* rejected, or a one-request service: read no more */
		return;
	if (!c->ops->on_bytes) /* its owner reads no more (a probe done, spliced) */
		return;
	if (gw_arm_recv(g, c)) {
		pr_warn("event=recv_arm_failed role=%u", c->role);
		c->ops->on_hangup(g, c, "recv");
	}
}
