// SPDX-License-Identifier: MIT
/*
 * A new upstream connection's probe: a PING written on it before it joins a
 * data path, and its answer read by the controller itself, in place for a
 * while (so a gateway starting, or an operator adding a backend, sees it up
 * at once) and then by the event loop. The connection is handed to its data
 * path only once its backend has answered with a ready PONG; anything else
 * is a reason, for the log and for kvsplicectl, that it stays down.
 */
#include "probe.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "codec.h"
#include "conn.h"
#include "log.h"
#include "loop.h"
#include "netutil.h"

/*
 * The probe's req_id starts with CR LF CR LF (its first header bytes after
 * the 16 that frame it): a server reading a line-oriented protocol (HTTP)
 * then has a complete, malformed request to answer, with a status line,
 * instead of waiting for the end of a line that never comes. Any req_id is
 * valid in a PING.
 */
#define PROBE_ID_TAG 0x0d0a0d0a00000000ull
#define SEEN_BYTES 32 /* of a wrong answer, for the log */
#define READ_CHUNK 4096

static const struct gw_conn_ops probe_ops;

uint32_t gw_probe_timeout_ms(const struct gw *g)
{
	return g->cfg->health_interval_ms ? 3 * g->cfg->health_interval_ms : 3000;
}

/* The probe is over: its owner hears how (and may close c). */
static void finish(struct gw *g, struct gw_conn *c, int err, const char *why)
{
	gw_probed_fn done = c->probed;

	c->probing = false;
	c->probed = NULL;
	done(g, c, err, why);
}

/* What c's answer says so far: 0 while it is a KVS1 frame still arriving;
 * otherwise the probe is finished (1). */
static int judge(struct gw *g, struct gw_conn *c)
{
	static const uint8_t start[5] = { 'K', 'V', 'S', '1', KVS_VERSION };
	const uint8_t *p = kvs_buf_head(&c->rx), *frame;
	char seen[4 * SEEN_BYTES + 1], why[96];
	struct kvs_load_info li = { 0 };
	size_t n = c->rx.len;
	struct kvs_msg m;
	int r = 0;

	if (memcmp(p, start, n < sizeof(start) ? n : sizeof(start)) ||
	    (r = kvs_next_frame(&c->rx, g->cfg->max_payload, &m, &frame)) < 0) {
		kvs_log_quote_mem(p, n < SEEN_BYTES ? n : SEEN_BYTES, seen, sizeof(seen));
		finish(g, c, -EPROTO, seen);
		return 1;
	}
	if (r == 0)
		return 0;
	if (m.type != KVS_T_PONG || m.req_id != c->probe_id) {
		snprintf(why, sizeof(why), "answered a PING with a %s frame (req_id %llu)",
			 kvs_type_name(m.type), (unsigned long long)m.req_id);
		finish(g, c, -EBADMSG, why);
		return 1;
	}
	kvs_load_decode(frame + KVS_HDR_LEN, &li);
	c->probe_instance = m.instance; /* its owner compares it (gw_backend_instance) */
	c->probe_kv_blocks = li.flags & KVS_LOAD_F_KV_BLOCKS ? li.kv_total_blocks : 0;
	kvs_buf_consume(&c->rx, KVS_HDR_LEN + (size_t)m.payload_len);
	if (li.flags & KVS_LOAD_F_NOT_READY)
		finish(g, c, -EAGAIN, "reported not ready");
	else
		finish(g, c, 0, "ready");
	return 1;
}

/* The PING on c, connected; its answer awaited until c->probe_deadline_ns. */
static int send_ping(struct gw *g, struct gw_conn *c)
{
	struct kvs_msg m = {
		.type = KVS_T_PING,
		.req_id = PROBE_ID_TAG | c->gen,
		.gw_backend = kvs_gw_pack(c->backend, 0),
	};
	uint8_t h[KVS_HDR_LEN];

	kvs_hdr_encode(&m, h);
	/* A new socket takes 64 bytes at once; no one else writes it yet. */
	if (send(c->fd, h, sizeof(h), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(h))
		return errno ? -errno : -EIO;
	c->probe_id = m.req_id;
	return 0;
}

int gw_probe_start(struct gw *g, struct gw_conn *c, gw_probed_fn done, bool connecting)
{
	int err;

	c->probe_instance = 0;
	c->probe_kv_blocks = 0;
	c->probe_known = g->be[c->backend].instance;
	c->probe_deadline_ns = kvs_now_ns() + gw_probe_timeout_ms(g) * 1000000ull;
	if (!connecting) {
		/* (made blocking, as once its handshake is waited for) */
		err = kvs_connect_result(c->fd);
		if (!err)
			err = send_ping(g, c);
		if (err)
			return err;
	} else {
		err = gw_conn_await_connect(g, c, GW_CONNECT_TIMEOUT_MS);
		if (err)
			return err;
	}
	c->probed = done;
	c->probing = true;
	c->ops = &probe_ops;
	return 0;
}

/* c's handshake is over: its PING goes, or the probe fails as the
 * connection did. 0 if the PING went. */
static int connected(struct gw *g, struct gw_conn *c)
{
	int err = kvs_connect_result(c->fd);

	c->connect_by_ns = 0;
	if (!err)
		err = send_ping(g, c);
	if (err)
		finish(g, c, err, strerror(-err));
	return err;
}

int gw_probe_read(struct gw *g, struct gw_conn *c)
{
	return c->connect_by_ns ? 0 : gw_arm_recv(g, c);
}

/* The event loop saw c's handshake over (conn.c): its answer is read by
 * the event loop too. */
static void probe_connected(struct gw *g, struct gw_conn *c)
{
	if (!c->probing || connected(g, c))
		return;
	if (gw_arm_recv(g, c))
		finish(g, c, -EIO, "its answer could not be read (no room in the ring)");
}

/* Bytes of the answer (the event loop read them). */
static void probe_bytes(struct gw *g, struct gw_conn *c)
{
	if (c->probing && c->rx.len)
		judge(g, c);
}

static void probe_hangup(struct gw *g, struct gw_conn *c, const char *why)
{
	char msg[96];

	if (!c->probing) {
		gw_conn_close(g, c);
		return;
	}
	snprintf(msg, sizeof(msg), "closed the connection without answering a PING (%s)", why);
	finish(g, c, -ECONNRESET, msg);
}

static const struct gw_conn_ops probe_ops = {
	.on_bytes = probe_bytes,
	.on_hangup = probe_hangup,
	.on_connected = probe_connected,
};

/* c's handshake was given GW_CONNECT_TIMEOUT_MS and is not over: the probe
 * fails, as a blocking connect did (1). */
static int connect_expired(struct gw *g, struct gw_conn *c, uint64_t now)
{
	if (!c->connect_by_ns || now < c->connect_by_ns)
		return 0;
	c->connect_by_ns = 0;
	finish(g, c, -ETIMEDOUT, strerror(ETIMEDOUT));
	return 1;
}

/* A probe whose handshake or answer may be read in place: no receive
 * pending in the ring. */
static bool in_place(const struct gw_conn *c, int b)
{
	return c && c->probing && !c->closing && !c->recv_pending &&
	       (b < 0 || c->backend == (uint32_t)b);
}

/* What the socket has now, without waiting. */
static void read_now(struct gw *g, struct gw_conn *c)
{
	ssize_t r;
	char msg[96];

	if (kvs_buf_reserve(&c->rx, READ_CHUNK)) {
		finish(g, c, -ENOBUFS, "answered a PING with more than a frame");
		return;
	}
	r = recv(c->fd, kvs_buf_tail(&c->rx), kvs_buf_room(&c->rx), MSG_DONTWAIT);
	if (r > 0) {
		kvs_buf_commit(&c->rx, (size_t)r);
		judge(g, c);
		return;
	}
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	snprintf(msg, sizeof(msg), "closed the connection without answering a PING (%s)",
		 r == 0 ? "eof" : strerror(errno));
	finish(g, c, -ECONNRESET, msg);
}

void gw_probe_settle(struct gw *g, int b, uint32_t wait_ms)
{
	uint64_t end = kvs_now_ns() + (uint64_t)wait_ms * 1000000ull;
	struct pollfd *pfd = NULL;
	uint32_t *ids = NULL, *gens = NULL, cap = 0;

	while (wait_ms) {
		uint64_t now = kvs_now_ns(), wake = end;
		uint32_t n = 0;
		int r;

		if (now >= end)
			break;
		for (uint32_t i = 0; i < g->conns_cap; i++) {
			struct gw_conn *c = g->conns[i];

			if (!in_place(c, b) || connect_expired(g, c, now))
				continue;
			if (c->connect_by_ns && c->connect_by_ns < wake)
				wake = c->connect_by_ns;
			if (n == cap) {
				uint32_t ncap = cap ? cap * 2 : 64;
				struct pollfd *np = realloc(pfd, ncap * sizeof(*np));
				uint32_t *ni = np ? realloc(ids, ncap * sizeof(*ni)) : NULL;
				uint32_t *ng = ni ? realloc(gens, ncap * sizeof(*ng)) : NULL;

				pfd = np ? np : pfd;
				ids = ni ? ni : ids;
				gens = ng ? ng : gens;
				if (!ng)
					break; /* the event loop reads the rest */
				cap = ncap;
			}
			pfd[n] = (struct pollfd){ .fd = c->fd,
						  .events = c->connect_by_ns ? POLLOUT : POLLIN };
			ids[n] = i;
			gens[n++] = c->gen;
		}
		if (!n)
			break;
		r = poll(pfd, n, (int)((wake - now + 999999) / 1000000));
		if (r < 0 && errno != EINTR)
			break;
		/* An outcome may close other connections (its backend goes
		 * down): each is looked up again, by slot and generation. */
		for (uint32_t k = 0; r > 0 && k < n; k++) {
			struct gw_conn *c = g->conns[ids[k]];

			if (!pfd[k].revents || !in_place(c, b) || c->gen != gens[k])
				continue;
			if (c->connect_by_ns)
				connected(g, c); /* its answer, on the next round */
			else
				read_now(g, c);
		}
	}
	free(pfd);
	free(ids);
	free(gens);
	/* The rest: read by the event loop, timed out on the tick. */
	for (uint32_t i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];

		if (in_place(c, b) && gw_probe_read(g, c))
			finish(g, c, -EIO, "its answer could not be read (no room in the ring)");
	}
}

void gw_probe_tick(struct gw *g, uint64_t now)
{
	for (uint32_t i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];
		char why[64];

		if (!c || !c->probing || c->closing || connect_expired(g, c, now) ||
		    c->connect_by_ns || now < c->probe_deadline_ns)
			continue;
		snprintf(why, sizeof(why), "no answer to a PING in %u ms", gw_probe_timeout_ms(g));
		finish(g, c, -ETIMEDOUT, why);
	}
}
