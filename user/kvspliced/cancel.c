// SPDX-License-Identifier: MIT
/*
 * CANCELs for the requests the gateway ended itself with an ERROR while
 * their backend may still be working on them: it was ejected by a health
 * check (it may only be hung, or cut off), it lost one connection and not
 * the others, or the operator removed it with requests still running. By
 * then its connections are closed and the kernel's records gone, so the
 * CANCELs go on a connection of their own, closed as soon as they are
 * written (its handshake waited for by the event loop, not here: a host
 * that has gone would hold the loop). A backend finds a request by
 * (gw_conn, req_id) whichever connection the CANCEL arrives on (docs/
 * PROTOCOL.md). What it answers goes where the request's answers went, a
 * connection the gateway has closed, so nothing comes back to release
 * twice.
 */
#include "cancel.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "codec.h"
#include "conn.h"
#include "log.h"
#include "netutil.h"
#include "probe.h"

/* The CANCELs in out, all at once, without waiting on the backend (it may
 * be hung): a buffer that holds them (as root, past wmem_max). Closed with
 * them still queued, TCP sends them, then FIN. How many were written. */
static uint32_t send_all(struct gw *g, int fd, const char *name, const struct kvs_buf *out)
{
	uint32_t n = (uint32_t)(out->len / KVS_HDR_LEN), written = 0;
	int size = out->len > (1u << 30) ? 1 << 30 : (int)out->len;
	ssize_t w;

	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	w = send(fd, kvs_buf_head(out), out->len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w > 0)
		written = (uint32_t)((size_t)w / KVS_HDR_LEN);
	g->ctl.cancels_sent += written;
	pr_info("event=cancels_sent backend=%s requests=%u written=%u", name, n, written);
	return written;
}

static void not_sent(const char *name, uint32_t n, const char *why)
{
	pr_debug("event=cancels_not_sent backend=%s requests=%u err=\"%s\"", name, n, why);
}

/* The handshake is over (the CANCELs in c->rx): written, closed. */
static void cancel_connected(struct gw *g, struct gw_conn *c)
{
	int err = kvs_connect_result(c->fd);

	c->connect_by_ns = 0;
	if (err)
		not_sent(c->dialed, (uint32_t)(c->rx.len / KVS_HDR_LEN), strerror(-err));
	else
		send_all(g, c->fd, c->dialed, &c->rx);
	gw_conn_close(g, c);
}

/* Closed before its handshake was over: the tick at its limit (close_at_ns),
 * or the gateway stopping. */
static void cancel_close(struct gw *g, struct gw_conn *c)
{
	if (c->connect_by_ns)
		not_sent(c->dialed, (uint32_t)(c->rx.len / KVS_HDR_LEN), "no connection in 300 ms");
}

static void cancel_hangup(struct gw *g, struct gw_conn *c, const char *why)
{
	gw_conn_close(g, c);
}

static uint32_t cancel_inflight(struct gw *g, const struct gw_conn *c)
{
	return 0;
}

static const struct gw_conn_ops cancel_ops = {
	.on_hangup = cancel_hangup,
	.inflight = cancel_inflight,
	.on_close = cancel_close,
	.on_connected = cancel_connected,
};

uint32_t gw_cancel_ended(struct gw *g, uint32_t b, const struct gw_ended *reqs, uint32_t n)
{
	struct gw_backend *be = &g->be[b];
	struct gw_conn *c;
	struct kvs_buf out;
	uint32_t i, written;
	bool connecting;
	int fd, err;

	if (!n)
		return 0;
	kvs_buf_init(&out, 0);
	for (i = 0; i < n; i++) {
		struct kvs_msg m = { .type = KVS_T_CANCEL,
				     .req_id = reqs[i].req_id,
				     .gw_backend = kvs_gw_pack(b, 0),
				     .gw_conn = reqs[i].client };

		if (kvs_put_frame(&out, &m, NULL, 0))
			break;
	}
	fd = kvs_connect_start(&be->addr, &connecting);
	if (fd >= 0 && !connecting && (err = kvs_connect_result(fd))) {
		close(fd);
		fd = err; /* what the connection said */
	}
	if (fd < 0) {
		not_sent(be->name, n, strerror(-fd));
		kvs_buf_free(&out);
		return 0;
	}
	if (!connecting) {
		written = send_all(g, fd, be->name, &out);
		close(fd);
		kvs_buf_free(&out);
		return written;
	}
	/* The handshake waited for by the event loop (GW_CONNECT_TIMEOUT_MS;
	 * closed by the tick after it), as a backend's pool connections'. */
	c = gw_conn_new(g, fd, ROLE_CANCEL, &cancel_ops);
	if (!c || gw_conn_await_connect(g, c, GW_CONNECT_TIMEOUT_MS)) {
		not_sent(be->name, n, "out of memory or of room in the ring");
		if (c)
			gw_conn_close(g, c);
		else
			close(fd);
		kvs_buf_free(&out);
		return 0;
	}
	c->backend = b;
	snprintf(c->dialed, sizeof(c->dialed), "%s", be->name);
	kvs_buf_free(&c->rx);
	c->rx = out;
	c->close_at_ns = c->connect_by_ns;
	return 0;
}
