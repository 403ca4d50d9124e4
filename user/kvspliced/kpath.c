// SPDX-License-Identifier: MIT
/*
 * The kernel data path's side in the controller. The verdict splices what it
 * can route; the rest (slow-path requests, client PINGs, notices of bad
 * frames, backends' PONGs) it punts to the controller, which decides and
 * writes its answers into the inject socket, so that the kernel stays the
 * only writer into every spliced socket (docs/ARCHITECTURE.md).
 */
#include "kpath.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend.h"
#include "budget.h"
#include "codec.h"
#include "conn.h"
#include "decide.h"
#include "log.h"
#include "pins.h"
#include "loop.h"
#include "pool.h"
#include "probe.h"
#include "sendq.h"

#define INJECT_STALL_TICKS 50 /* 5 s without the kernel reading the inject socket */

static void kick_send(struct gw *g)
{
	gw_sendq_kick(&g->ring, &g->inject_q, g->inject_fd, ud(OP_SEND, NULL));
}

void gw_kpath_on_send(struct gw *g, struct io_uring_cqe *cqe)
{
	int res = cqe->res;

	if (gw_sendq_done(&g->ring, &g->inject_q, g->inject_fd, ud(OP_SEND, NULL), res) < 0)
		pr_warn("event=inject_send_failed err=\"%s\"", strerror(-res));
}

static struct kvs_buf *out_buf(struct gw *g)
{
	return gw_sendq_buf(&g->inject_q);
}

/* The request just queued for the inject socket (frame number
 * g->inject_queued) goes to backend b: unseen by the kernel until its count
 * of frames read passes that number. A full queue forgets its oldest entry
 * (counts it seen): the limit errs a little high rather than wedge. */
static void note_sent(struct gw *g, uint32_t b)
{
	struct gw_unseen *e;

	if (g->uq_len == g->uq_cap) {
		uint32_t ncap = g->uq_cap ? g->uq_cap * 2 : 1024;
		struct gw_unseen *n = ncap <= 65536 ? malloc(ncap * sizeof(*n)) : NULL;

		if (!n) {
			struct gw_unseen *old = &g->unseen_q[g->uq_head];

			if (g->be[old->backend].unseen)
				g->be[old->backend].unseen--;
			g->uq_head = (g->uq_head + 1) % g->uq_cap;
			g->uq_len--;
		} else {
			for (uint32_t i = 0; i < g->uq_len; i++)
				n[i] = g->unseen_q[(g->uq_head + i) % g->uq_cap];
			free(g->unseen_q);
			g->unseen_q = n;
			g->uq_cap = ncap;
			g->uq_head = 0;
		}
	}
	e = &g->unseen_q[(g->uq_head + g->uq_len++) % g->uq_cap];
	e->seq = g->inject_queued;
	e->backend = b;
	g->be[b].unseen++;
}

/* Requests the kernel has read (its count reached their number) are in its
 * own counts now. */
static void pop_seen(struct gw *g, uint64_t kernel_read)
{
	while (g->uq_len && g->unseen_q[g->uq_head].seq <= kernel_read) {
		struct gw_unseen *e = &g->unseen_q[g->uq_head];

		if (g->be[e->backend].unseen)
			g->be[e->backend].unseen--;
		g->uq_head = (g->uq_head + 1) % g->uq_cap;
		g->uq_len--;
	}
}

static void sync_inject(struct gw *g)
{
	struct kvs_stats k;

	if (kvs_read_kstats(g->dp.stats_fd, &k) == 0)
		pop_seen(g, k.inject_frames);
}

int gw_kpath_put(struct gw *g, struct kvs_msg *m, const void *payload, uint32_t len)
{
	int err = kvs_put_frame(out_buf(g), m, payload, len);

	if (err)
		return err;
	g->inject_queued++;
	kick_send(g);
	return 0;
}

static int send_error(struct gw *g, struct gw_conn *c, uint64_t client, uint64_t req_id, int code,
		      const char *msg, bool notice)
{
	struct kvs_msg m = {
		.type = KVS_T_ERROR,
		.status = (uint16_t)code,
		.req_id = req_id,
		.gw_conn = client,
		.gw_backend = notice ? KVS_GW_NOTICE : 0,
	};

	if (kvs_put_frame(out_buf(g), &m, msg, (uint32_t)strlen(msg))) {
		pr_warn("event=inject_queue_full dropped=error client=%llu",
			(unsigned long long)client);
		return -ENOBUFS;
	}
	g->inject_queued++;
	kick_send(g);
	return 0;
}

/* Answer a protocol violation and close the connection shortly after.
 * request: the frame is a REQUEST the kernel punted, counted in flight
 * (punt_request), which the answer ends; else the answer is a notice. */
static void reject_client(struct gw *g, struct gw_conn *c, uint64_t req_id, int code, bool request)
{
	char msg[96];

	g->ctl.bad_frames++;
	snprintf(msg, sizeof(msg), "kvsplice: %s", kvs_status_name(code));
	pr_info("event=client_rejected conn=%llu status=%s", (unsigned long long)c->cookie,
		kvs_status_name(code));
	if (request)
		gw_send_error(g, c->cookie, req_id, code, msg);
	else
		gw_send_notice(g, c->cookie, req_id, code, msg);
	c->close_at_ns = kvs_now_ns() + ERROR_GRACE_MS * 1000000ull;
}

/* A client began a frame longer ago than --frame-timeout-ms and has not
 * finished it (a slow or stalled sender): answered, then closed. */
static void on_stale_partial(void *ctx, uint64_t cookie)
{
	struct gw *g = ctx;
	struct gw_conn *c = kvs_idmap_get(&g->clients, cookie);
	char msg[96];

	if (!c || c->closing || c->close_at_ns)
		return;
	g->ctl.frame_timeouts++;
	snprintf(msg, sizeof(msg), "kvsplice: frame not complete within %u ms",
		 g->cfg->frame_timeout_ms);
	pr_info("event=frame_timeout conn=%llu", (unsigned long long)cookie);
	gw_send_notice(g, cookie, 0, KVS_E_TIMEOUT, msg);
	c->close_at_ns = kvs_now_ns() + ERROR_GRACE_MS * 1000000ull;
}

void gw_kpath_kick(struct gw *g)
{
	kick_send(g);
}

void gw_kpath_stale(struct gw *g, uint64_t since_ns)
{
	kvs_dp_stale_partials(&g->dp, since_ns, on_stale_partial, g);
}

static void decide_and_send(struct gw *g, struct gw_conn *c, struct kvs_msg *m,
			    const uint8_t *frame)
{
	const uint8_t *prompt = frame + KVS_HDR_LEN;
	uint32_t b;

	/* The kernel marked it if its client was at the limit when it came. */
	if (g->cfg->max_outstanding)
		sync_inject(g);
	if (m->gw_backend == KVS_GW_OVER_LIMIT) {
		gw_refuse_busy_client(g, c, m->req_id);
		return;
	}
	if (gw_decide(g, c, m, prompt, true, &b))
		return;
	if (kvs_put_frame(out_buf(g), m, prompt, m->payload_len)) {
		g->ctl.no_backend++;
		gw_send_error(g, c->cookie, m->req_id, KVS_E_BUSY,
			      "kvsplice: controller queue full");
		return;
	}
	g->ctl.slow_frames++;
	g->ctl.slow_bytes += KVS_HDR_LEN + (uint64_t)m->payload_len;
	g->inject_queued++;
	note_sent(g, b);
	kick_send(g);
	gw_publish_limits(g);
}

/* The slow path, timed for the decision-latency histogram. */
static void route_request(struct gw *g, struct gw_conn *c, struct kvs_msg *m, const uint8_t *frame)
{
	uint64_t t0 = kvs_now_ns();

	decide_and_send(g, c, m, frame);
	kvs_decide_observe(&g->decide, (double)(kvs_now_ns() - t0) / 1e9);
}

static void pong_client(struct gw *g, struct gw_conn *c, const struct kvs_msg *ping)
{
	uint8_t payload[sizeof(struct kvs_load)];
	struct kvs_msg m = { .type = KVS_T_PONG,
			     .req_id = ping->req_id,
			     .cache_key = ping->cache_key, /* what it asked about */
			     .gw_conn = c->cookie };

	gw_pong_payload(g, ping->cache_key, payload);
	gw_kpath_put(g, &m, payload, sizeof(payload));
}

/* What was held of the punt stream is discarded: a health PONG the kernel
 * passed up (the backends map's pong_seen) may have gone with it, so no
 * check waits for one any more (health.c: one past its deadline fails). */
static void forget_pongs(struct gw *g)
{
	for (uint32_t b = 0; b < g->nslots; b++)
		__atomic_store_n(&g->dp.backends[b].pong_seen, 0, __ATOMIC_RELAXED);
}

/* What the kernel punted: slow-path requests, PINGs, and ERROR notices for
 * malformed frames, each naming its client in gw_conn. */
static void punt_frames(struct gw *g, struct gw_conn *p)
{
	const uint8_t *frame;
	struct kvs_msg m;
	struct kvs_hdr_raw raw;
	int r;

	for (;;) {
		struct gw_conn *c;

		r = kvs_next_frame(&p->rx, g->cfg->max_payload, &m, &frame);
		if (r == 0)
			return;
		if (r < 0) {
			/* The kernel writes only frames that pass the same checks;
			 * if one does not (a rule the two disagree on), refuse that
			 * one client, not every client whose frames follow it. */
			kvs_hdr_peek(kvs_buf_head(&p->rx), &raw);
			if (!raw.magic_ok || KVS_HDR_LEN + (size_t)raw.payload_len > p->rx.len) {
				pr_warn("event=punt_stream_corrupt status=%s", kvs_status_name(-r));
				kvs_buf_consume(&p->rx, p->rx.len);
				forget_pongs(g);
				return;
			}
			pr_warn("event=punt_frame_refused status=%s conn=%llu", kvs_status_name(-r),
				(unsigned long long)raw.gw_conn);
			c = kvs_idmap_get(&g->clients, raw.gw_conn);
			if (c && !c->closing && !c->close_at_ns)
				reject_client(g, c, raw.req_id, -r, raw.type == KVS_T_REQUEST);
			kvs_buf_consume(&p->rx, KVS_HDR_LEN + (size_t)raw.payload_len);
			continue;
		}
		if (m.type == KVS_T_PONG && m.gw_conn == 0) { /* a health check's answer */
			if (g->on_backend_pong)
				g->on_backend_pong(g, &m, frame + KVS_HDR_LEN);
			kvs_buf_consume(&p->rx, KVS_HDR_LEN + (size_t)m.payload_len);
			continue;
		}
		c = kvs_idmap_get(&g->clients, m.gw_conn);
		if (!c || c->closing || c->close_at_ns)
			; /* gone or being rejected: nothing to answer */
		else if (m.gw_backend == KVS_GW_BUDGET_CLOSE) /* stayed over its budget */
			gw_budget_close(g, c, m.req_id, m.type == KVS_T_REQUEST);
		else if (m.gw_backend == KVS_GW_OVER_BUDGET) /* a request: busy, no decision */
			gw_budget_refuse(g, c, m.req_id);
		else if (m.type == KVS_T_REQUEST)
			route_request(g, c, &m, frame);
		else if (m.type == KVS_T_PING)
			pong_client(g, c, &m);
		else if (m.type == KVS_T_CANCEL) /* after its request: see client_cancel() */
			gw_kpath_put(g, &m, NULL, 0);
		else if (m.type == KVS_T_ERROR)
			reject_client(g, c, m.req_id, m.status, false); /* the kernel's notice */
		kvs_buf_consume(&p->rx, KVS_HDR_LEN + (size_t)m.payload_len);
	}
}

/* Frames the kernel could not deliver after the controller injected them. */
static void inject_frames(struct gw *g, struct gw_conn *c)
{
	const uint8_t *frame;
	struct kvs_msg m;
	int r;

	while ((r = kvs_next_frame(&c->rx, g->cfg->max_payload, &m, &frame)) > 0) {
		if (m.type == KVS_T_REQUEST) {
			g->ctl.no_backend++;
			gw_send_error(g, m.gw_conn, m.req_id, KVS_E_NO_BACKEND,
				      "kvsplice: backend connection unavailable");
		}
		kvs_buf_consume(&c->rx, KVS_HDR_LEN + (size_t)m.payload_len);
	}
	if (r < 0) {
		pr_warn("event=inject_stream_corrupt status=%s", kvs_status_name(-r));
		kvs_buf_consume(&c->rx, c->rx.len);
	}
}

void gw_kpath_drain(struct gw *g)
{
	punt_frames(g, g->punt);
	inject_frames(g, g->inject);
}

/* The inject or punt pair hung up: the slow path is gone with it. */
static void pair_lost(struct gw *g, struct gw_conn *c, const char *why)
{
	pr_warn("event=controller_socket_lost role=%u reason=\"%s\"", c->role, why);
	if (c == g->inject)
		g->inject = NULL;
	else if (c == g->punt)
		g->punt = NULL;
	else if (c == g->punt_k)
		g->punt_k = NULL;
	gw_conn_close(g, c);
}

/* A pooled upstream connection failed: its backend is down. */
static void upstream_lost(struct gw *g, struct gw_conn *c, const char *why)
{
	uint32_t backend = c->backend; /* gw_conn_close may free c */

	g->ctl.upstream_failures++;
	g->be[backend].pool[c->slot] = NULL;
	gw_conn_close(g, c);
	gw_backend_down(g, backend, why);
}

/*
 * A client shut down its sending side (FIN) but may still be reading: the
 * answers to what it sent are delivered, and the socket closed when none is
 * in flight (the kernel's count in conns), when the client resets, or at
 * the deadline, all checked on the tick (gw_conns_tick). No poll watches it
 * any more: a poll would report the half-close again at once, for ever.
 */
static bool client_fin(struct gw *g, struct gw_conn *c)
{
	if (c->half_closed || c->close_at_ns)
		return false;
	gw_conn_half_close(g, c);
	return true;
}

static uint32_t client_inflight(struct gw *g, const struct gw_conn *c)
{
	return kvs_dp_client_inflight(&g->dp, c->cookie);
}

/*
 * A client leaves (closed, reset, or closed by the gateway) with requests
 * in flight: its backends should stop working on them. Noted here, while
 * the kernel's count for it can still be read (a client that leaves idle
 * costs that one lookup), and cancelled on the tick, with one walk of the
 * inflight map for every client gone since (cancel_gone()).
 */
static void client_closing(struct gw *g, struct gw_conn *c)
{
	if (!c->in_map || kvs_dp_client_inflight(&g->dp, c->cookie) == 0)
		return;
	if (g->ngone == g->capgone) {
		uint32_t ncap = g->capgone ? g->capgone * 2 : 64;
		uint64_t *n = realloc(g->gone, ncap * sizeof(*n));

		if (!n)
			return; /* its requests run to their end, as before CANCEL */
		g->gone = n;
		g->capgone = ncap;
	}
	g->gone[g->ngone++] = c->cookie;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* A record of a gone client's request: a CANCEL for it, injected, so the
 * kernel sends it to the backend the record names, on the connection its
 * request took. */
static void cancel_record(void *ctx, const struct kvs_req_key *k, const struct kvs_inflight *rec)
{
	struct gw *g = ctx;
	struct kvs_msg m = {
		.type = KVS_T_CANCEL,
		.req_id = k->req_id,
		.gw_backend = kvs_gw_pack(rec->backend, 0),
		.gw_conn = k->conn,
	};

	if (!bsearch(&k->conn, g->gone, g->ngone, sizeof(*g->gone), cmp_u64))
		return;
	if (gw_kpath_put(g, &m, NULL, 0) == 0)
		g->ctl.cancels_sent++;
}

/* The requests of the clients gone since the last tick, still in flight,
 * are cancelled. Requests the controller injected for them just before
 * they went have their records by now; those that ended meanwhile have
 * none, and are left alone. */
static void cancel_gone(struct gw *g)
{
	uint64_t before = g->ctl.cancels_sent;

	if (!g->ngone)
		return;
	qsort(g->gone, g->ngone, sizeof(*g->gone), cmp_u64);
	kvs_dp_walk_inflight(&g->dp, cancel_record, g);
	pr_debug("event=clients_gone_cancelled clients=%u requests=%llu", g->ngone,
		 (unsigned long long)(g->ctl.cancels_sent - before));
	g->ngone = 0;
}

static const struct gw_conn_ops client_ops = {
	.on_hangup = gw_client_lost,
	.on_fin = client_fin,
	.inflight = client_inflight,
	.on_close = client_closing,
};
static const struct gw_conn_ops upstream_ops = { .on_hangup = upstream_lost };
static const struct gw_conn_ops punt_reader_ops = { .on_bytes = punt_frames,
						    .on_hangup = pair_lost };
static const struct gw_conn_ops inject_ops = { .on_bytes = inject_frames, .on_hangup = pair_lost };
static const struct gw_conn_ops punt_ops = { .on_hangup = pair_lost };

const struct gw_conn_ops *gw_kpath_conn_ops(uint32_t role)
{
	switch (role) {
	case KVS_ROLE_CLIENT:
		return &client_ops;
	case KVS_ROLE_UPSTREAM:
		return &upstream_ops;
	case KVS_ROLE_INJECT:
		return &inject_ops;
	case KVS_ROLE_PUNT:
		return &punt_ops;
	case ROLE_PUNT_READER:
		return &punt_reader_ops;
	default:
		return NULL;
	}
}

int gw_kpath_client(struct gw *g, struct gw_conn *c)
{
	c->ops = &client_ops;
	return gw_conn_splice(g, c, c->cookie, 0, 0);
}

/* A pool connection answered its probe (or did not): spliced under its
 * key, the kernel's from then on; either way its backend hears of it. */
static void pool_probed(struct gw *g, struct gw_conn *c, int err, const char *why)
{
	uint32_t b = c->backend, s = c->slot;

	gw_backend_instance(g, b, c->probe_instance, c->probe_known);
	gw_backend_capacity(g, b, c->probe_kv_blocks);
	if (!err) {
		c->ops = &upstream_ops;
		err = gw_conn_splice(g, c, kvs_upstream_key(b, s), b, s);
		if (err)
			why = "its connection could not be spliced";
	}
	gw_backend_probed(g, b, err, why);
}

/* A new connection to backend b, its probe PING sent; done gets the
 * answer. */
static int dial_probe(struct gw *g, uint32_t b, gw_probed_fn done, struct gw_conn **out)
{
	bool connecting;
	int fd = kvs_connect_start(&g->be[b].addr, &connecting), err;
	struct gw_conn *c;

	if (fd < 0)
		return fd;
	c = gw_conn_new(g, fd, KVS_ROLE_UPSTREAM, &upstream_ops);
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->backend = b;
	err = gw_probe_start(g, c, done, connecting);
	if (err) {
		gw_conn_close(g, c);
		return err;
	}
	*out = c;
	return 0;
}

int gw_kpath_dial_slot(struct gw *g, uint32_t b, uint32_t s, gw_probed_fn done)
{
	struct gw_conn *c;
	int err = dial_probe(g, b, done, &c);

	if (err)
		return err;
	c->slot = s;
	g->be[b].pool[s] = c;
	return 0;
}

int gw_kpath_dial_direct(struct gw *g, uint32_t b, uint32_t timeout_ms, gw_probed_fn done,
			 struct gw_conn **out)
{
	struct gw_conn *c;
	int err = dial_probe(g, b, done, &c);

	if (err)
		return err;
	c->probe_deadline_ns = kvs_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	err = gw_probe_read(g, c); /* the event loop reads its answer */
	if (err) {
		gw_conn_close(g, c);
		return err;
	}
	*out = c;
	return 0;
}

/* Backend b's pool: --pool connections, each probed with a PING before it
 * is spliced (pool_probed). */
static int connect_pool(struct gw *g, uint32_t b)
{
	struct gw_backend *be = &g->be[b];

	be->pool_n = g->cfg->pool_size;
	for (uint32_t s = 0; s < g->cfg->pool_size; s++) {
		int err = gw_kpath_dial_slot(g, b, s, pool_probed);

		if (err)
			return err;
		be->probing++;
	}
	return 0;
}

static void disconnect_pool(struct gw *g, uint32_t b)
{
	struct gw_backend *be = &g->be[b];

	for (uint32_t s = 0; s < KVS_MAX_POOL; s++) {
		if (be->pool[s]) {
			gw_conn_close(g, be->pool[s]);
			be->pool[s] = NULL;
		}
	}
	gw_pool_forget(be);
}

/* The kernel's records of what b owes zero its counts as they go. */
static int fail_backend(struct gw *g, uint32_t b,
			void (*fail)(void *ctx, uint64_t client, uint64_t req_id), void *ctx)
{
	return kvs_dp_fail_inflight(&g->dp, b, fail, ctx);
}

const struct gw_path_ops gw_kpath_ops = {
	.send_error = send_error,
	.connect = connect_pool,
	.disconnect = disconnect_pool,
	.fail_backend = fail_backend,
};

/* Frames the kernel never read (the inject socket failed) would keep the
 * counts raised for ever: once it is gone, or has read none for
 * INJECT_STALL_TICKS, the rest are taken as lost. Not sooner: a backend that
 * does not read stalls the inject socket too (its frames wait in the kernel,
 * charged to that socket), and those requests are its load until they
 * reach it (docs/ARCHITECTURE.md, back-pressure). */
void gw_kpath_tick(struct gw *g)
{
	struct kvs_stats k;

	cancel_gone(g);
	if (kvs_read_kstats(g->dp.stats_fd, &k))
		return;
	if (k.inject_frames != g->inject_seen_last_tick)
		g->inject_stall_ticks = 0;
	else if (k.inject_frames < g->inject_queued)
		g->inject_stall_ticks++;
	if (k.inject_frames < g->inject_queued &&
	    (!g->inject || g->inject_stall_ticks >= INJECT_STALL_TICKS)) {
		g->inject_queued = k.inject_frames;
		g->inject_stall_ticks = 0;
		pop_seen(g, UINT64_MAX); /* lost: never counted */
	} else {
		pop_seen(g, k.inject_frames);
	}
	g->inject_seen_last_tick = k.inject_frames;
}

/* A connected loopback TCP pair: *a is the connecting end, *b the accepted. */
static int loopback_pair(int *a, int *b)
{
	struct kvs_addr lo;
	int lfd, wfd = -1, rfd = -1, port, err;

	kvs_parse_addr("127.0.0.1:0", &lo);
	lfd = kvs_listen(&lo, 1);
	if (lfd < 0)
		return lfd;
	port = kvs_local_port(lfd);
	if (port > 0) {
		((struct sockaddr_in *)&lo.ss)->sin_port = htons((uint16_t)port);
		wfd = kvs_connect(&lo, 1000);
	}
	if (wfd >= 0)
		rfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	err = rfd < 0 ? (wfd < 0 ? wfd : -errno) : 0;
	close(lfd);
	if (err) {
		if (wfd >= 0)
			close(wfd);
		return err;
	}
	kvs_set_nodelay(wfd);
	kvs_set_nodelay(rfd);
	*a = wfd;
	*b = rfd;
	return 0;
}

/*
 * The controller's two paths through the kernel. Inject: it writes into one
 * end; the other end is in the SOCKHASH and the verdict routes what arrives.
 * Punt: the verdict redirects into one end (in the SOCKHASH); the controller
 * reads the other, which is a plain socket.
 */
int gw_kpath_setup_inject(struct gw *g)
{
	int wfd, kfd, big = 4 << 20, err;

	err = loopback_pair(&wfd, &kfd);
	if (err)
		return err;
	setsockopt(wfd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	g->inject_fd = wfd;
	g->inject = gw_conn_new(g, kfd, KVS_ROLE_INJECT, &inject_ops);
	if (!g->inject) {
		close(kfd);
		return -ENOMEM;
	}
	return gw_conn_splice(g, g->inject, g->inject->cookie, 0, 0);
}

int gw_kpath_setup_punt(struct gw *g)
{
	int wfd, kfd, big = 4 << 20, err;

	err = loopback_pair(&kfd, &wfd);
	if (err)
		return err;
	g->punt_k = gw_conn_new(g, kfd, KVS_ROLE_PUNT, &punt_ops);
	g->punt = gw_conn_new(g, wfd, ROLE_PUNT_READER, &punt_reader_ops);
	if (!g->punt_k || !g->punt) {
		if (!g->punt_k)
			close(kfd);
		if (!g->punt)
			close(wfd);
		return -ENOMEM;
	}
	setsockopt(kfd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	err = kvs_size_rcvbuf(wfd, KVS_HDR_LEN + g->cfg->max_payload);
	if (!err)
		err = gw_conn_splice(g, g->punt_k, KVS_PUNT_KEY, 0, 0);
	if (!err)
		err = gw_arm_recv(g, g->punt);
	return err;
}

int gw_kpath_setup(struct gw *g)
{
	int err = gw_kpath_setup_inject(g);

	return err ? err : gw_kpath_setup_punt(g);
}
