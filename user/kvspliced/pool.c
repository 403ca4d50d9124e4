// SPDX-License-Identifier: MIT
/*
 * The kernel path's pool per backend, brought to --pool while it serves.
 * The kernel sends a client's requests (and CANCELs) to slot
 * client % pool_size of the backends map: a slot it may pick must be in
 * the SOCKHASH, or the request is answered no_backend. So a larger pool is
 * published only once its new slots are connected, probed and spliced; a
 * smaller one is published at once, and the connections above it stay
 * (their answers still flow back through the kernel) until every request
 * the backend had in flight when they stopped taking new ones has ended.
 */
#include "pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "conn.h"
#include "kpath.h"
#include "log.h"
#include "probe.h"

#define POOL_RETRY_MS 1000

void gw_pool_adopted(struct gw *g)
{
	for (uint32_t b = 0; b < g->nslots; b++) {
		struct gw_backend *be = &g->be[b];
		uint32_t n = g->dp.backends[b].pool_size, s;

		if (!be->present)
			continue;
		if (n > KVS_MAX_POOL)
			n = KVS_MAX_POOL;
		/* A slot the kernel may pick but that was not handed over (the
		 * old controller was opening it) is left out until it is. */
		for (s = 0; s < n && be->pool[s]; s++)
			;
		be->pool_n = s;
		if (!s && be->up) { /* connections, none the kernel uses: anew */
			g->kpath->disconnect(g, b);
			be->up = false;
		}
		if (s != g->cfg->pool_size)
			pr_info("event=pool_adopted backend=%s index=%u pool=%u configured=%u",
				be->name, b, s, g->cfg->pool_size);
	}
}

/* A new slot's connection answered its probe (or did not). Published with
 * the rest once every new slot is in (gw_pool_tick); a failure costs that
 * connection only, tried again a little later. */
static void grow_probed(struct gw *g, struct gw_conn *c, int err, const char *why)
{
	uint32_t b = c->backend, s = c->slot;
	struct gw_backend *be = &g->be[b];

	gw_backend_instance(g, b, c->probe_instance, c->probe_known);
	gw_backend_capacity(g, b, c->probe_kv_blocks);
	if (!err) {
		c->ops = gw_kpath_conn_ops(KVS_ROLE_UPSTREAM);
		err = gw_conn_splice(g, c, kvs_upstream_key(b, s), b, s);
		if (err)
			why = "its connection could not be spliced";
	}
	if (!err) {
		be->pool_said_failed = false;
		return;
	}
	if (!be->pool_said_failed)
		pr_warn("event=pool_slot_failed backend=%s index=%u slot=%u reason=\"%s\" "
			"action=\"serving with pool %u; retried\"",
			be->name, b, s, why, be->pool_n);
	be->pool_said_failed = true;
	be->pool[s] = NULL;
	be->pool_retry_ns = kvs_now_ns() + POOL_RETRY_MS * 1000000ull;
	gw_conn_close(g, c);
}

/* Slots pool_n..want-1 opened (those not open yet), and published once
 * all of them are spliced. */
static void grow(struct gw *g, uint32_t b, uint32_t want, uint64_t now)
{
	struct gw_backend *be = &g->be[b];
	bool ready = true;

	for (uint32_t s = be->pool_n; s < want; s++) {
		struct gw_conn *c = be->pool[s];
		int err;

		if (c) {
			ready = ready && c->in_map && !c->probing;
			continue;
		}
		ready = false;
		if (now < be->pool_retry_ns)
			continue;
		err = gw_kpath_dial_slot(g, b, s, grow_probed);
		if (err) {
			if (!be->pool_said_failed)
				pr_warn("event=pool_slot_failed backend=%s index=%u slot=%u "
					"reason=\"%s\" action=\"serving with pool %u; retried\"",
					be->name, b, s, strerror(-err), be->pool_n);
			be->pool_said_failed = true;
			be->pool_retry_ns = now + POOL_RETRY_MS * 1000000ull;
			continue;
		}
		if (s == be->pool_n)
			pr_info("event=pool_growing backend=%s index=%u from=%u to=%u", be->name, b,
				be->pool_n, want);
		gw_probe_settle(g, (int)b, 0); /* its answer read by the event loop */
	}
	if (!ready)
		return;
	be->pool_n = want;
	gw_publish_backend(g, b);
	pr_info("event=pool_resized backend=%s index=%u pool=%u", be->name, b, want);
}

struct owed_ctx {
	struct gw_backend *be;
	uint32_t b, cap;
	int err;
};

static void note_owed(void *ctx, const struct kvs_req_key *k, const struct kvs_inflight *rec)
{
	struct owed_ctx *o = ctx;
	struct gw_backend *be = o->be;

	if (rec->backend != o->b || o->err)
		return;
	if (be->nretire == o->cap) {
		uint32_t ncap = o->cap ? o->cap * 2 : 64;
		struct kvs_req_key *n = realloc(be->retire_keys, ncap * sizeof(*n));

		if (!n) {
			o->err = -ENOMEM;
			return;
		}
		be->retire_keys = n;
		o->cap = ncap;
	}
	be->retire_keys[be->nretire++] = *k;
}

/* Connections above want: closed once nothing they may carry is in
 * flight. Which requests are on which connection the kernel does not
 * record: every request the backend had in flight a tick after the smaller
 * pool was published (by then no program still sends with the larger one)
 * is waited for. */
static void retire(struct gw *g, uint32_t b, uint32_t want, uint64_t now)
{
	struct gw_backend *be = &g->be[b];
	uint32_t s, n = 0, left = 0;

	for (s = want; s < KVS_MAX_POOL; s++)
		n += be->pool[s] != NULL;
	if (!n) {
		gw_pool_forget(be);
		return;
	}
	if (be->retire_phase == 0) {
		be->retire_phase = 1;
		return;
	}
	if (be->retire_phase == 1) {
		struct owed_ctx o = { .be = be, .b = b };
		int err = kvs_dp_walk_inflight(&g->dp, note_owed, &o);

		if (err < 0 || o.err) {
			gw_pool_forget(be); /* tried again next tick */
			return;
		}
		be->retire_phase = 2;
		be->retire_since_ns = now;
		pr_info("event=pool_retiring backend=%s index=%u connections=%u pool=%u "
			"waiting_for=%u",
			be->name, b, n, want, be->nretire);
	}
	for (uint32_t i = 0; i < be->nretire; i++)
		if (kvs_dp_inflight_has(&g->dp, &be->retire_keys[i]))
			be->retire_keys[left++] = be->retire_keys[i];
	be->nretire = left;
	if (left) {
		if (!be->retire_warned &&
		    now - be->retire_since_ns > g->cfg->drain_timeout_ms * 1000000ull) {
			pr_warn("event=pool_retire_waiting backend=%s index=%u requests=%u "
				"hint=\"the surplus connections stay until these end (or the "
				"backend goes down)\"",
				be->name, b, left);
			be->retire_warned = true;
		}
		return;
	}
	for (s = want; s < KVS_MAX_POOL; s++) {
		if (be->pool[s]) {
			gw_conn_close(g, be->pool[s]);
			be->pool[s] = NULL;
		}
	}
	pr_info("event=pool_retired backend=%s index=%u connections=%u pool=%u", be->name, b, n,
		want);
	gw_pool_forget(be);
}

void gw_pool_tick(struct gw *g, uint64_t now)
{
	uint32_t want = g->cfg->pool_size;

	if (g->dp.in_memory)
		return;
	for (uint32_t b = 0; b < g->nslots; b++) {
		struct gw_backend *be = &g->be[b];

		/* Down or connecting: its pool is made anew, at --pool. A
		 * backend being removed goes with all its connections. */
		if (!be->present || !be->up || be->probing || be->removing)
			continue;
		if (be->pool_n > want) {
			pr_info("event=pool_shrinking backend=%s index=%u from=%u to=%u", be->name,
				b, be->pool_n, want);
			be->pool_n = want;
			gw_publish_backend(g, b);
		} else if (be->pool_n < want) {
			grow(g, b, want, now);
		}
		retire(g, b, want, now);
	}
}
