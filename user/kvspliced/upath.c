// SPDX-License-Identifier: MIT
/*
 * The userspace data path: the same gateway without BPF in the way of the
 * bytes. The controller reads each client's frames itself, routes every
 * request with the same policy (gw_decide), writes it to an upstream
 * connection of its own (not in the SOCKHASH), and copies the responses
 * back. It is the fallback where BPF is not permitted or misbehaves
 * (`--datapath user`, `kvsplicectl datapath user`), and the baseline the
 * kernel path is measured against.
 *
 * Its load counts go into the same backends map as the kernel's, so both
 * paths balance against one view of each backend; its requests in flight
 * are kept per client (at most --max-client-inflight each), which is what a
 * backend's death or a client's FIN consult.
 */
#include "upath.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "budget.h"
#include "codec.h"
#include "conn.h"
#include "decide.h"
#include "kvsplice/hash.h"
#include "log.h"
#include "loop.h"
#include "probe.h"
#include "sendq.h"

/* What a connection may have queued and not yet sent, per buffer (two): a
 * client that stops reading is cut off there (log:
 * event=user_path_client_overflow). The kernel path's bound is the
 * socket's buffer instead; this one is large because a client's answers
 * may be up to --max-client-inflight streams. */
#define UP_OUT_LIMIT (64u << 20)

static uint32_t up_inflight(const struct gw_conn *c)
{
	const struct gw_upath *up = c->up;

	if (!up)
		return 0;
	/* Answers received but not yet written out are still owed. */
	return up->nreqs + gw_sendq_busy(&up->q);
}

void gw_up_count(const struct gw *g, uint32_t *kernel, uint32_t *user)
{
	*kernel = *user = 0;
	for (uint32_t i = 0; i < g->conns_cap; i++) {
		const struct gw_conn *c = g->conns[i];

		if (c && !c->closing && c->role == KVS_ROLE_CLIENT)
			++*(c->up ? user : kernel);
	}
}

static void kick(struct gw *g, struct gw_conn *c)
{
	if (!c->closing)
		gw_sendq_kick(&g->ring, &c->up->q, c->fd, ud(OP_CSEND, c));
}

void gw_up_on_send(struct gw *g, struct io_uring_cqe *cqe)
{
	struct gw_conn *c = gw_conn_of(g, io_uring_cqe_get_data64(cqe));
	int res = cqe->res;

	if (!c || !c->up)
		return;
	if (c->closing) {
		c->up->q.pending = false;
		gw_conn_release(g, c);
		return;
	}
	if (gw_sendq_done(&g->ring, &c->up->q, c->fd, ud(OP_CSEND, c), res) < 0) {
		pr_debug("event=user_path_send_failed conn=%llu role=%u err=\"%s\"",
			 (unsigned long long)c->cookie, c->role, strerror(-res));
		if (c->role == ROLE_UP_USER)
			gw_backend_down(g, c->backend, strerror(-res));
		else
			gw_conn_close(g, c);
	}
}

/* Appends a frame for c's peer; queues the send. 0 or -ENOBUFS (the peer
 * does not read: its queue is at its limit). */
static int up_put(struct gw *g, struct gw_conn *c, const struct kvs_msg *m, const void *payload)
{
	struct kvs_msg copy = *m;
	int err = kvs_put_frame(gw_sendq_buf(&c->up->q), &copy, payload, m->payload_len);

	if (!err)
		kick(g, c);
	return err;
}

static int up_error(struct gw *g, struct gw_conn *c, uint64_t client, uint64_t req_id, int code,
		    const char *msg, bool notice)
{
	int err;

	(void)notice; /* (this path counts requests by their records) */
	err = kvs_put_error(gw_sendq_buf(&c->up->q), req_id, c->cookie, (uint16_t)code, msg);

	if (!err)
		kick(g, c);
	return err;
}

/* A whole frame as it came, to c. */
static int put_raw(struct gw *g, struct gw_conn *c, const uint8_t *frame, size_t len)
{
	int err = kvs_buf_append(gw_sendq_buf(&c->up->q), frame, len);

	if (!err)
		kick(g, c);
	return err;
}

/* In the conns map, for kvsplicectl conns (path 1: never the verdict's),
 * with the counts the verdict keeps for a kernel-path socket: kept in
 * c->up->shown as frames pass, written by show_counts on the tick. */
static void show_conn(struct gw *g, struct gw_conn *c)
{
	struct kvs_conn *kc = &c->up->shown;

	kc->path = 1;
	if (c->role == ROLE_UP_USER) {
		kc->role = KVS_ROLE_UPSTREAM;
		kc->by_role.backend = c->backend;
		kc->slot = c->slot;
	} else {
		kc->role = KVS_ROLE_CLIENT;
		kc->by_role.tenant = c->tenant;
		kc->limit = c->max_inflight;
		kc->ctl = c->budget;
	}
	kvs_sock_endpoints(c->fd, &kc->local, &kc->remote);
	c->in_conns = kvs_dp_add_conn(&g->dp, c->cookie, kc) == 0;
}

/* A frame of len bytes read from c, counted as the verdict counts it. */
static void count_frame(struct gw_conn *c, size_t len)
{
	c->up->shown.frames++;
	c->up->shown.bytes += len;
	c->up->shown_moved = true;
}

/* c's conns entry rewritten if its counts moved since the last time. */
static void show_counts(struct gw *g, struct gw_conn *c)
{
	struct gw_upath *up = c->up;

	if (!c->in_conns || !up->shown_moved)
		return;
	up->shown.inflight = up->nreqs;
	if (c->role == KVS_ROLE_CLIENT)
		up->shown.ctl = c->budget;
	up->shown_moved = false;
	kvs_dp_add_conn(&g->dp, c->cookie, &up->shown);
}

void gw_up_tick(struct gw *g)
{
	for (uint32_t i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];

		if (c && c->up && !c->closing) {
			kick(g, c);
			show_counts(g, c);
		}
	}
}

void gw_up_stale(struct gw *g, uint64_t since_ns)
{
	for (uint32_t i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];
		char msg[96];

		if (!c || !c->up || c->role != KVS_ROLE_CLIENT || c->closing || c->close_at_ns ||
		    !c->partial_since_ns || c->partial_since_ns >= since_ns)
			continue;
		g->ctl.frame_timeouts++;
		snprintf(msg, sizeof(msg), "kvsplice: frame not complete within %u ms",
			 g->cfg->frame_timeout_ms);
		pr_info("event=frame_timeout conn=%llu path=user", (unsigned long long)c->cookie);
		gw_send_notice(g, c->cookie, 0, KVS_E_TIMEOUT, msg);
		c->close_at_ns = kvs_now_ns() + ERROR_GRACE_MS * 1000000ull;
	}
}

static struct gw_ureq *find_req(struct gw_conn *c, uint64_t req_id, uint32_t b)
{
	for (uint32_t i = 0; i < c->up->nreqs; i++)
		if (c->up->reqs[i].req_id == req_id && c->up->reqs[i].backend == b)
			return &c->up->reqs[i];
	return NULL;
}

static void drop_req(struct gw_conn *c, struct gw_ureq *r)
{
	*r = c->up->reqs[--c->up->nreqs];
	c->up->shown_moved = true;
}

static int add_req(struct gw_conn *c, const struct gw_ureq *r)
{
	struct gw_upath *up = c->up;

	if (up->nreqs == up->capreqs) {
		uint32_t ncap = up->capreqs ? up->capreqs * 2 : 8;
		struct gw_ureq *n = realloc(up->reqs, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		up->reqs = n;
		up->capreqs = ncap;
	}
	up->reqs[up->nreqs++] = *r;
	up->shown_moved = true;
	return 0;
}

/* The upstream connection a client's requests to backend b take: always
 * the same one, so that they keep their order. */
static struct gw_conn *pick_upstream(struct gw *g, uint32_t b, uint64_t cookie)
{
	uint32_t n = g->cfg->pool_size, s = (uint32_t)(cookie % n);

	for (uint32_t i = 0; i < n; i++) {
		struct gw_conn *u = g->be[b].upool[(s + i) % n];

		if (u && !u->closing && !u->probing)
			return u;
	}
	return NULL;
}

static void route(struct gw *g, struct gw_conn *c, struct kvs_msg *m, const uint8_t *frame)
{
	const uint8_t *prompt = frame + KVS_HDR_LEN;
	uint64_t t0 = kvs_now_ns();
	struct gw_ureq r = { .req_id = m->req_id };
	struct gw_conn *u;
	uint32_t b, blocks;
	int err;

	if (gw_client_at_limit(g, c, c->up->nreqs)) {
		/* A busy answer is the controller's work too: budgeted. */
		int budget = gw_budget_take(g, c);

		if (budget == KVS_BUDGET_CLOSE)
			gw_budget_close(g, c, m->req_id, true);
		else if (budget == KVS_BUDGET_OVER)
			gw_budget_refuse(g, c, m->req_id);
		else
			gw_refuse_busy_client(g, c, m->req_id);
		return;
	}
	/* As the kernel's bind_tenant: the tenant's salt, whatever was sent;
	 * up_put encodes the header anew from m. */
	if (c->tenant)
		m->cache_salt = gw_tenant_salt(&g->tenants, c->tenant);
	if (gw_decide(g, c, m, prompt, false, &b))
		goto out;
	u = pick_upstream(g, b, c->cookie);
	if (!u) {
		g->ctl.no_backend++;
		gw_send_error(g, c->cookie, m->req_id, KVS_E_NO_BACKEND,
			      "kvsplice: backend connection unavailable");
		goto out;
	}
	blocks = kvs_gw_charge(m->gw_backend);
	r.backend = b;
	r.held_tokens = (uint64_t)blocks * KVS_BLOCK_TOKENS;
	r.out_tokens = kvs_charged_output(m->max_tokens, g->expect_output);
	if (g->cfg->release_prefill_early)
		r.prefill_tokens = kvs_prefill_charge(blocks, r.out_tokens);
	err = add_req(c, &r);
	if (!err) {
		err = up_put(g, u, m, prompt);
		if (err)
			c->up->nreqs--; /* the record just added: not sent after all */
	}
	if (err) {
		g->ctl.no_backend++;
		gw_send_error(g, c->cookie, m->req_id, KVS_E_BUSY, "kvsplice: backend queue full");
		goto out;
	}
	kvs_dp_user_sent(&g->dp, b, KVS_HDR_LEN + (uint64_t)m->payload_len, r.held_tokens);
	g->ctl.user_path_frames++;
	g->ctl.user_path_bytes += KVS_HDR_LEN + (uint64_t)m->payload_len;
out:
	kvs_decide_observe(&g->decide, (double)(kvs_now_ns() - t0) / 1e9);
}

/* A CANCEL for request r of client c, to its backend, on the upstream
 * connection its request took (so it follows it). 0 or -errno. */
static int send_cancel(struct gw *g, struct gw_conn *c, const struct gw_ureq *r)
{
	struct kvs_msg m = { .type = KVS_T_CANCEL,
			     .req_id = r->req_id,
			     .gw_backend = kvs_gw_pack(r->backend, 0),
			     .gw_conn = c->cookie };
	struct gw_conn *u = pick_upstream(g, r->backend, c->cookie);

	return u ? up_put(g, u, &m, NULL) : -ENOTCONN;
}

/* A client's CANCEL: to the backend of its request, if it is in flight;
 * otherwise (unknown, or ended) dropped, as the kernel does. The record
 * stays until the backend's ERROR cancelled (or END) passes back. */
static void client_cancel(struct gw *g, struct gw_conn *c, const struct kvs_msg *m)
{
	for (uint32_t i = 0; i < c->up->nreqs; i++) {
		if (c->up->reqs[i].req_id == m->req_id) {
			if (send_cancel(g, c, &c->up->reqs[i]) == 0) {
				g->ctl.user_path_cancels++;
				return;
			}
			break;
		}
	}
	g->ctl.user_cancels_dropped++;
}

/* A client of this path leaves (closed, reset, or closed by the gateway)
 * with requests in flight: each is cancelled at its backend. Their answers
 * still come (the ERROR cancelled at least), and are dropped as any answer
 * for a client that has gone. */
static void client_closing(struct gw *g, struct gw_conn *c)
{
	for (uint32_t i = 0; c->up && i < c->up->nreqs; i++)
		if (send_cancel(g, c, &c->up->reqs[i]) == 0)
			g->ctl.cancels_sent++;
}

static void pong(struct gw *g, struct gw_conn *c, const struct kvs_msg *ping)
{
	uint8_t payload[sizeof(struct kvs_load)];
	struct kvs_msg m = { .type = KVS_T_PONG,
			     .req_id = ping->req_id,
			     .cache_key = ping->cache_key, /* what it asked about */
			     .gw_conn = c->cookie,
			     .payload_len = sizeof(payload) };

	gw_pong_payload(g, ping->cache_key, payload);
	up_put(g, c, &m, payload);
}

static void client_frames(struct gw *g, struct gw_conn *c)
{
	const uint8_t *frame;
	struct kvs_msg m = { 0 };
	bool progress = false, counted = false;
	int r = 0;

	while (!c->close_at_ns &&
	       (r = kvs_next_frame(&c->rx, g->cfg->max_payload, &m, &frame)) > 0) {
		count_frame(c, KVS_HDR_LEN + (size_t)m.payload_len);
		if (m.type == KVS_T_REQUEST) {
			route(g, c, &m, frame);
		} else if (m.type == KVS_T_PING || m.type == KVS_T_CANCEL) {
			/* Over its budget: dropped, as the verdict does. */
			int budget = gw_budget_take(g, c);

			if (budget == KVS_BUDGET_CLOSE)
				gw_budget_close(g, c, m.req_id, false);
			else if (budget == KVS_BUDGET_OVER)
				g->ctl.budget_dropped++;
			else if (m.type == KVS_T_PING)
				pong(g, c, &m);
			else
				client_cancel(g, c, &m);
		} else {
			r = -KVS_E_BAD_TYPE;
			counted = true; /* a whole frame, counted above */
			break;
		}
		kvs_buf_consume(&c->rx, KVS_HDR_LEN + (size_t)m.payload_len);
		progress = true;
	}
	/* A frame begun and not finished: the tick times it out, counting
	 * from when the unfinished frame began (this read, if one ended). */
	if (!c->rx.len)
		c->partial_since_ns = 0;
	else if (progress || !c->partial_since_ns)
		c->partial_since_ns = kvs_now_ns();
	if (r < 0 && !c->close_at_ns) {
		/* The stream cannot be resynchronised: say why, then close. */
		char msg[96];

		g->ctl.bad_frames++;
		snprintf(msg, sizeof(msg), "kvsplice: %s", kvs_status_name(-r));
		gw_send_notice(g, c->cookie, m.req_id, -r, msg);
		c->close_at_ns = kvs_now_ns() + ERROR_GRACE_MS * 1000000ull;
		if (!counted) /* a bad header: what is left, as the verdict counts it */
			count_frame(c, c->rx.len);
		kvs_buf_consume(&c->rx, c->rx.len);
	}
}

/* An END's report, as the kernel's account_end() reads it (rec: the
 * request's record, NULL if it is gone). */
static void end_report(struct gw *g, uint32_t b, const struct kvs_msg *m, const uint8_t *payload,
		       const struct gw_ureq *rec)
{
	struct kvs_end_info e;
	uint64_t pred_uncached, pred, charged_out;

	kvs_end_decode(payload, &e);
	charged_out = rec ? rec->out_tokens : e.output_tokens;
	pred_uncached = (uint64_t)kvs_gw_charge(m->gw_backend) * KVS_BLOCK_TOKENS;
	pred_uncached = pred_uncached > charged_out ? pred_uncached - charged_out : 0;
	pred = e.prompt_tokens > pred_uncached ? e.prompt_tokens - pred_uncached : 0;
	/* the controller decides every request of this path: its index
	 * predicts as deep as it hashes */
	kvs_dp_user_end_report(&g->dp, b, &e, pred,
			       (uint64_t)KVS_POLICY_MAX_BLOCKS * KVS_BLOCK_TOKENS);
}

static void upstream_frames(struct gw *g, struct gw_conn *u)
{
	uint32_t b = u->backend;
	const uint8_t *frame;
	struct kvs_msg m;
	int r;

	while ((r = kvs_next_frame(&u->rx, g->cfg->max_payload, &m, &frame)) > 0) {
		size_t len = KVS_HDR_LEN + (size_t)m.payload_len;
		bool ends = m.type == KVS_T_END || m.type == KVS_T_ERROR;
		struct gw_conn *c;
		struct gw_ureq *rec = NULL;
		uint64_t release = 0;

		count_frame(u, len);
		if (m.type != KVS_T_CHUNK && !ends) {
			g->ctl.bad_frames++; /* a backend speaking out of turn */
			kvs_buf_consume(&u->rx, len);
			continue;
		}
		c = kvs_idmap_get(&g->clients, m.gw_conn);
		if (c && c->up)
			rec = find_req(c, m.req_id, b);
		if (m.type == KVS_T_CHUNK && rec && rec->prefill_tokens) {
			kvs_dp_user_release(&g->dp, b, rec->prefill_tokens);
			rec->held_tokens -= rec->prefill_tokens < rec->held_tokens ?
						    rec->prefill_tokens :
						    rec->held_tokens;
			rec->prefill_tokens = 0;
		}
		if (ends)
			release = rec ? rec->held_tokens :
					(uint64_t)kvs_gw_charge(m.gw_backend) * KVS_BLOCK_TOKENS;
		kvs_dp_user_response(&g->dp, b, len, ends, release);
		if (m.type == KVS_T_END && m.payload_len >= sizeof(struct kvs_end))
			end_report(g, b, &m, frame + KVS_HDR_LEN, rec);
		if (ends && rec)
			drop_req(c, rec);
		if (!c || !c->up || c->closing || c->lingering)
			g->ctl.user_path_no_client++;
		else if (put_raw(g, c, frame, len)) {
			/* It does not read: no queue grows without bound. */
			pr_info("event=user_path_client_overflow conn=%llu",
				(unsigned long long)c->cookie);
			gw_conn_close(g, c);
		}
		kvs_buf_consume(&u->rx, len);
	}
	if (r < 0) {
		kvs_buf_consume(&u->rx, u->rx.len);
		gw_backend_down(g, b, "malformed frame on the userspace path");
	}
}

/* A user-path client's FIN with answers still owed: they go out first
 * (the tick closes it once none is left, as on the kernel's path). */
static bool client_fin(struct gw *g, struct gw_conn *c)
{
	if (!up_inflight(c))
		return false;
	gw_conn_half_close(g, c);
	return true;
}

static uint32_t client_inflight(struct gw *g, const struct gw_conn *c)
{
	return up_inflight(c);
}

/* One of the userspace path's upstream connections failed: its backend is
 * down. */
static void upstream_lost(struct gw *g, struct gw_conn *u, const char *why)
{
	uint32_t backend = u->backend; /* gw_conn_close may free u */

	g->ctl.upstream_failures++;
	g->be[backend].upool[u->slot] = NULL;
	gw_conn_close(g, u);
	gw_backend_down(g, backend, why);
}

static const struct gw_conn_ops client_ops = {
	.on_bytes = client_frames,
	.on_hangup = gw_client_lost,
	.on_fin = client_fin,
	.inflight = client_inflight,
	.on_close = client_closing,
};
static const struct gw_conn_ops upstream_ops = {
	.on_bytes = upstream_frames,
	.on_hangup = upstream_lost,
};

int gw_up_client(struct gw *g, struct gw_conn *c)
{
	int err = gw_conn_attach_upath(c, UP_OUT_LIMIT);

	if (err)
		return err;
	c->ops = &client_ops;
	kvs_set_nodelay(c->fd);
	show_conn(g, c);
	return gw_arm_recv(g, c);
}

/* One of this path's connections answered its probe (or did not): read
 * as a backend's from then on; either way its backend hears of it. */
static void up_probed(struct gw *g, struct gw_conn *u, int err, const char *why)
{
	uint32_t b = u->backend;

	gw_backend_instance(g, b, u->probe_instance, u->probe_known);
	gw_backend_capacity(g, b, u->probe_kv_blocks);
	if (!err) {
		u->ops = &upstream_ops;
		show_conn(g, u);
		err = gw_arm_recv(g, u);
		if (err)
			why = "its connection could not be read";
	}
	gw_backend_probed(g, b, err, why);
}

/* Backend b's connections for this path, each probed with a PING before
 * it takes requests (up_probed). */
static int up_connect(struct gw *g, uint32_t b)
{
	struct gw_backend *be = &g->be[b];

	for (uint32_t s = 0; s < g->cfg->pool_size; s++) {
		struct gw_conn *u;
		bool connecting;
		int fd, err;

		if (be->upool[s])
			continue;
		fd = kvs_connect_start(&be->addr, &connecting);
		if (fd < 0)
			return fd;
		u = gw_conn_new(g, fd, ROLE_UP_USER, &upstream_ops);
		if (!u) {
			close(fd);
			return -ENOMEM;
		}
		u->backend = b;
		u->slot = s;
		err = gw_conn_attach_upath(u, UP_OUT_LIMIT);
		be->upool[s] = u;
		kvs_set_nodelay(fd);
		if (!err)
			err = gw_probe_start(g, u, up_probed, connecting);
		if (err)
			return err;
		be->probing++;
	}
	return 0;
}

static void up_disconnect(struct gw *g, uint32_t b)
{
	for (uint32_t s = 0; s < KVS_MAX_POOL; s++) {
		if (g->be[b].upool[s]) {
			gw_conn_close(g, g->be[b].upool[s]);
			g->be[b].upool[s] = NULL;
		}
	}
}

static int up_fail_backend(struct gw *g, uint32_t b,
			   void (*fail)(void *ctx, uint64_t client, uint64_t req_id), void *ctx)
{
	int n = 0;

	for (uint32_t i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];

		if (!c || !c->up || c->role != KVS_ROLE_CLIENT)
			continue;
		for (uint32_t k = 0; k < c->up->nreqs;) {
			struct gw_ureq *r = &c->up->reqs[k];

			if (r->backend != b) {
				k++;
				continue;
			}
			fail(ctx, c->cookie, r->req_id);
			drop_req(c, r); /* the last one moved here: look at k again */
			n++;
		}
	}
	return n;
}

const struct gw_path_ops gw_upath_ops = {
	.send_error = up_error,
	.connect = up_connect,
	.disconnect = up_disconnect,
	.fail_backend = up_fail_backend,
};
int gw_set_datapath(struct gw *g, bool user)
{
	int err = 0;

	if (!user && g->dp.in_memory)
		return -EOPNOTSUPP; /* BPF could not be loaded at start */
	if (user && !g->user_path) {
		for (uint32_t b = 0; b < g->nslots; b++) {
			if (!g->be[b].present || !g->be[b].up)
				continue;
			err = up_connect(g, b);
			if (err) {
				gw_backend_down(g, b,
						strerror(-err)); /* retried, with both pools */
				err = 0;
			}
		}
		/* Their probes, answered before the switch returns (a healthy
		 * backend answers in well under GW_PROBE_WAIT_MS). */
		gw_probe_settle(g, -1, GW_PROBE_WAIT_MS);
	}
	if (user != g->user_path)
		pr_info("event=datapath_switched datapath=%s", user ? "user" : "kernel");
	g->user_path = user;
	return err;
}
