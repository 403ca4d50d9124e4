// SPDX-License-Identifier: MIT
/*
 * The controller's event loop (io_uring). Who owns which socket:
 *
 *   client sockets    the kernel reads and writes them; the controller only
 *                     watches them for hang-ups (poll), never reads them.
 *   upstream sockets  likewise.
 *   punt socket       a loopback pair: the kernel redirects what it does not
 *                     route itself into one end (in the SOCKHASH); the
 *                     controller reads the other, a plain socket.
 *   inject socket     a loopback pair: the controller writes into one end;
 *                     the other sits in the SOCKHASH, so whatever the
 *                     controller sends is routed by the verdict like any
 *                     other frame. The kernel stays the only writer into
 *                     every spliced socket (DESIGN.md section 5, hazard 1).
 */
#include "gateway.h"
#include "gw_internal.h"
#include "handover.h"
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codec.h"
#include "datapath.h"
#include "idmap.h"
#include "kvsplice/hash.h"
#include "log.h"
#include "pins.h"
#include "policy.h"
#include "sdnotify.h"

#define TICK_MS 100
#define INJECT_STALL_TICKS 50 /* 5 s without the kernel reading the inject socket */
#define RECV_CHUNK 65536
#define OUT_LIMIT (64u << 20)
#define ERROR_GRACE_MS 200
/* How long a half-closed client may wait for the answers it is owed. */
#define HALF_CLOSE_MAX_MS (300 * 1000)
#define CONNECT_TIMEOUT_MS 300
#define BACKOFF_MAX_MS 5000



struct io_uring_sqe *gw_get_sqe(struct gw *g)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&g->ring);

	if (!sqe) {
		/* Ring full: flush what is queued and retry once. */
		io_uring_submit(&g->ring);
		sqe = io_uring_get_sqe(&g->ring);
	}
	return sqe;
}

enum kvs_backend_state gw_backend_state(const struct gw *g, uint32_t b)
{
	const struct gw_backend *be = &g->be[b];

	if (!be->present)
		return KVS_BE_ABSENT;
	if (!be->up)
		return KVS_BE_DOWN;
	if (be->probation)
		return KVS_BE_PROBATION;
	if (be->removing)
		return KVS_BE_REMOVING;
	return be->draining ? KVS_BE_DRAINING : KVS_BE_UP;
}

/* The kernel follows routes to b, and sends it requests, only while UP. */
static void publish_backend(struct gw *g, uint32_t b)
{
	kvs_dp_set_backend(&g->dp, b, gw_backend_state(g, b), g->cfg->pool_size,
			   g->cfg->max_outstanding);
}

/* ---- connections ---------------------------------------------------- */

struct gw_conn *gw_conn_new(struct gw *g, int fd, uint32_t role)
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
	c->cookie = kvs_sock_cookie(fd);
	kvs_buf_init(&c->rx, KVS_HDR_LEN + (size_t)g->cfg->max_payload + RECV_CHUNK);
	g->conns[i] = c;
	return c;
}

void gw_conn_free(struct gw *g, struct gw_conn *c)
{
	close(c->fd);
	kvs_buf_free(&c->rx);
	gw_up_free(c);
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
	}
	if (c->recv_pending || c->poll_pending || (c->up && c->up->q.pending))
		shutdown(c->fd, SHUT_RDWR); /* the pending op completes */
	gw_conn_release(g, c);
}

void gw_conn_release(struct gw *g, struct gw_conn *c)
{
	if (!c->recv_pending && !c->poll_pending && !(c->up && c->up->q.pending) &&
	    !c->in_handler)
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
static int arm_watch(struct gw *g, struct gw_conn *c)
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

/* Socket options every spliced socket needs, then into the maps. */
static int conn_splice(struct gw *g, struct gw_conn *c, uint64_t key, uint32_t backend,
		       uint32_t slot)
{
	struct kvs_conn kc = { .role = c->role, .backend = backend, .slot = slot };
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
	 * over what is already queued. Measured here: without it 4-7 runs in 25
	 * of an immediate-send client stalled for good after its first frame.
	 */
	if (setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &(int){ 1 }, sizeof(int)))
		return -errno;
	/* Only the inject socket's own queue is read (frames the kernel could
	 * not deliver come back there); every other spliced socket is only
	 * watched. */
	return c->role == KVS_ROLE_INJECT ? gw_arm_recv(g, c) : arm_watch(g, c);
}

/* ---- sending through the kernel ---------------------------------------- */

static void kick_send(struct gw *g)
{
	gw_sendq_kick(g, &g->inject_q, g->inject_fd, ud(OP_SEND, NULL));
}

static void on_send(struct gw *g, int res)
{
	if (gw_sendq_done(g, &g->inject_q, g->inject_fd, ud(OP_SEND, NULL), res) < 0)
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

void gw_send_error(struct gw *g, uint64_t client, uint64_t req_id, int code, const char *msg)
{
	struct gw_conn *c = kvs_idmap_get(&g->clients, client);

	if (c && c->up) { /* the userspace path: straight to the client */
		if (gw_up_error(g, c, req_id, code, msg) == 0)
			g->ctl.errors_sent++;
		return;
	}
	if (kvs_put_error(out_buf(g), req_id, client, (uint16_t)code, msg)) {
		pr_warn("event=inject_queue_full dropped=error client=%llu", (unsigned long long)client);
		return;
	}
	g->inject_queued++;
	g->ctl.errors_sent++;
	kick_send(g);
}

/* Answer a protocol violation and close the connection shortly after. */
static void reject_client(struct gw *g, struct gw_conn *c, uint64_t req_id, int code)
{
	char msg[96];

	g->ctl.bad_frames++;
	snprintf(msg, sizeof(msg), "kvsplice: %s", kvs_status_name(code));
	pr_info("event=client_rejected conn=%llu status=%s", (unsigned long long)c->cookie,
		kvs_status_name(code));
	gw_send_error(g, c->cookie, req_id, code, msg);
	c->close_at_ns = kvs_now_ns() + ERROR_GRACE_MS * 1000000ull;
}

/* An ERROR written on the socket itself, for a client the kernel cannot
 * reach (not spliced, or its parser stopped); best effort, the peer may be
 * gone. */
static void answer_direct(int fd, uint64_t cookie, int code, const char *msg)
{
	struct kvs_buf b;

	kvs_buf_init(&b, 0);
	if (!kvs_put_error(&b, 0, cookie, (uint16_t)code, msg))
		(void)!send(fd, kvs_buf_head(&b), b.len, MSG_DONTWAIT | MSG_NOSIGNAL);
	kvs_buf_free(&b);
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
	gw_send_error(g, cookie, 0, KVS_E_TIMEOUT, msg);
	c->close_at_ns = kvs_now_ns() + ERROR_GRACE_MS * 1000000ull;
}

/* ---- slow path: routing decisions ------------------------------------- */

/* Which hash places a cold prompt: the client's cache key, else its hinted
 * prefix, else the deepest checkpoint (the longest prefix the kernel can
 * match next time), else whatever blocks there are. */
static uint64_t placement_key(const struct kvs_msg *m, uint64_t seed, const uint64_t *h, uint32_t n)
{
	uint32_t hint = kvs_hint_blocks(m->prefix_len), j, best = 0;

	if (m->cache_key)
		return kvs_key_hash(seed, m->cache_key);
	if (hint && hint <= n)
		return h[hint - 1];
	for (j = 0; j < KVS_MAX_CHECKPOINTS; j++)
		if (kvs_checkpoint(j) <= n)
			best = kvs_checkpoint(j);
	if (best)
		return h[best - 1];
	return n ? h[n - 1] : seed;
}

/* Which backends may take new work, and their outstanding work in tokens.
 * Returns the code to answer with when none may. The kernel counts a
 * request the controller sends only once it has read it from the inject
 * socket: the controller adds what it sent since the last tick (counted
 * twice for a moment, so the limit errs on the safe side). */
static int fleet_state(struct gw *g, uint64_t *load, uint8_t *ok)
{
	uint32_t b, up = 0;

	for (b = 0; b < g->nslots; b++) {
		load[b] = kvs_dp_outstanding_work(&g->dp, b);
		ok[b] = gw_backend_state(g, b) == KVS_BE_UP &&
			(!g->cfg->max_outstanding ||
			 kvs_dp_outstanding(&g->dp, b) + g->be[b].unseen < g->cfg->max_outstanding);
		up += gw_backend_state(g, b) == KVS_BE_UP;
	}
	return up ? KVS_E_BUSY : KVS_E_NO_BACKEND;
}

/*
 * The kernel follows a route only while the backend's outstanding work is
 * within balance x the fleet's mean plus one typical request (the average
 * charge of the requests sent since the last refresh, smoothed; at least
 * --kernel-slack-tokens); past that, requests come to the controller, which
 * may spill them. Scale-free: measured on the demo, a fixed slack of 8,192
 * tokens never triggered on small prompts (load max/mean 1.17), while one
 * request's worth kept it at 1.01 with 97% of requests still routed in the
 * kernel. The charge a request brings, not the work outstanding per request:
 * with prefill released at the first token the latter is mostly decode work,
 * and a limit that small deferred cached template requests by the dozen
 * (850-877 of 960 routed in the kernel in test_routing.sh). Refreshed after
 * every decision and on every tick.
 */
static void publish_limits(struct gw *g)
{
	uint64_t work = 0, charged = 0, sent = 0, slack, limit;
	uint32_t b, up = 0;

	for (b = 0; b < g->nslots; b++) {
		uint64_t c, s;

		if (!g->be[b].present)
			continue;
		kvs_dp_charged(&g->dp, b, &c, &s);
		charged += c;
		sent += s;
		if (gw_backend_state(g, b) != KVS_BE_UP)
			continue;
		work += kvs_dp_outstanding_work(&g->dp, b);
		up++;
	}
	if (sent > g->seen_sent && charged >= g->seen_charged) {
		uint64_t avg = (charged - g->seen_charged) / (sent - g->seen_sent);

		g->typical_charge = g->typical_charge ? (3 * g->typical_charge + avg) / 4 : avg;
	}
	g->seen_charged = charged;
	g->seen_sent = sent;
	if (!up)
		return;
	slack = g->typical_charge;
	if (slack < g->cfg->kernel_slack)
		slack = g->cfg->kernel_slack;
	limit = (uint64_t)(g->cfg->balance * (double)work / up) + slack;
	/* With one backend up, a request over the bound could only go back to
	 * it through the controller: no bound (0), and the kernel keeps it.
	 * Measured (kvsplice-bench datapath, one backend, 32 KiB pipelined):
	 * 14% of the requests took that detour, each copied through the
	 * controller twice. --max-outstanding still holds. */
	if (up == 1)
		limit = 0;
	else if (!limit)
		limit = 1; /* (0 would mean none) */
	for (b = 0; b < g->nslots; b++)
		kvs_dp_set_work_limit(&g->dp, b, limit);
}

static void count_decision(struct gw *g, enum kvs_reason r)
{
	switch (r) {
	case KVS_R_PREFIX:
		g->ctl.decided_prefix++;
		break;
	case KVS_R_SPILL:
		g->ctl.decided_spill++;
		break;
	case KVS_R_SHARED:
		g->ctl.decided_shared++;
		break;
	case KVS_R_COLD:
		g->ctl.decided_cold++;
		break;
	default:
		break;
	}
}

/*
 * Routes that let the kernel take the next request sharing this prefix: its
 * cache key's, its hint's and every checkpoint's, in one system call. A
 * block's route is withdrawn when b's index evicts the block (marked); a
 * cache key is not a block: it stays until the LRU or a backend leaving
 * (route_gen) retires it.
 */
static void install_routes(struct gw *g, const struct kvs_msg *m, uint64_t seed,
			   const uint64_t *h, uint32_t n, uint32_t b)
{
	uint32_t hint = kvs_hint_blocks(m->prefix_len), depth[KVS_DP_MAX_ROUTE_BATCH], k = 0, j;
	uint64_t key[KVS_DP_MAX_ROUTE_BATCH];

	_Static_assert(KVS_MAX_CHECKPOINTS + 2 <= KVS_DP_MAX_ROUTE_BATCH, "routes per request");
	if (m->cache_key) {
		key[k] = kvs_key_hash(seed, m->cache_key);
		depth[k++] = 0;
	}
	if (hint && hint <= n) {
		key[k] = h[hint - 1];
		depth[k++] = hint;
	}
	for (j = 0; j < KVS_MAX_CHECKPOINTS && kvs_checkpoint(j) <= n; j++) {
		key[k] = h[kvs_checkpoint(j) - 1];
		depth[k++] = kvs_checkpoint(j);
	}
	g->ctl.routes_installed += kvs_dp_add_routes(&g->dp, key, depth, k, b);
	for (j = 0; j < k; j++)
		if (depth[j])
			kvs_policy_mark(&g->policy, b, key[j]);
}

/* Withdraws the routes queued by withdraw_route(), one system call. */
static void withdraw_flush(struct gw *g)
{
	g->ctl.routes_withdrawn += kvs_dp_del_routes(&g->dp, &g->withdraw);
	g->withdraw.n = 0;
}

/* b's index evicted a block that a route of ours names: the backend will
 * have evicted it too, so the kernel should stop sending its prefix there.
 * Queued, and withdrawn with the others of the same decision (or tick): one
 * decision evicts about as many routes as it installs. */
static void withdraw_route(void *ctx, uint32_t b, uint64_t hash)
{
	struct gw *g = ctx;

	if (g->withdraw.n == KVS_WITHDRAW_BATCH)
		withdraw_flush(g);
	g->withdraw.e[g->withdraw.n++] = (struct kvs_withdraw){ .hash = hash, .backend = b };
}

/*
 * What the kernel's routes say each backend holds of this prompt: the
 * deepest checkpoint routed to it. The kernel learns routes from requests
 * it serves alone, so this is how the controller hears of them.
 */
static void routed_depths(struct gw *g, const uint64_t *h, uint32_t n, uint32_t *known)
{
	struct kvs_route r;
	uint32_t j;

	memset(known, 0, sizeof(*known) * KVS_MAX_BACKENDS);
	for (j = 0; j < KVS_MAX_CHECKPOINTS; j++) {
		uint32_t cp = kvs_checkpoint(j);

		if (cp > n || cp > g->cfg->window_blocks)
			break;
		if (kvs_dp_get_route(&g->dp, h[cp - 1], &r) == 0 && kvs_dp_route_current(&g->dp, &r) &&
		    cp > known[r.backend])
			known[r.backend] = cp;
	}
}

static void decide_and_send(struct gw *g, struct gw_conn *c, struct kvs_msg *m,
			    const uint8_t *frame);
static void on_scrape(struct gw *g, struct gw_conn *c);
static void on_control(struct gw *g, struct gw_conn *c);

/* The slow path, timed for the decision-latency histogram. */
static void route_request(struct gw *g, struct gw_conn *c, struct kvs_msg *m,
			  const uint8_t *frame)
{
	uint64_t t0 = kvs_now_ns();

	decide_and_send(g, c, m, frame);
	kvs_decide_observe(&g->decide, (double)(kvs_now_ns() - t0) / 1e9);
}

void gw_refuse_busy_client(struct gw *g, struct gw_conn *c, uint64_t req_id)
{
	char msg[96];

	g->ctl.busy_client++;
	snprintf(msg, sizeof(msg), "kvsplice: %u requests of this connection in flight",
		 g->cfg->client_max_inflight);
	gw_send_error(g, c->cookie, req_id, KVS_E_BUSY, msg);
}

int gw_decide(struct gw *g, struct gw_conn *c, struct kvs_msg *m, const uint8_t *prompt,
	      bool kernel, uint32_t *backend)
{
	uint64_t seed = kvs_seed(m->model_id, m->cache_salt);
	uint32_t n, tokens = kvs_prompt_tokens(m->payload_len);
	uint32_t known[KVS_MAX_BACKENDS];
	uint64_t load[KVS_MAX_BACKENDS];
	uint8_t ok[KVS_MAX_BACKENDS];
	struct kvs_decision d;
	int why;

	n = (uint32_t)kvs_prefix_hashes(seed, prompt, m->payload_len, g->hashes,
					KVS_POLICY_MAX_BLOCKS);
	why = fleet_state(g, load, ok);
	/* The kernel's routes say what it learnt from requests it served
	 * alone; on the userspace path every request passes here and the
	 * index knows it all. When the kernel found no route for this one at
	 * all, looking again would cost up to 16 system calls for nothing. */
	if (kernel && m->gw_backend == KVS_GW_NO_ROUTE)
		memset(known, 0, sizeof(known));
	else if (kernel)
		routed_depths(g, g->hashes, n, known);
	kvs_policy_decide(&g->policy, g->hashes, n, placement_key(m, seed, g->hashes, n), tokens,
			  load, ok, kernel ? known : NULL, &d);
	withdraw_flush(g);
	if (d.backend < 0) {
		g->ctl.no_backend++;
		gw_send_error(g, c->cookie, m->req_id, why,
			      why == KVS_E_BUSY ? "kvsplice: every backend is at its limit"
						: "kvsplice: no backend is up");
		return -1;
	}
	count_decision(g, d.reason);
	/* The kernel hashes only the window: routes go at checkpoints in it. */
	if (kernel)
		install_routes(g, m, seed, g->hashes,
			       n < g->cfg->window_blocks ? n : g->cfg->window_blocks,
			       (uint32_t)d.backend);
	m->gw_backend = kvs_gw_pack((uint32_t)d.backend,
				    kvs_work_blocks(tokens, d.cached_blocks, m->max_tokens));
	m->gw_conn = c->cookie;
	*backend = (uint32_t)d.backend;
	pr_debug("event=decision conn=%llu req=%llu backend=%d reason=%s cached_blocks=%u "
		 "best_blocks=%u blocks=%u path=%s",
		 (unsigned long long)c->cookie, (unsigned long long)m->req_id, d.backend,
		 kvs_reason_name(d.reason), d.cached_blocks, d.best_blocks, n,
		 kernel ? "kernel" : "user");
	return 0;
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
		gw_send_error(g, c->cookie, m->req_id, KVS_E_BUSY, "kvsplice: controller queue full");
		return;
	}
	g->ctl.slow_frames++;
	g->ctl.slow_bytes += KVS_HDR_LEN + (uint64_t)m->payload_len;
	g->inject_queued++;
	note_sent(g, b);
	kick_send(g);
	publish_limits(g);
}

void gw_pong_payload(struct gw *g, uint8_t payload[sizeof(struct kvs_load)])
{
	struct kvs_load_info li = { .backend_id = UINT32_MAX };

	for (uint32_t b = 0; b < g->nslots; b++)
		li.running += (uint32_t)kvs_dp_outstanding(&g->dp, b);
	kvs_load_encode(&li, payload);
}

static void pong_client(struct gw *g, struct gw_conn *c, const struct kvs_msg *ping)
{
	uint8_t payload[sizeof(struct kvs_load)];
	struct kvs_msg m = { .type = KVS_T_PONG, .req_id = ping->req_id, .gw_conn = c->cookie };

	gw_pong_payload(g, payload);
	if (kvs_put_frame(out_buf(g), &m, payload, sizeof(payload)) == 0) {
		g->inject_queued++;
		kick_send(g);
	}
}

/* ---- health checks ------------------------------------------------------ */

/* A PING to backend b through the kernel (its pool slot 0): req_id names
 * the backend and the check, gw_conn 0 marks it as the controller's. */
static void ping_backend(struct gw *g, uint32_t b, uint64_t now)
{
	struct gw_backend *be = &g->be[b];
	struct kvs_msg m = {
		.type = KVS_T_PING,
		.req_id = (uint64_t)b << 32 | ++be->ping_seq,
		.gw_backend = kvs_gw_pack(b, 0),
	};

	if (kvs_put_frame(out_buf(g), &m, NULL, 0))
		return;
	g->inject_queued++;
	be->ping_sent_ns = now;
	kick_send(g);
}

static void on_pong(struct gw *g, const struct kvs_msg *m, const uint8_t *payload)
{
	uint32_t b = (uint32_t)(m->req_id >> 32);
	struct gw_backend *be;

	if (b >= g->nslots || !g->be[b].present)
		return;
	be = &g->be[b];
	if ((uint32_t)m->req_id != be->ping_seq || !be->ping_sent_ns)
		return; /* an answer to a check that was already given up */
	if (m->payload_len == sizeof(struct kvs_load)) {
		struct kvs_load_info li;

		kvs_load_decode(payload, &li);
		kvs_dp_set_report(&g->dp, b,
				  &(struct kvs_be_report){ .running = li.running,
							   .waiting = li.waiting,
							   .kv_used_blocks = li.kv_used_blocks,
							   .kv_total_blocks = li.kv_total_blocks,
							   .at_ns = kvs_now_ns() });
	}
	if (be->probation && be->up) {
		be->probation = false;
		be->backoff_ms = 0;
		publish_backend(g, b);
		pr_info("event=backend_readmitted backend=%s index=%u", be->name, b);
	}
	{
		/* The last report, as operators see it in the backends map. */
		const struct kvs_be_report *rep = &g->dp.backends[b].report;

		pr_debug("event=pong backend=%s rtt_us=%llu running=%u waiting=%u kv_used=%u/%u",
			 be->name, (unsigned long long)((kvs_now_ns() - be->ping_sent_ns) / 1000),
			 rep->running, rep->waiting, rep->kv_used_blocks, rep->kv_total_blocks);
	}
	be->ping_sent_ns = 0;
}


/* On the tick: check every backend that is up; eject one that has not
 * answered for three intervals (it may hang with its connections open). */
static void health_checks(struct gw *g, uint64_t now)
{
	uint64_t interval = (uint64_t)g->cfg->health_interval_ms * 1000000ull;
	uint32_t b;

	if (!interval || g->dp.in_memory) /* PINGs go through the kernel */
		return;
	for (b = 0; b < g->nslots; b++) {
		struct gw_backend *be = &g->be[b];
		char why[64];

		if (!be->present || !be->up) {
			be->ping_sent_ns = 0;
			continue;
		}
		if (be->ping_sent_ns && now - be->ping_sent_ns > 3 * interval) {
			g->ctl.health_failures++;
			snprintf(why, sizeof(why), "no PONG in %llu ms",
				 (unsigned long long)(3 * interval / 1000000));
			be->ping_sent_ns = 0;
			be->probation = true;
			gw_backend_down(g, b, why);
			continue;
		}
		if (!be->ping_sent_ns && now >= be->next_ping_ns) {
			ping_backend(g, b, now);
			be->next_ping_ns = now + interval;
		}
	}
}

/* ---- frames passed up by the kernel ---------------------------------- */

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
				return;
			}
			pr_warn("event=punt_frame_refused status=%s conn=%llu", kvs_status_name(-r),
				(unsigned long long)raw.gw_conn);
			c = kvs_idmap_get(&g->clients, raw.gw_conn);
			if (c && !c->closing && !c->close_at_ns)
				reject_client(g, c, raw.req_id, -r);
			kvs_buf_consume(&p->rx, KVS_HDR_LEN + (size_t)raw.payload_len);
			continue;
		}
		if (m.type == KVS_T_PONG && m.gw_conn == 0) { /* a health check's answer */
			on_pong(g, &m, frame + KVS_HDR_LEN);
			kvs_buf_consume(&p->rx, KVS_HDR_LEN + (size_t)m.payload_len);
			continue;
		}
		c = kvs_idmap_get(&g->clients, m.gw_conn);
		if (!c || c->closing || c->close_at_ns)
			; /* gone or being rejected: nothing to answer */
		else if (m.type == KVS_T_REQUEST)
			route_request(g, c, &m, frame);
		else if (m.type == KVS_T_PING)
			pong_client(g, c, &m);
		else if (m.type == KVS_T_ERROR)
			reject_client(g, c, m.req_id, m.status);
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

/* ---- backends ------------------------------------------------------------ */

struct fail_ctx {
	struct gw *g;
	const char *backend;
};

static void fail_request(void *ctx, uint64_t client, uint64_t req_id)
{
	struct fail_ctx *f = ctx;
	char msg[160];

	snprintf(msg, sizeof(msg), "kvsplice: backend %s failed while serving the request",
		 f->backend);
	gw_send_error(f->g, client, req_id, KVS_E_BACKEND_GONE, msg);
}

void gw_backend_down(struct gw *g, uint32_t b, const char *why)
{
	struct gw_backend *be = &g->be[b];
	bool was_up = be->up;
	uint32_t s;

	be->up = false;
	publish_backend(g, b);
	/* It comes back empty (or not at all): what it held is gone, and so
	 * are the routes that promised it. */
	kvs_policy_forget_backend(&g->policy, b);
	kvs_dp_withdraw_routes(&g->dp, b);
	for (s = 0; s < KVS_MAX_POOL; s++) {
		if (be->pool[s]) {
			gw_conn_close(g, be->pool[s]);
			be->pool[s] = NULL;
		}
	}
	gw_up_disconnect(g, b);
	if (was_up) {
		/* Every request it still owed an answer gets an ERROR now: a
		 * client must never wait on a backend that is gone. The
		 * kernel's records zero its counts, the userspace path's
		 * then go without touching them. */
		struct fail_ctx f = { .g = g, .backend = be->name };
		int n = kvs_dp_fail_inflight(&g->dp, b, fail_request, &f);

		n += gw_up_fail_backend(g, b, fail_request, &f);

		g->ctl.failed_inflight += (uint64_t)n;
		pr_warn("event=backend_down backend=%s reason=\"%s\" failed_requests=%d", be->name,
			why, n);
	}
	be->backoff_ms = be->backoff_ms ? be->backoff_ms * 2 : 100;
	if (be->backoff_ms > BACKOFF_MAX_MS)
		be->backoff_ms = BACKOFF_MAX_MS;
	be->retry_at_ns = kvs_now_ns() + be->backoff_ms * 1000000ull;
}

static int backend_connect(struct gw *g, uint32_t b)
{
	struct gw_backend *be = &g->be[b];
	uint32_t s;
	int fd, err;

	for (s = 0; !g->dp.in_memory && s < g->cfg->pool_size; s++) {
		struct gw_conn *c;

		fd = kvs_connect(&be->addr, CONNECT_TIMEOUT_MS);
		if (fd < 0) {
			err = fd;
			goto fail;
		}
		c = gw_conn_new(g, fd, KVS_ROLE_UPSTREAM);
		if (!c) {
			close(fd);
			err = -ENOMEM;
			goto fail;
		}
		be->pool[s] = c;
		err = conn_splice(g, c, kvs_upstream_key(b, s), b, s);
		if (err)
			goto fail;
	}
	/* The userspace path's own connections, while it takes clients
	 * (gw_set_datapath() makes them when it starts to). */
	if (g->user_path) {
		err = gw_up_connect(g, b);
		if (err)
			goto fail;
	}
	be->up = true;
	be->next_ping_ns = 0;
	publish_backend(g, b);
	if (be->probation) {
		/* Ejected by the health check: connections alone do not prove
		 * it works (a hung process still completes handshakes). It
		 * takes no request until it answers a PING (on_pong()). */
		pr_info("event=backend_probation backend=%s index=%u", be->name, b);
		return 0;
	}
	be->backoff_ms = 0;
	pr_info("event=backend_up backend=%s index=%u pool=%u", be->name, b, g->cfg->pool_size);
	return 0;
fail:
	g->ctl.upstream_failures++;
	gw_backend_down(g, b, strerror(-err));
	return err;
}

/* ---- backends added, drained, removed at run time ------------------------ */

int gw_backend_find(const struct gw *g, const char *name)
{
	for (uint32_t b = 0; b < g->nslots; b++)
		if (g->be[b].present && !strcmp(g->be[b].name, name))
			return (int)b;
	return -ENOENT;
}

/* The policy places cold prefixes among the backends present now. */
static int sync_ring(struct gw *g, uint32_t nslots)
{
	const char *names[KVS_MAX_BACKENDS];

	for (uint32_t b = 0; b < nslots; b++)
		names[b] = g->be[b].present ? g->be[b].name : NULL;
	return kvs_policy_set_backends(&g->policy, names, nslots);
}

/* Takes slot b for the backend at a (no connection yet). */
static void slot_fill(struct gw *g, uint32_t b, const struct kvs_addr *a)
{
	struct gw_backend *be = &g->be[b];
	struct kvs_endpoint ep;

	memset(be, 0, sizeof(*be));
	be->present = true;
	be->addr = *a;
	kvs_addr_str(a, be->name, sizeof(be->name));
	kvs_endpoint_of(&a->ss, &ep);
	kvs_dp_set_backend_addr(&g->dp, b, &ep);
}

int gw_backend_add(struct gw *g, const struct kvs_addr *a)
{
	char name[64];
	uint32_t b, n;
	int err;

	kvs_addr_str(a, name, sizeof(name));
	if (gw_backend_find(g, name) >= 0)
		return -EEXIST;
	for (b = 0; b < KVS_MAX_BACKENDS && g->be[b].present; b++)
		;
	if (b == KVS_MAX_BACKENDS)
		return -ENOSPC;
	n = b + 1 > g->nslots ? b + 1 : g->nslots;
	g->be[b].present = true;
	snprintf(g->be[b].name, sizeof(g->be[b].name), "%s", name);
	err = sync_ring(g, n);
	g->be[b].present = false;
	if (err)
		return err;
	slot_fill(g, b, a);
	g->nslots = n;
	pr_info("event=backend_added backend=%s index=%u", name, b);
	backend_connect(g, b);
	return (int)b;
}

void gw_backend_drain(struct gw *g, uint32_t b, bool on)
{
	struct gw_backend *be = &g->be[b];

	be->draining = on;
	if (!on)
		be->removing = false;
	publish_backend(g, b);
	pr_info("event=%s backend=%s index=%u outstanding=%llu",
		on ? "backend_draining" : "backend_undrained", be->name, b,
		(unsigned long long)kvs_dp_outstanding(&g->dp, b));
}

void gw_backend_remove(struct gw *g, uint32_t b)
{
	struct gw_backend *be = &g->be[b];

	if (be->removing)
		return;
	be->removing = true;
	be->remove_deadline_ns = kvs_now_ns() + g->cfg->drain_timeout_ms * 1000000ull;
	publish_backend(g, b);
	pr_info("event=backend_removing backend=%s index=%u outstanding=%llu timeout_ms=%u",
		be->name, b, (unsigned long long)kvs_dp_outstanding(&g->dp, b),
		g->cfg->drain_timeout_ms);
}

/* A removal completes (on the tick): nothing in flight there any more, or
 * the drain timeout passed and what is left is answered backend_gone. */
static void backend_removed(struct gw *g, uint32_t b)
{
	struct gw_backend *be = &g->be[b];
	char name[64];

	snprintf(name, sizeof(name), "%s", be->name);
	gw_backend_down(g, b, "removed by the operator");
	memset(be, 0, sizeof(*be));
	kvs_dp_clear_backend(&g->dp, b);
	kvs_policy_forget_backend(&g->policy, b);
	if (sync_ring(g, g->nslots))
		pr_warn("event=ring_rebuild_failed hint=\"cold prefixes may still go to %s\"", name);
	pr_info("event=backend_removed backend=%s index=%u", name, b);
}

int gw_backends_apply(struct gw *g, const struct kvs_addr *addrs, uint32_t n, uint32_t *added,
		      uint32_t *removed)
{
	char names[KVS_MAX_BACKENDS][64];
	uint32_t b, i;
	int err = 0, r;

	*added = *removed = 0;
	for (i = 0; i < n && i < KVS_MAX_BACKENDS; i++)
		kvs_addr_str(&addrs[i], names[i], sizeof(names[i]));
	for (b = 0; b < g->nslots; b++) {
		struct gw_backend *be = &g->be[b];
		bool listed = false;

		for (i = 0; be->present && i < n && !listed; i++)
			listed = !strcmp(be->name, names[i]);
		if (!be->present)
			continue;
		if (!listed && !be->removing) {
			gw_backend_remove(g, b);
			++*removed;
		} else if (listed && be->removing) {
			gw_backend_drain(g, b, false); /* listed again: keep it */
		}
	}
	for (i = 0; i < n; i++) {
		if (gw_backend_find(g, names[i]) >= 0)
			continue;
		r = gw_backend_add(g, &addrs[i]);
		if (r >= 0)
			++*added;
		else if (!err)
			err = r;
	}
	return err;
}

/* Settings a reload applies at once (the controller's own); the others
 * are the kernel's, the sockets' or the listeners' and need a restart. */
static void reload_settings(struct gw *g, const struct gw_config *n, char *msg, size_t len)
{
	struct gw_config *c = &g->live;
	size_t off = strlen(msg);
	char a[96], b[96];
	bool republish = c->max_outstanding != n->max_outstanding;

	c->max_outstanding = n->max_outstanding;
	c->health_interval_ms = n->health_interval_ms;
	c->balance = n->balance;
	c->kernel_slack = n->kernel_slack;
	c->drain_timeout_ms = n->drain_timeout_ms;
	c->frame_timeout_ms = n->frame_timeout_ms;
	g->policy.p.balance = n->balance;
	for (uint32_t i = 0; republish && i < g->nslots; i++)
		if (g->be[i].present)
			publish_backend(g, i);
#define RESTART_IF(cond, key)                                                                      \
	do {                                                                                       \
		if ((cond) && off < len) {                                                        \
			off += (size_t)snprintf(msg + off, len - off, " %s", key);               \
			pr_warn("event=reload_needs_restart key=%s", key);                         \
		}                                                                                  \
	} while (0)
	RESTART_IF(strcmp(kvs_addr_str(&c->listen, a, sizeof(a)), kvs_addr_str(&n->listen, b, sizeof(b))),
		   "listen");
	RESTART_IF(c->pool_size != n->pool_size, "pool");
	RESTART_IF(c->client_max_inflight != n->client_max_inflight, "max-client-inflight");
	RESTART_IF(c->max_payload != n->max_payload, "max-frame");
	RESTART_IF(c->window_blocks != n->window_blocks, "window-blocks");
	RESTART_IF(c->min_match_pct != n->min_match_pct, "min-match-pct");
	RESTART_IF(c->index_blocks != n->index_blocks, "backend-kv-blocks");
	RESTART_IF(c->release_prefill_early != n->release_prefill_early, "release-prefill");
	RESTART_IF(c->metrics_set != n->metrics_set ||
			   (n->metrics_set && strcmp(kvs_addr_str(&c->metrics, a, sizeof(a)),
						     kvs_addr_str(&n->metrics, b, sizeof(b)))),
		   "metrics");
	RESTART_IF(!c->adm.ifname != !n->adm.ifname ||
			   (n->adm.ifname && strcmp(c->adm.ifname, n->adm.ifname)) ||
			   c->adm.nallow != n->adm.nallow || c->adm.ndeny != n->adm.ndeny ||
			   c->adm.syn_rate != n->adm.syn_rate || c->adm.syn_burst != n->adm.syn_burst,
		   "xdp-iface/allow/deny/syn-rate/syn-burst");
#undef RESTART_IF
}

int gw_reload(struct gw *g, char *msg, size_t len)
{
	struct gw_config n;
	uint32_t added, removed;
	size_t off;
	int err;

	if (!g->hooks || !g->hooks->load || !g->cfg->config_path) {
		snprintf(msg, len, "started without --config FILE: nothing to reload");
		return -ENOENT;
	}
	err = g->hooks->load(g->hooks->ctx, &n, msg, len);
	if (err) {
		pr_warn("event=reload_failed config=%s err=\"%s\"", g->cfg->config_path, msg);
		return err;
	}
	err = gw_backends_apply(g, n.backends, n.nbackends, &added, &removed);
	off = (size_t)snprintf(msg, len, "reloaded %s: %u backends listed, %u added, %u removing",
			       g->cfg->config_path, n.nbackends, added, removed);
	if (err && off < len)
		off += (size_t)snprintf(msg + off, len - off, "; not all added: %s", strerror(-err));
	if (off < len) {
		snprintf(msg + off, len - off, "; unchanged until a restart:");
		reload_settings(g, &n, msg, len);
		if (!strcmp(msg + strlen(msg) - 1, ":"))
			msg[off] = '\0'; /* nothing needs one */
	}
	pr_info("event=reloaded config=%s backends=%u added=%u removing=%u", g->cfg->config_path,
		n.nbackends, added, removed);
	return err;
}

int gw_set_datapath(struct gw *g, bool user)
{
	int err = 0;

	if (!user && g->dp.in_memory)
		return -EOPNOTSUPP; /* BPF could not be loaded at start */
	if (user && !g->user_path) {
		for (uint32_t b = 0; b < g->nslots; b++) {
			if (!g->be[b].present || !g->be[b].up)
				continue;
			err = gw_up_connect(g, b);
			if (err) {
				gw_backend_down(g, b, strerror(-err)); /* retried, with both pools */
				err = 0;
			}
		}
	}
	if (user != g->user_path)
		pr_info("event=datapath_switched datapath=%s", user ? "user" : "kernel");
	g->user_path = user;
	return err;
}

/* ---- upgrades: a successor started from the program file ------------------ */

int gw_upgrade(struct gw *g, char *msg, size_t len)
{
	const struct gw_hooks *h = g->hooks;
	char **argv;
	pid_t pid;
	int i, k = 0;

	if (!g->exe[0] || !h || !h->argv) {
		snprintf(msg, len, "this controller does not know its program file");
		return -ENOENT;
	}
	if (g->dp.in_memory) {
		snprintf(msg, len, "running without BPF: a successor takes over through the "
			 "pinned maps, there are none; restart instead");
		return -EOPNOTSUPP;
	}
	if (g->upgrade_pid > 0 && g->upgrade_status < 0) {
		snprintf(msg, len, "an upgrade is under way (new controller pid %d)",
			 (int)g->upgrade_pid);
		return -EALREADY;
	}
	if (access(g->exe, X_OK)) {
		snprintf(msg, len, "%s: %s", g->exe, strerror(errno));
		return -errno;
	}
	argv = calloc((size_t)h->argc + 4, sizeof(*argv));
	if (!argv) {
		snprintf(msg, len, "out of memory");
		return -ENOMEM;
	}
	argv[k++] = g->exe;
	for (i = 1; i < h->argc; i++)
		if (strcmp(h->argv[i], "--takeover"))
			argv[k++] = h->argv[i];
	argv[k++] = (char *)"--takeover";
	argv[k++] = (char *)"--handover-socket";
	argv[k++] = g->ho_path;
	pid = fork();
	if (pid == 0) {
		/* Nothing of ours but stdio: it gets its sockets by hand-over. */
		close_range(3, ~0u, 0);
		execv(g->exe, argv);
		_exit(127);
	}
	free(argv);
	if (pid < 0) {
		snprintf(msg, len, "fork: %s", strerror(errno));
		return -errno;
	}
	g->upgrade_pid = pid;
	g->upgrade_status = -1;
	pr_info("event=upgrade_started pid=%d exe=%s", (int)pid, g->exe);
	snprintf(msg, len, "new controller pid %d started from %s; this one (pid %d) hands over and exits",
		 (int)pid, g->exe, (int)getpid());
	return pid;
}

/* A successor that exited: the upgrade failed, this controller carries on. */
static void reap_upgrade(struct gw *g)
{
	int st;

	if (g->upgrade_pid <= 0 || g->upgrade_status >= 0 ||
	    waitpid(g->upgrade_pid, &st, WNOHANG) != g->upgrade_pid)
		return;
	g->upgrade_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	pr_warn("event=upgrade_failed pid=%d status=%d action=\"carrying on\"", (int)g->upgrade_pid,
		g->upgrade_status);
}

/* ---- completions ---------------------------------------------------------- */

static struct gw_conn *conn_of(struct gw *g, uint64_t data)
{
	uint32_t id = (uint32_t)data, gen = (uint32_t)(data >> 32) & 0xffffff;
	struct gw_conn *c = id < g->conns_cap ? g->conns[id] : NULL;

	return c && (c->gen & 0xffffff) == gen ? c : NULL;
}


static void on_accept(struct gw *g, struct io_uring_cqe *cqe)
{
	struct gw_conn *c;
	int err;

	if (!(cqe->flags & IORING_CQE_F_MORE)) {
		/* Multishot ended (e.g. EMFILE): re-arm it, unless handing over. */
		struct io_uring_sqe *sqe = g->quiescing ? NULL : gw_get_sqe(g);

		g->accepting = false;
		if (sqe) {
			g->accepting = true;
			io_uring_prep_multishot_accept(sqe, g->listen_fd, NULL, NULL, SOCK_CLOEXEC);
			io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT, NULL));
		}
	}
	if (cqe->res == -ECANCELED) /* handing over */
		return;
	if (cqe->res < 0) {
		pr_warn("event=accept_failed err=\"%s\"", strerror(-cqe->res));
		return;
	}
	c = gw_conn_new(g, cqe->res, KVS_ROLE_CLIENT);
	if (!c) {
		close(cqe->res);
		return;
	}
	g->ctl.clients_accepted++;
	err = kvs_idmap_put(&g->clients, c->cookie, c);
	if (!err && g->user_path)
		err = gw_up_client(g, c);
	else if (!err)
		err = conn_splice(g, c, c->cookie, 0, 0);
	if (err == -EOPNOTSUPP) {
		/* The kernel splices only established sockets: this client
		 * closed or half-closed before it was accepted. Its request
		 * cannot be spliced; say so, on the socket directly. */
		g->ctl.clients_early_closed++;
		pr_debug("event=client_closed_before_accept conn=%llu",
			 (unsigned long long)c->cookie);
		answer_direct(c->fd, c->cookie, KVS_E_INTERNAL,
			      "kvsplice: connection shut down before the gateway accepted it; "
			      "half-close only after the answer has started");
		gw_conn_close(g, c);
		return;
	}
	if (err) {
		pr_warn("event=client_setup_failed conn=%llu err=\"%s\"",
			(unsigned long long)c->cookie, strerror(-err));
		gw_conn_close(g, c);
		return;
	}
	pr_debug("event=client_accepted conn=%llu fd=%d", (unsigned long long)c->cookie, c->fd);
}

/* A watched socket hung up or failed (or we shut it down to close it). */
static void on_hangup(struct gw *g, struct gw_conn *c, const char *why)
{
	uint32_t backend = c->backend;

	/* conn_close may free c: everything read from it is read first. */
	if (c->role == KVS_ROLE_UPSTREAM || c->role == ROLE_UP_USER) {
		g->ctl.upstream_failures++;
		if (c->role == KVS_ROLE_UPSTREAM)
			g->be[backend].pool[c->slot] = NULL;
		else
			g->be[backend].upool[c->slot] = NULL;
		gw_conn_close(g, c);
		gw_backend_down(g, backend, why);
	} else if (c->role == KVS_ROLE_CLIENT) {
		int err = 0;
		socklen_t len = sizeof(err);

		/* The strparser gave up on a frame (its backstop timer):
		 * still say why, on the socket itself. */
		if (!getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) && err == ETIMEDOUT) {
			g->ctl.frame_timeouts++;
			answer_direct(c->fd, c->cookie, KVS_E_TIMEOUT,
				      "kvsplice: frame not complete in time");
		}
		pr_debug("event=client_closed conn=%llu reason=\"%s\"",
			 (unsigned long long)c->cookie, why);
		gw_conn_close(g, c);
	} else {
		/* The inject or punt pair: the slow path is gone with it. */
		pr_warn("event=controller_socket_lost role=%u reason=\"%s\"", c->role, why);
		if (c == g->inject)
			g->inject = NULL;
		else if (c == g->punt)
			g->punt = NULL;
		else if (c == g->punt_k)
			g->punt_k = NULL;
		gw_conn_close(g, c);
	}
}

/*
 * A client shut down its sending side (FIN) but may still be reading: the
 * answers to what it sent are delivered, and the socket closed when none is
 * in flight (the kernel's count in conns), when the client resets, or at
 * the deadline, all checked on the tick. No poll watches it any more: a
 * poll would report the half-close again at once, for ever.
 */
static uint32_t client_inflight(struct gw *g, const struct gw_conn *c)
{
	return c->up ? gw_up_inflight(c) : kvs_dp_client_inflight(&g->dp, c->cookie);
}

static void on_client_half_close(struct gw *g, struct gw_conn *c)
{
	g->ctl.clients_half_closed++;
	c->half_closed = true;
	c->half_close_deadline_ns = kvs_now_ns() + HALF_CLOSE_MAX_MS * 1000000ull;
	pr_debug("event=client_half_closed conn=%llu inflight=%u", (unsigned long long)c->cookie,
		 client_inflight(g, c));
}

/* A half-closed client that reset or went away since: nothing can reach it. */
static bool client_gone(const struct gw_conn *c)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	return getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) || ti.tcpi_state == TCP_CLOSE;
}

static void on_poll(struct gw *g, struct gw_conn *c, int res)
{
	c->poll_pending = false;
	if (c->closing) {
		gw_conn_release(g, c);
		return;
	}
	if (c->role == KVS_ROLE_CLIENT && !c->half_closed && !c->close_at_ns && res > 0 &&
	    (res & POLLRDHUP) && !(res & (POLLERR | POLLHUP))) {
		on_client_half_close(g, c);
		return;
	}
	on_hangup(g, c, res < 0 ? strerror(-res) : (res & POLLERR) ? "error" : "eof");
}

static void on_recv(struct gw *g, struct gw_conn *c, int res)
{
	c->recv_pending = false;
	if (c->closing) {
		gw_conn_release(g, c);
		return;
	}
	if (res == -ECANCELED) /* handing over: the bytes stay in the socket */
		return;
	if (res == 0 && c->role == KVS_ROLE_CLIENT && c->up && gw_up_inflight(c)) {
		/* FIN on the userspace path: answers still owed go out first
		 * (the tick closes it once none is left, as on the kernel's). */
		on_client_half_close(g, c);
		return;
	}
	if (res <= 0) {
		on_hangup(g, c, res == 0 ? "eof" : strerror(-res));
		return;
	}
	kvs_buf_commit(&c->rx, (size_t)res);
	if (c->role == ROLE_METRICS) {
		on_scrape(g, c);
		return;
	}
	if (c->role == ROLE_CONTROL) {
		on_control(g, c);
		return;
	}
	c->in_handler = true; /* what it triggers may close it (a backend's death) */
	if (c->role == ROLE_PUNT_READER)
		punt_frames(g, c);
	else if (c->role == KVS_ROLE_CLIENT)
		gw_up_client_frames(g, c);
	else if (c->role == ROLE_UP_USER)
		gw_up_upstream_frames(g, c);
	else
		inject_frames(g, c);
	c->in_handler = false;
	if (c->closing) {
		gw_conn_release(g, c);
		return;
	}
	if (c->close_at_ns) /* rejected: read no more */
		return;
	if (gw_arm_recv(g, c)) {
		pr_warn("event=recv_arm_failed role=%u", c->role);
		on_hangup(g, c, "recv");
	}
}

static void arm_tick(struct gw *g)
{
	struct io_uring_sqe *sqe = gw_get_sqe(g);

	if (!sqe)
		return;
	io_uring_prep_timeout(sqe, &g->tick, 0, 0);
	io_uring_sqe_set_data64(sqe, ud(OP_TICK, NULL));
}

/* Correct each backend's index from what its ENDs reported since the last
 * tick (kvs_policy_feedback), and show the result in the backends map. */
static void feedback(struct gw *g)
{
	uint64_t pred, miss;
	uint32_t b, cap;

	for (b = 0; b < g->nslots; b++) {
		struct gw_backend *be = &g->be[b];

		if (!be->present)
			continue;
		kvs_dp_end_counters(&g->dp, b, &pred, &miss);
		if (pred - be->fb_predicted >= KVS_POLICY_FEEDBACK_MIN) {
			uint32_t before = kvs_policy_index_blocks(&g->policy, b);

			cap = kvs_policy_feedback(&g->policy, b, pred - be->fb_predicted,
						  miss - be->fb_mispredicted);
			if (cap != before)
				pr_debug("event=index_resized backend=%s blocks=%u", be->name, cap);
			be->fb_predicted = pred;
			be->fb_mispredicted = miss;
		}
		kvs_dp_set_index_blocks(&g->dp, b, kvs_policy_index_blocks(&g->policy, b));
	}
	withdraw_flush(g);
}

static void on_tick(struct gw *g)
{
	uint64_t now = kvs_now_ns();
	uint32_t i;

	feedback(g);
	health_checks(g, now);
	reap_upgrade(g);
	/* Frames the kernel never read (the inject socket failed) would keep
	 * the counts raised for ever: once it is gone, or has read none for
	 * INJECT_STALL_TICKS, the rest are taken as lost. Not sooner: a
	 * backend that does not read stalls the inject socket too (its frames
	 * wait in the kernel, charged to that socket), and those requests are
	 * its load until they reach it; a one-tick rule counted them out and
	 * let 73 requests through a limit of 64. */
	{
		struct kvs_stats k;

		if (kvs_read_kstats(g->dp.stats_fd, &k) == 0) {
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
	}
	/* Every quarter of the frame timeout (at most each second): a frame
	 * is answered between 1 and 1.25 timeouts after it began. */
	if (now >= g->next_partial_scan_ns) {
		uint64_t period = g->cfg->frame_timeout_ms * 250000ull;

		kvs_dp_stale_partials(&g->dp, now - g->cfg->frame_timeout_ms * 1000000ull,
				      on_stale_partial, g);
		gw_up_stale(g, now - g->cfg->frame_timeout_ms * 1000000ull);
		g->next_partial_scan_ns = now + (period < 1000000000ull ? period : 1000000000ull);
	}
	for (i = 0; i < g->nslots; i++) {
		if (!g->be[i].present)
			continue;
		if (g->be[i].removing && (kvs_dp_outstanding(&g->dp, i) == 0 || !g->be[i].up ||
					  now >= g->be[i].remove_deadline_ns))
			backend_removed(g, i);
		else if (!g->be[i].up && now >= g->be[i].retry_at_ns)
			backend_connect(g, i);
	}
	for (i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];

		if (!c || c->closing)
			continue;
		if (c->close_at_ns && now >= c->close_at_ns) {
			gw_conn_close(g, c);
		} else if (c->half_closed && !c->close_at_ns && client_gone(c)) {
			gw_conn_close(g, c);
		} else if (c->half_closed && !c->close_at_ns &&
			   (now >= c->half_close_deadline_ns ||
			    client_inflight(g, c) == 0)) {
			/* The last answer may still sit in the kernel's queue
			 * for the socket: give it the same grace as an error. */
			if (now >= c->half_close_deadline_ns)
				pr_info("event=half_close_timeout conn=%llu",
					(unsigned long long)c->cookie);
			c->close_at_ns = now + ERROR_GRACE_MS * 1000000ull;
		}
	}
	kick_send(g);
	gw_up_kick_all(g);
	publish_limits(g);
	arm_tick(g);
}

/* Counters reach the pinned map after every batch that changed them, so a
 * reader (kvsplicectl, a test) never sees a decision without its count. */
static void publish_ctl(struct gw *g)
{
	if (g->dp.in_memory)
		return; /* no map to publish to */
	if (!memcmp(&g->ctl, &g->ctl_published, sizeof(g->ctl)))
		return;
	if (kvs_dp_publish_ctl(&g->dp, &g->ctl) == 0)
		g->ctl_published = g->ctl;
}

/* ---- metrics (--metrics ADDR:PORT) ----------------------------------------- */

/* The metrics and control listeners: one request per connection. */
static int arm_service_accept(struct gw *g, uint64_t op)
{
	struct io_uring_sqe *sqe = gw_get_sqe(g);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_multishot_accept(sqe, op == OP_CONTROL_ACCEPT ? g->control_fd : g->metrics_fd,
				       NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, ud(op, NULL));
	return 0;
}

static void on_service_accept(struct gw *g, struct io_uring_cqe *cqe, uint64_t op)
{
	struct gw_conn *c;

	if (!(cqe->flags & IORING_CQE_F_MORE) && !g->quiescing && cqe->res != -ECANCELED &&
	    (op == OP_METRICS_ACCEPT || g->control_fd >= 0))
		arm_service_accept(g, op);
	if (cqe->res < 0)
		return;
	c = gw_conn_new(g, cqe->res, op == OP_CONTROL_ACCEPT ? ROLE_CONTROL : ROLE_METRICS);
	if (!c) {
		close(cqe->res);
		return;
	}
	c->close_at_ns = kvs_now_ns() + 2000000000ull; /* a client that sends nothing */
	if (gw_arm_recv(g, c))
		gw_conn_close(g, c);
}

/* Renders the exposition from the maps and the controller's counters. */
static char *render_metrics(struct gw *g, size_t *len)
{
	const char *names[KVS_MAX_BACKENDS];
	struct kvs_backend be[KVS_MAX_BACKENDS];
	struct kvs_xdp_stats x;
	struct kvs_stats k;
	struct kvs_metrics_in in = {
		.k = &k, .c = &g->ctl, .be = be, .names = names, .nbackends = g->nslots,
		.clients = g->clients.count, .decide = &g->decide,
	};
	size_t cap = 65536, need;
	char *buf;
	uint32_t b;

	if (kvs_read_kstats(g->dp.stats_fd, &k))
		memset(&k, 0, sizeof(k));
	for (b = 0; b < g->nslots; b++) {
		be[b] = g->dp.backends[b];
		names[b] = g->be[b].present ? g->be[b].name : NULL;
	}
	if (kvs_adm_stats(&g->adm, &x) == 0)
		in.x = &x;
	in.routes = kvs_dp_count_routes(&g->dp);
	buf = malloc(cap);
	if (!buf)
		return NULL;
	need = kvs_metrics_render(buf, cap, &in);
	if (need >= cap) {
		char *bigger = realloc(buf, need + 1);

		if (!bigger) {
			free(buf);
			return NULL;
		}
		buf = bigger;
		kvs_metrics_render(buf, need + 1, &in);
	}
	*len = need;
	return buf;
}

/* One scrape: answered once the request's head is in, then closed. */
static void on_scrape(struct gw *g, struct gw_conn *c)
{
	const char *req = (const char *)kvs_buf_head(&c->rx);
	char hdr[192];
	size_t blen = 0;
	char *body = NULL;
	int n;

	if (!memmem(req, c->rx.len, "\r\n\r\n", 4) && !memmem(req, c->rx.len, "\n\n", 2)) {
		if (c->rx.len > 8192 || gw_arm_recv(g, c))
			gw_conn_close(g, c);
		return;
	}
	if (c->rx.len >= 13 && !memcmp(req, "GET /metrics", 12) &&
	    (req[12] == ' ' || req[12] == '?'))
		body = render_metrics(g, &blen);
	if (body)
		n = snprintf(hdr, sizeof(hdr),
			     "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
			     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			     blen);
	else
		n = snprintf(hdr, sizeof(hdr),
			     "HTTP/1.1 404 Not Found\r\nContent-Length: 19\r\n"
			     "Connection: close\r\n\r\ntry GET /metrics\r\n");
	/* A fresh socket's buffer takes a scrape whole; a peer that does not
	 * read it gets what fitted. */
	(void)!send(c->fd, hdr, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (body)
		(void)!send(c->fd, body, blen, MSG_DONTWAIT | MSG_NOSIGNAL);
	free(body);
	gw_conn_close(g, c);
}

/* ---- the control socket (kvsplicectl; commands in gw_control.c) ----------- */

/* Only root, or the user the controller runs as, may change it. */
static bool peer_may_control(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) &&
	       (cr.uid == 0 || cr.uid == geteuid());
}

/* One command, answered once its line is in, then closed. */
static void on_control(struct gw *g, struct gw_conn *c)
{
	const char *nl = memchr(kvs_buf_head(&c->rx), '\n', c->rx.len);
	struct timeval tv = { .tv_sec = 1 };
	char line[1024], *reply = NULL;
	size_t rlen = 0, off = 0;
	FILE *out;

	if (!nl) {
		if (c->rx.len >= sizeof(line) || gw_arm_recv(g, c))
			gw_conn_close(g, c);
		return;
	}
	memcpy(line, kvs_buf_head(&c->rx), (size_t)(nl - (const char *)kvs_buf_head(&c->rx)));
	line[nl - (const char *)kvs_buf_head(&c->rx)] = '\0';
	out = open_memstream(&reply, &rlen);
	if (!out) {
		gw_conn_close(g, c);
		return;
	}
	if (peer_may_control(c->fd))
		gw_control_run(g, line, out);
	else
		fprintf(out, "error: only root or the controller's user may use this socket\n");
	fclose(out);
	/* A reply is small; a reader that stalls gets a second, then is cut. */
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (off < rlen) {
		ssize_t w = send(c->fd, reply + off, rlen - off, MSG_NOSIGNAL);

		if (w <= 0)
			break;
		off += (size_t)w;
	}
	free(reply);
	gw_conn_close(g, c);
}

/* Listens for kvsplicectl at --control-socket (default: by --pin-dir). */
static int open_control(struct gw *g)
{
	if (g->cfg->control_path)
		snprintf(g->control_path, sizeof(g->control_path), "%s", g->cfg->control_path);
	else
		kvs_run_path(g->cfg->pin_dir, KVS_CONTROL_SUFFIX, g->control_path,
			     sizeof(g->control_path));
	g->control_fd = gw_control_listen(g->control_path);
	if (g->control_fd < 0) {
		int err = g->control_fd;

		pr_warn("event=control_socket_failed path=%s err=\"%s\"%s", g->control_path,
			strerror(-err),
			err == -EADDRINUSE ? " hint=\"another kvspliced answers there: give each "
					     "its own --pin-dir or --control-socket\""
					   : "");
		return err;
	}
	return arm_service_accept(g, OP_CONTROL_ACCEPT);
}

static void close_control(struct gw *g)
{
	struct io_uring_sqe *sqe;

	if (g->control_fd < 0)
		return;
	sqe = gw_get_sqe(g);
	if (sqe) {
		io_uring_prep_cancel64(sqe, ud(OP_CONTROL_ACCEPT, NULL), 0);
		io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, NULL));
	}
	close(g->control_fd);
	g->control_fd = -1;
	unlink(g->control_path);
}

/* ---- hand-over to a new controller (upgrades) --------------------------- */

static void handle_cqe(struct gw *g, struct io_uring_cqe *cqe);

static int arm_handover(struct gw *g)
{
	struct io_uring_sqe *sqe;

	if (g->ho_fd < 0)
		return 0;
	sqe = gw_get_sqe(g);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, g->ho_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, ud(OP_HANDOVER, NULL));
	return 0;
}

/* Reaps completions until nothing can still read from a socket we hand
 * over or write into the inject socket behind our back: the accept and the
 * controller sockets' recvs cancelled, the last send done. */
static int quiesce(struct gw *g)
{
	struct io_uring_sqe *sqe;
	struct gw_conn *rd[2] = { g->punt, g->inject };
	uint64_t deadline = kvs_now_ns() + 5000000000ull;
	int i;

	g->quiescing = true;
	if (g->accepting && (sqe = gw_get_sqe(g))) {
		io_uring_prep_cancel64(sqe, ud(OP_ACCEPT, NULL), 0);
		io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, NULL));
	}
	for (i = 0; i < 2; i++) {
		if (rd[i] && rd[i]->recv_pending && (sqe = gw_get_sqe(g))) {
			io_uring_prep_cancel64(sqe, ud(OP_RECV, rd[i]), 0);
			io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, NULL));
		}
	}
	while (g->accepting || g->inject_q.pending || (g->punt && g->punt->recv_pending) ||
	       (g->inject && g->inject->recv_pending)) {
		struct __kernel_timespec ts = { .tv_nsec = 100000000 };
		struct io_uring_cqe *cqe;

		if (kvs_now_ns() > deadline)
			return -ETIMEDOUT;
		if (io_uring_submit_and_wait_timeout(&g->ring, &cqe, 1, &ts, NULL) < 0)
			continue;
		while (io_uring_peek_cqe(&g->ring, &cqe) == 0) {
			handle_cqe(g, cqe);
			io_uring_cqe_seen(&g->ring, cqe);
		}
	}
	/* What is still queued for the inject socket goes now, in order. */
	kvs_set_nonblock(g->inject_fd, 0);
	return gw_sendq_flush_sync(&g->inject_q, g->inject_fd);
}

static int send_bytes(int s, uint32_t which, const struct kvs_buf *b)
{
	size_t off = 0, room = KVS_HO_MSG_MAX - sizeof(struct kvs_ho_hdr) - 4;
	uint8_t *msg = malloc(KVS_HO_MSG_MAX);
	int err = msg ? 0 : -ENOMEM;

	while (!err && off < b->len) {
		size_t n = b->len - off < room ? b->len - off : room;
		struct kvs_ho_hdr h = { KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_BYTES, (uint32_t)n };

		memcpy(msg, &h, sizeof(h));
		memcpy(msg + sizeof(h), &which, 4);
		memcpy(msg + sizeof(h) + 4, kvs_buf_head(b) + off, n);
		err = kvs_ho_send(s, msg, sizeof(h) + 4 + n, NULL, 0);
		off += n;
	}
	free(msg);
	return err;
}

/* The sockets that go to the new controller (scrapes in progress do not). */
static bool handed(const struct gw_conn *c)
{
	/* The userspace path's connections are not handed over (their
	 * buffers and requests in flight live in this process): they close
	 * with it. docs/RUNBOOK.md says so. */
	return c && !c->closing && c->role != ROLE_METRICS && c->role != ROLE_CONTROL && !c->up;
}

/* The STATE message. */
struct kvs_ho_state {
	struct kvs_ho_hdr h;
	struct kvs_ctl_stats ctl;
	uint32_t nslots;
	/* KVS_HASH_VERSION of the sender; 0 from one built before the field
	 * (hash version 1) */
	uint32_t hash_version;
	struct kvs_ho_backend be[KVS_MAX_BACKENDS];
};

/* Everything the new controller needs, in the order it needs it. */
static int give_state(struct gw *g, int s)
{
	struct {
		struct kvs_ho_hdr h;
		struct kvs_ho_conn c[KVS_HO_BATCH];
	} batch;
	struct kvs_ho_state st;
	int fds[KVS_HO_BATCH], nf = 0, err;
	uint32_t i;

	memset(&st, 0, sizeof(st));
	st.h = (struct kvs_ho_hdr){ KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_STATE, 0 };
	st.ctl = g->ctl;
	st.nslots = g->nslots;
	st.hash_version = KVS_HASH_VERSION;

	for (i = 0; i < g->nslots; i++) {
		const struct gw_backend *be = &g->be[i];

		if (!be->present)
			continue;
		snprintf(st.be[i].name, sizeof(st.be[i].name), "%s", be->name);
		st.be[i].flags = KVS_HO_BE_PRESENT | (be->draining ? KVS_HO_BE_DRAINING : 0) |
				 (be->removing ? KVS_HO_BE_REMOVING : 0);
	}

	for (i = 0; i < g->conns_cap; i++)
		st.h.n += handed(g->conns[i]);
	/* the listening socket, the inject pair's writing end, --metrics' */
	st.h.n += 2 + (g->metrics_fd >= 0);
	err = kvs_ho_send(s, &st, sizeof(st), NULL, 0);
	batch.h = (struct kvs_ho_hdr){ KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_CONNS, 0 };
	for (i = 0; !err && i < g->conns_cap + 3; i++) {
		struct kvs_ho_conn *r = &batch.c[nf];
		struct gw_conn *c = i < g->conns_cap ? g->conns[i] : NULL;

		memset(r, 0, sizeof(*r));
		if (i == g->conns_cap) {
			r->role = KVS_HO_LISTEN;
			fds[nf] = g->listen_fd;
		} else if (i == g->conns_cap + 1) {
			r->role = KVS_HO_INJECT_WRITE;
			fds[nf] = g->inject_fd;
		} else if (i == g->conns_cap + 2 && g->metrics_fd >= 0) {
			r->role = KVS_HO_METRICS;
			fds[nf] = g->metrics_fd;
		} else if (i < g->conns_cap && handed(c)) {
			*r = (struct kvs_ho_conn){ .role = c->role, .backend = c->backend,
						   .slot = c->slot, .cookie = c->cookie, .key = c->key };
			r->flags = (c->in_map ? KVS_HO_IN_MAP : 0) |
				   (c->half_closed ? KVS_HO_HALF_CLOSED : 0);
			fds[nf] = c->fd;
		} else {
			r = NULL; /* nothing in this slot */
		}
		if (r)
			nf++;
		/* A full batch, or the last one (whatever the last slot held). */
		if (nf && (nf == KVS_HO_BATCH || i + 1 == g->conns_cap + 3)) {
			batch.h.n = (uint32_t)nf;
			err = kvs_ho_send(s, &batch, sizeof(batch.h) + sizeof(batch.c[0]) * (size_t)nf,
					  fds, nf);
			nf = 0;
		}
	}
	if (!err && g->punt)
		err = send_bytes(s, 0, &g->punt->rx);
	if (!err && g->inject)
		err = send_bytes(s, 1, &g->inject->rx);
	return err;
}

/*
 * A new controller connected: if it runs the same backends, hand it every
 * socket and let go of the pin directory, then wait for it to say it runs;
 * the loop then ends without closing a socket or touching a map. If it
 * never says so, carry on as before.
 */
static void give_over(struct gw *g, int s)
{
	struct kvs_ho_hdr hello, done = { KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_DONE, 0 }, ack;
	int fds[1], nf, err = 0;
	ssize_t n = kvs_ho_recv(s, &hello, sizeof(hello), fds, &nf, 0, 5000);

	if (n < (ssize_t)sizeof(hello) || hello.magic != KVS_HO_MAGIC ||
	    hello.type != KVS_HO_HELLO) {
		pr_warn("event=handover_refused reason=\"not a hand-over request\"");
		return;
	}
	if (hello.version != KVS_HO_VERSION || g->dp.in_memory) {
		struct kvs_ho_hdr no = { KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_STATE, UINT32_MAX };

		if (g->dp.in_memory)
			pr_warn("event=handover_refused reason=\"running without BPF: nothing "
				"pinned to hand over\"");
		else
			pr_warn("event=handover_refused reason=\"hand-over version %u, this one "
				"speaks %u\"",
				hello.version, KVS_HO_VERSION);
		kvs_ho_send(s, &no, sizeof(no), NULL, 0);
		return;
	}
	pr_info("event=handover_start conns=%u", g->conns_cap);
	err = quiesce(g);
	if (!err)
		err = give_state(g, s);
	if (!err) {
		kvs_adm_close(&g->adm); /* the new controller attaches its own */
		close_control(g);       /* and listens for kvsplicectl */
		kvs_dp_release_lock(&g->dp);
		err = kvs_ho_send(s, &done, sizeof(done), NULL, 0);
	}
	if (!err) {
		n = kvs_ho_recv(s, &ack, sizeof(ack), fds, &nf, 0, 20000);
		err = n == (ssize_t)sizeof(ack) && ack.type == KVS_HO_ACK ? 0 : -ECONNRESET;
	}
	if (!err) {
		struct ucred cr;
		socklen_t crlen = sizeof(cr);

		/* Under systemd, the successor is the service's process now
		 * (said before this one exits, which systemd would take for
		 * the service's end). */
		if (!getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &crlen))
			kvs_sd_notify("MAINPID=%d", (int)cr.pid);
		pr_info("event=handed_over slow_frames=%llu", (unsigned long long)g->ctl.slow_frames);
		g->handed_over = true;
		g->dp.handed_over = true;
		return;
	}
	/* The new one never took over: carry on. */
	pr_warn("event=handover_failed err=\"%s\" action=\"carrying on\"", strerror(-err));
	if (g->dp.lock_fd < 0 && kvs_dp_relock(&g->dp))
		pr_warn("event=relock_failed hint=\"another controller may run on this --pin-dir\"");
	if (g->cfg->adm.ifname && !g->adm.skel) {
		struct kvs_adm_opts ao = g->cfg->adm;

		ao.pin_dir = g->cfg->pin_dir;
		ao.port = (uint16_t)kvs_local_port(g->listen_fd);
		if (kvs_adm_open(&g->adm, &ao))
			pr_warn("event=xdp_reattach_failed");
	}
	g->quiescing = false;
	if (g->control_fd < 0 && open_control(g))
		pr_warn("event=control_socket_lost hint=\"kvsplicectl cannot reach this controller "
			"until it restarts\"");
	if (g->punt)
		gw_arm_recv(g, g->punt);
	if (g->inject)
		gw_arm_recv(g, g->inject);
	{
		struct io_uring_sqe *sqe = gw_get_sqe(g);

		if (sqe) {
			io_uring_prep_multishot_accept(sqe, g->listen_fd, NULL, NULL, SOCK_CLOEXEC);
			io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT, NULL));
			g->accepting = true;
		}
	}
	kvs_set_nonblock(g->inject_fd, 1);
}

/* What a controller taking over receives: every socket and its record. */
struct taken {
	struct kvs_ho_conn *recs;
	int *fds;
	uint32_t n, got;
	struct kvs_buf punt_rx, inject_rx;
	struct kvs_ctl_stats ctl;
	uint32_t nslots, hash_version;
	struct kvs_ho_backend be[KVS_MAX_BACKENDS];
};

static void taken_free(struct taken *t, bool close_fds)
{
	for (uint32_t i = 0; close_fds && i < t->got; i++)
		close(t->fds[i]);
	free(t->recs);
	free(t->fds);
	kvs_buf_free(&t->punt_rx);
	kvs_buf_free(&t->inject_rx);
}

/* Asks the controller at path for its sockets; returns the connected
 * hand-over socket (to send ACK on) or -errno. */
static int take_state(const char *path, struct taken *t)
{
	struct kvs_ho_hdr hello = { KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_HELLO, 0 };
	uint8_t *msg = malloc(KVS_HO_MSG_MAX);
	int s = kvs_ho_connect(path), err = 0, fds[KVS_HO_BATCH], nf;

	memset(t, 0, sizeof(*t));
	kvs_buf_init(&t->punt_rx, 0);
	kvs_buf_init(&t->inject_rx, 0);
	if (s < 0 || !msg) {
		err = s < 0 ? s : -ENOMEM;
		pr_warn("event=takeover_failed socket=%s err=\"%s\" hint=\"is a kvspliced "
			"running with --handover-socket %s?\"",
			path, strerror(-err), path);
		goto out;
	}
	err = kvs_ho_send(s, &hello, sizeof(hello), NULL, 0);
	while (!err) {
		struct kvs_ho_hdr h;
		ssize_t n = kvs_ho_recv(s, msg, KVS_HO_MSG_MAX, fds, &nf, KVS_HO_BATCH, 30000);

		if (n < (ssize_t)sizeof(h)) {
			err = n < 0 ? (int)n : -EPROTO;
			break;
		}
		memcpy(&h, msg, sizeof(h));
		if (h.magic != KVS_HO_MAGIC || h.version != KVS_HO_VERSION) {
			err = -EPROTO;
		} else if (h.type == KVS_HO_STATE) {
			struct kvs_ho_state st;

			if (h.n == UINT32_MAX || (size_t)n < sizeof(st)) {
				pr_warn("event=takeover_refused reason=\"the running controller "
					"speaks another hand-over version\"");
				err = -EPROTO;
				break;
			}
			memcpy(&st, msg, sizeof(st));
			t->ctl = st.ctl;
			t->hash_version = st.hash_version ? st.hash_version : 1;
			t->nslots = st.nslots < KVS_MAX_BACKENDS ? st.nslots : KVS_MAX_BACKENDS;
			memcpy(t->be, st.be, sizeof(t->be));
			t->n = h.n;
			t->recs = calloc(h.n, sizeof(*t->recs));
			t->fds = calloc(h.n, sizeof(*t->fds));
			if (!t->recs || !t->fds)
				err = -ENOMEM;
		} else if (h.type == KVS_HO_CONNS) {
			if (!t->recs || (uint32_t)nf != h.n || t->got + h.n > t->n) {
				for (int k = 0; k < nf; k++)
					close(fds[k]);
				err = -EPROTO;
				break;
			}
			memcpy(t->recs + t->got, msg + sizeof(h), sizeof(*t->recs) * h.n);
			memcpy(t->fds + t->got, fds, sizeof(int) * h.n);
			t->got += h.n;
		} else if (h.type == KVS_HO_BYTES) {
			uint32_t which;
			struct kvs_buf *rx;

			memcpy(&which, msg + sizeof(h), 4);
			rx = which ? &t->inject_rx : &t->punt_rx;
			err = kvs_buf_reserve(rx, h.n);
			if (!err) {
				memcpy(kvs_buf_tail(rx), msg + sizeof(h) + 4, h.n);
				kvs_buf_commit(rx, h.n);
			}
		} else if (h.type == KVS_HO_DONE) {
			break;
		} else {
			err = -EPROTO;
		}
	}
	if (!err && t->got != t->n)
		err = -EPROTO;
	if (err && s >= 0)
		pr_warn("event=takeover_failed socket=%s err=\"%s\" got=%u of %u sockets", path,
			strerror(-err), t->got, t->n);
out:
	free(msg);
	if (err) {
		if (s >= 0)
			close(s);
		taken_free(t, true);
		return err;
	}
	return s;
}

static int prefill(struct kvs_buf *rx, const struct kvs_buf *from)
{
	if (!from->len)
		return 0;
	if (kvs_buf_reserve(rx, from->len))
		return -ENOMEM;
	memcpy(kvs_buf_tail(rx), kvs_buf_head(from), from->len);
	kvs_buf_commit(rx, from->len);
	return 0;
}

/* Rebuilds the controller's view of the sockets it took over: they stay in
 * the maps as they are; only the controller's own bookkeeping is new. */
static int adopt(struct gw *g, struct taken *t)
{
	uint32_t i;

	for (i = 0; i < t->n; i++) {
		const struct kvs_ho_conn *r = &t->recs[i];
		struct gw_conn *c;

		if (r->role == KVS_HO_LISTEN) {
			g->listen_fd = t->fds[i];
			continue;
		}
		if (r->role == KVS_HO_INJECT_WRITE) {
			g->inject_fd = t->fds[i];
			kvs_set_nonblock(g->inject_fd, 1);
			continue;
		}
		if (r->role == KVS_HO_METRICS) {
			g->metrics_fd = t->fds[i];
			continue;
		}
		c = gw_conn_new(g, t->fds[i], r->role);
		if (!c)
			return -ENOMEM;
		c->key = r->key;
		c->backend = r->backend;
		c->slot = r->slot;
		c->in_map = r->flags & KVS_HO_IN_MAP;
		c->half_closed = r->flags & KVS_HO_HALF_CLOSED;
		if (c->half_closed)
			c->half_close_deadline_ns = kvs_now_ns() + HALF_CLOSE_MAX_MS * 1000000ull;
		switch (r->role) {
		case KVS_ROLE_CLIENT:
			if (kvs_idmap_put(&g->clients, c->cookie, c))
				return -ENOMEM;
			break;
		case KVS_ROLE_UPSTREAM:
			if (c->backend >= g->nslots || !g->be[c->backend].present ||
			    c->slot >= KVS_MAX_POOL)
				return -EPROTO;
			g->be[c->backend].pool[c->slot] = c;
			g->be[c->backend].up = true;
			break;
		case KVS_ROLE_INJECT:
			g->inject = c;
			if (prefill(&c->rx, &t->inject_rx))
				return -ENOMEM;
			break;
		case KVS_ROLE_PUNT:
			g->punt_k = c;
			break;
		case ROLE_PUNT_READER:
			g->punt = c;
			if (prefill(&c->rx, &t->punt_rx))
				return -ENOMEM;
			break;
		}
	}
	if (g->listen_fd < 0 || g->inject_fd < 0 || !g->inject || !g->punt || !g->punt_k)
		return -EPROTO;
	g->ctl = t->ctl;
	/* Routes keyed by another version's hashes would never match one
	 * again: only take room in the map. The slow path learns them anew. */
	if (t->hash_version != KVS_HASH_VERSION)
		pr_info("event=routes_flushed reason=\"prefix hash version %u, this one %u\" "
			"routes=%ld",
			t->hash_version, KVS_HASH_VERSION, kvs_routes_clear(g->dp.routes_fd));
	return 0;
}

/* Once the old controller has been told we run (and not before: until
 * then it may still carry on, and nothing may be read from or written to
 * the sockets we share): watch them as before - the controller's pairs
 * read, the rest polled for hang-ups (a half-closed client on the tick) -
 * and handle the frames the old one had read and not handled. */
static int start_adopted(struct gw *g)
{
	for (uint32_t i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];

		if (!c)
			continue;
		if (c->role == KVS_ROLE_INJECT || c->role == ROLE_PUNT_READER) {
			if (gw_arm_recv(g, c))
				return -EBUSY;
		} else if (!c->half_closed && arm_watch(g, c)) {
			return -EBUSY;
		}
	}
	punt_frames(g, g->punt);
	inject_frames(g, g->inject);
	return 0;
}

/* A controller wants to take over. The hand-over itself runs from the main
 * loop between batches of completions (run_handover()), never from inside
 * one: it reaps completions itself, and two readers of the completion
 * queue would each move its head. */
static void on_handover(struct gw *g, int res)
{
	int s;

	if (res > 0 && g->ho_pending < 0 &&
	    (s = accept4(g->ho_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		g->ho_pending = s;
	else
		arm_handover(g);
}

static void run_handover(struct gw *g)
{
	int s = g->ho_pending;

	g->ho_pending = -1;
	give_over(g, s);
	close(s);
	if (!g->handed_over)
		arm_handover(g);
}

static void handle_cqe(struct gw *g, struct io_uring_cqe *cqe)
{
	uint64_t data = io_uring_cqe_get_data64(cqe);
	struct gw_conn *c;

	switch (data >> 56) {
	case OP_ACCEPT:
		on_accept(g, cqe);
		break;
	case OP_RECV:
		c = conn_of(g, data);
		if (c)
			on_recv(g, c, cqe->res);
		break;
	case OP_POLL:
		c = conn_of(g, data);
		if (c)
			on_poll(g, c, cqe->res);
		break;
	case OP_SEND:
		on_send(g, cqe->res);
		break;
	case OP_CSEND:
		c = conn_of(g, data);
		if (c && c->up)
			gw_up_on_send(g, c, cqe->res);
		break;
	case OP_TICK:
		on_tick(g);
		break;
	case OP_HANDOVER:
		on_handover(g, cqe->res);
		break;
	case OP_METRICS_ACCEPT:
	case OP_CONTROL_ACCEPT:
		on_service_accept(g, cqe, data >> 56);
		break;
	}
}

/* ---- setup ------------------------------------------------------------------ */

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
static int setup_pairs(struct gw *g)
{
	int wfd, kfd, big = 4 << 20, err;

	err = loopback_pair(&wfd, &kfd);
	if (err)
		return err;
	setsockopt(wfd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	g->inject_fd = wfd;
	g->inject = gw_conn_new(g, kfd, KVS_ROLE_INJECT);
	if (!g->inject) {
		close(kfd);
		return -ENOMEM;
	}
	err = conn_splice(g, g->inject, g->inject->cookie, 0, 0);
	if (err)
		return err;

	err = loopback_pair(&kfd, &wfd);
	if (err)
		return err;
	g->punt_k = gw_conn_new(g, kfd, KVS_ROLE_PUNT);
	g->punt = gw_conn_new(g, wfd, ROLE_PUNT_READER);
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
		err = conn_splice(g, g->punt_k, KVS_PUNT_KEY, 0, 0);
	if (!err)
		err = gw_arm_recv(g, g->punt);
	return err;
}

static void gw_teardown(struct gw *g)
{
	uint32_t i;

	/* First the ring: no recv may still be writing into a buffer we free. */
	io_uring_queue_exit(&g->ring);
	for (i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];

		if (!c)
			continue;
		/* Handed over: the sockets and their map entries are the new
		 * controller's now; closing our descriptors leaves them be. */
		if (c->in_map && !g->handed_over)
			kvs_dp_del_sock(&g->dp, c->key, c->cookie);
		gw_conn_free(g, c);
	}
	free(g->conns);
	if (g->inject_fd >= 0)
		close(g->inject_fd);
	if (g->listen_fd >= 0)
		close(g->listen_fd);
	if (g->metrics_fd >= 0)
		close(g->metrics_fd);
	if (g->control_fd >= 0) { /* handed over: closed already, not ours */
		close(g->control_fd);
		unlink(g->control_path);
	}
	if (g->ho_pending >= 0)
		close(g->ho_pending);
	if (g->ho_fd >= 0) {
		close(g->ho_fd);
		if (!g->handed_over) /* else it is the new controller's now */
			unlink(g->ho_path);
	}
	gw_sendq_free(&g->inject_q);
	kvs_policy_free(&g->policy);
	kvs_idmap_free(&g->clients);
	free(g->unseen_q);
	free(g->hashes);
	kvs_adm_close(&g->adm);
	kvs_dp_close(&g->dp, !g->cfg->keep_pins);
}

/* The backend slots to start with: the running controller's when taking
 * over (its own list is applied once it runs), else the configured list. */
static int init_slots(struct gw *g, const struct taken *t)
{
	const char *names[KVS_MAX_BACKENDS];
	struct kvs_policy_params pp;
	struct kvs_addr a;
	uint32_t b;

	if (g->cfg->takeover) {
		g->nslots = t->nslots;
		for (b = 0; b < t->nslots; b++) {
			const struct kvs_ho_backend *r = &t->be[b];

			if (!(r->flags & KVS_HO_BE_PRESENT))
				continue;
			if (kvs_parse_addr(r->name, &a))
				return -EPROTO;
			slot_fill(g, b, &a);
			g->be[b].draining = r->flags & KVS_HO_BE_DRAINING;
			if (r->flags & KVS_HO_BE_REMOVING) {
				g->be[b].removing = true;
				g->be[b].remove_deadline_ns =
					kvs_now_ns() + g->cfg->drain_timeout_ms * 1000000ull;
			}
		}
	} else {
		g->nslots = g->cfg->nbackends;
		for (b = 0; b < g->cfg->nbackends; b++)
			slot_fill(g, b, &g->cfg->backends[b]);
	}
	if (!g->nslots)
		return -EINVAL;
	for (b = 0; b < g->nslots; b++)
		names[b] = g->be[b].present ? g->be[b].name : NULL;
	kvs_policy_defaults(&pp);
	pp.nbackends = g->nslots;
	pp.index_blocks = g->cfg->index_blocks;
	pp.balance = g->cfg->balance;
	pp.min_match_share = g->cfg->min_match_pct / 100.0;
	return kvs_policy_init(&g->policy, &pp, names);
}

int gw_run(const struct gw_config *cfg, const struct gw_hooks *hooks)
{
	struct kvs_dp_opts dpo = {
		.pin_dir = cfg->pin_dir,
		.max_payload = cfg->max_payload,
		.window_blocks = cfg->window_blocks,
		.min_match_pct = cfg->min_match_pct,
		.release_prefill_early = cfg->release_prefill_early,
		.client_max_inflight = cfg->client_max_inflight,
	};
	struct io_uring_sqe *sqe;
	struct gw g = { .live = *cfg, .hooks = hooks, .listen_fd = -1, .inject_fd = -1, .ho_fd = -1,
			.metrics_fd = -1, .control_fd = -1, .ho_pending = -1 };
	struct taken t = { 0 };
	char addr[96];
	uint32_t b;
	int err, ho_sock = -1;

	g.cfg = &g.live;
	g.started_ns = kvs_now_ns();
	g.user_path = cfg->user_path;
	if (cfg->handover_path)
		snprintf(g.ho_path, sizeof(g.ho_path), "%s", cfg->handover_path);
	else
		kvs_run_path(cfg->pin_dir, KVS_HANDOVER_SUFFIX, g.ho_path, sizeof(g.ho_path));
	if (readlink("/proc/self/exe", g.exe, sizeof(g.exe) - 1) < 0)
		g.exe[0] = '\0'; /* no upgrade by re-exec then */

	g.tick.tv_nsec = TICK_MS * 1000000ll;
	gw_sendq_init(&g.inject_q, OUT_LIMIT);
	g.hashes = calloc(KVS_POLICY_MAX_BLOCKS, sizeof(*g.hashes));
	if (!g.hashes)
		return -ENOMEM;
	err = io_uring_queue_init(1024, &g.ring, 0);
	if (err) {
		pr_warn("event=io_uring_init_failed err=\"%s\"", strerror(-err));
		free(g.hashes);
		return err;
	}
	if (cfg->takeover) {
		/* The sockets first: the running controller lets go of the pin
		 * directory once they are ours. */
		ho_sock = take_state(g.ho_path, &t);
		if (ho_sock < 0) {
			io_uring_queue_exit(&g.ring);
			free(g.hashes);
			return ho_sock;
		}
		dpo.takeover = true;
	}
	err = kvs_dp_open(&g.dp, &dpo);
	if (err && cfg->user_path && !cfg->takeover && !cfg->adm.ifname) {
		/* BPF not permitted here: the userspace path needs none. */
		pr_warn("event=bpf_unavailable err=\"%s\" datapath=user hint=\"no kernel "
			"splicing, no pinned maps (kvsplicectl status works, the map commands "
			"do not), no health checks\"",
			strerror(-err));
		err = kvs_dp_open_memory(&g.dp);
	}
	if (err) {
		if (ho_sock >= 0)
			close(ho_sock); /* the old controller carries on */
		taken_free(&t, true);
		io_uring_queue_exit(&g.ring);
		free(g.hashes);
		return err;
	}
	/* Frame numbers continue the kernel's count (a take-over's maps have
	 * one already), so that "read by the kernel" compares like with like. */
	{
		struct kvs_stats k;

		if (kvs_read_kstats(g.dp.stats_fd, &k) == 0)
			g.inject_queued = g.inject_seen_last_tick = k.inject_frames;
	}
	err = init_slots(&g, &t);
	if (err) {
		if (cfg->takeover) { /* the old controller carries on */
			close(ho_sock);
			taken_free(&t, true);
			g.handed_over = true;
			g.dp.handed_over = true;
		}
		goto out;
	}
	kvs_policy_on_evict(&g.policy, withdraw_route, &g);
	err = kvs_idmap_init(&g.clients, 1024);
	if (err)
		goto out;
	if (cfg->takeover) {
		struct kvs_ho_hdr ack = { KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_ACK, 0 };
		uint32_t n = t.n;

		err = adopt(&g, &t);
		taken_free(&t, false);
		if (err) {
			/* The old controller carries on: leave its sockets, map
			 * entries and pins alone on the way out. */
			pr_warn("event=takeover_failed err=\"%s\"", strerror(-err));
			close(ho_sock);
			g.handed_over = true;
			g.dp.handed_over = true;
			goto out;
		}
		err = kvs_ho_send(ho_sock, &ack, sizeof(ack), NULL, 0);
		close(ho_sock);
		if (!err)
			err = start_adopted(&g);
		if (err)
			goto out;
		pr_info("event=took_over sockets=%u clients=%u", n, g.clients.count);
		kvs_sd_notify("MAINPID=%d\nREADY=1", (int)getpid());
		/* The kernel's view of each backend, as this one sees it (a
		 * probation, say, is not carried over: the health check
		 * finds a backend that still does not answer). */
		for (b = 0; b < g.nslots; b++)
			if (g.be[b].present)
				publish_backend(&g, b);
		/* Then this one's own list, as a reload would: the old one's
		 * backends it does not list drain and go, new ones come. */
		{
			uint32_t added, removed;

			if (gw_backends_apply(&g, cfg->backends, cfg->nbackends, &added, &removed))
				pr_warn("event=backends_not_all_added");
			else if (added || removed)
				pr_info("event=backend_list_applied added=%u removing=%u", added,
					removed);
		}
	} else {
		/* The controller's paths into the kernel (none without BPF). */
		err = g.dp.in_memory ? 0 : setup_pairs(&g);
		if (err) {
			pr_warn("event=controller_sockets_failed err=\"%s\"", strerror(-err));
			goto out;
		}
		for (b = 0; b < g.nslots; b++)
			backend_connect(&g, b);

		g.listen_fd = kvs_listen(&cfg->listen, 1024);
		if (g.listen_fd < 0) {
			err = g.listen_fd;
			pr_warn("event=listen_failed addr=%s err=\"%s\"",
				kvs_addr_str(&cfg->listen, addr, sizeof(addr)), strerror(-err));
			goto out;
		}
	}
	sqe = gw_get_sqe(&g);
	io_uring_prep_multishot_accept(sqe, g.listen_fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT, NULL));
	g.accepting = true;
	arm_tick(&g);
	if (cfg->metrics_set && g.metrics_fd < 0) {
		g.metrics_fd = kvs_listen(&cfg->metrics, 16);
		if (g.metrics_fd < 0) {
			err = g.metrics_fd;
			pr_warn("event=metrics_listen_failed addr=%s err=\"%s\"",
				kvs_addr_str(&cfg->metrics, addr, sizeof(addr)), strerror(-err));
			goto out;
		}
		pr_info("event=metrics_listening addr=%s port=%d",
			kvs_addr_str(&cfg->metrics, addr, sizeof(addr)), kvs_local_port(g.metrics_fd));
	}
	if (g.metrics_fd >= 0 && arm_service_accept(&g, OP_METRICS_ACCEPT)) {
		err = -EBUSY;
		goto out;
	}
	err = kvs_mkdir_parent(g.ho_path);
	g.ho_fd = err ? err : kvs_ho_listen(g.ho_path);
	if (g.ho_fd < 0) {
		err = g.ho_fd;
		pr_warn("event=handover_socket_failed path=%s err=\"%s\"", g.ho_path, strerror(-err));
		goto out;
	}
	arm_handover(&g);
	if (cfg->adm.ifname) {
		struct kvs_adm_opts ao = cfg->adm;

		ao.pin_dir = cfg->pin_dir;
		ao.port = (uint16_t)kvs_local_port(g.listen_fd);
		err = kvs_adm_open(&g.adm, &ao);
		if (err)
			goto out;
	}
	err = open_control(&g);
	if (err)
		goto out;
	if (cfg->port_file)
		kvs_write_port_file(cfg->port_file, kvs_local_port(g.listen_fd));
	pr_info("event=listening addr=%s port=%d backends=%u control=%s",
		kvs_addr_str(&cfg->listen, addr, sizeof(addr)), kvs_local_port(g.listen_fd),
		g.nslots, g.control_path);
	kvs_sd_notify("READY=1");

	while (!*hooks->stop && !g.handed_over) {
		struct io_uring_cqe *cqe;
		unsigned int head, seen = 0;

		err = io_uring_submit_and_wait(&g.ring, 1);
		if (err < 0 && err != -EINTR) {
			pr_warn("event=io_uring_wait_failed err=\"%s\"", strerror(-err));
			goto out;
		}
		io_uring_for_each_cqe(&g.ring, head, cqe) {
			handle_cqe(&g, cqe);
			seen++;
		}
		io_uring_cq_advance(&g.ring, seen);
		if (g.ho_pending >= 0)
			run_handover(&g);
		if (hooks->reload && *hooks->reload) {
			char msg[512];

			*hooks->reload = 0;
			gw_reload(&g, msg, sizeof(msg));
		}
		if (hooks->upgrade && *hooks->upgrade) {
			char msg[512];

			*hooks->upgrade = 0;
			if (gw_upgrade(&g, msg, sizeof(msg)) < 0)
				pr_warn("event=upgrade_refused reason=\"%s\"", msg);
		}
		publish_ctl(&g);
	}
	err = 0;
	publish_ctl(&g);
	if (!g.handed_over)
		kvs_sd_notify("STOPPING=1");
	pr_info("event=stopping slow_frames=%llu clients=%llu",
		(unsigned long long)g.ctl.slow_frames, (unsigned long long)g.ctl.clients_accepted);
out:
	gw_teardown(&g);
	return err;
}
