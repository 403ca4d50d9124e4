// SPDX-License-Identifier: MIT
/*
 * Idle clients closed (--idle-timeout-ms): a client connection with no
 * request in flight, no frame begun and nothing received for that long is
 * told so (ERROR timeout, req_id 0) and closed, so that connections nobody
 * uses do not hold the gateway's descriptors for ever.
 *
 * On the kernel's data path the controller never reads a client: what it
 * knows of one is in the conns map, where the verdict counts the frames and
 * bytes it saw from the socket and the requests in flight, and the parser
 * marks a frame begun. Each period a scan reads the map in batches; a
 * client whose counts moved since the last scan, or with a request in
 * flight or a frame begun, was active then. On the userspace data path the
 * controller reads the client itself: each receive marks it active, and its
 * requests in flight are its own records.
 *
 * A client last seen active at one scan may have been active up to a
 * period later: it is closed once no scan has seen it active for the
 * timeout plus a period, so it was idle for at least the timeout and at
 * most that plus two periods. Half-closed clients wait for their answers
 * (conn.c); fronts (--front-source) are never closed as idle.
 */
#include "idle.h"

#include "conn.h"
#include "log.h"

#define PERIOD_MAX_NS 1000000000ull

struct scan {
	struct gw *g;
	uint64_t now;
};

/* A kernel-path client as the conns map has it now. */
static void saw_client(void *ctx, uint64_t cookie, const struct kvs_conn *kc)
{
	struct scan *s = ctx;
	struct gw_conn *c = kvs_idmap_get(&s->g->clients, cookie);

	if (!c || c->up)
		return;
	if (kc->frames != c->seen_frames || kc->bytes != c->seen_bytes || kc->inflight ||
	    kc->partial_since_ns) {
		c->seen_frames = kc->frames;
		c->seen_bytes = kc->bytes;
		c->active_ns = s->now;
	}
}

static void close_idle(struct gw *g, struct gw_conn *c, uint64_t now)
{
	char msg[96];

	g->ctl.clients_idle_closed++;
	snprintf(msg, sizeof(msg), "kvsplice: connection idle for %u ms: closed",
		 g->cfg->idle_timeout_ms);
	pr_debug("event=client_idle_closed conn=%llu", (unsigned long long)c->cookie);
	gw_send_notice(g, c->cookie, 0, KVS_E_TIMEOUT, msg);
	c->close_at_ns = now + ERROR_GRACE_MS * 1000000ull;
}

void gw_idle_tick(struct gw *g, uint64_t now)
{
	uint64_t period = g->cfg->idle_timeout_ms * 250000ull, limit;
	struct scan s = { g, now };
	bool kernel_seen;
	uint32_t closed = 0;

	if (!g->cfg->idle_timeout_ms || now < g->next_idle_scan_ns)
		return;
	if (period > PERIOD_MAX_NS)
		period = PERIOD_MAX_NS;
	g->next_idle_scan_ns = now + period;
	limit = g->cfg->idle_timeout_ms * 1000000ull + period;
	/* Without a read of the map this time, no kernel-path client is
	 * judged: one it did not show cannot be said to be idle. */
	kernel_seen = !g->dp.in_memory && kvs_dp_walk_clients(&g->dp, saw_client, &s) == 0;
	for (uint32_t i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];

		if (!c || c->role != KVS_ROLE_CLIENT || c->closing || c->close_at_ns ||
		    c->half_closed || c->front)
			continue;
		if (c->up && (c->partial_since_ns || c->ops->inflight(g, c)))
			c->active_ns = now;
		else if (!c->up && (!kernel_seen || !c->in_map))
			continue;
		if (now - c->active_ns < limit)
			continue;
		close_idle(g, c, now);
		closed++;
	}
	if (closed)
		pr_info("event=idle_clients_closed count=%u idle_timeout_ms=%u", closed,
			g->cfg->idle_timeout_ms);
}
