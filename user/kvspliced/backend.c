// SPDX-License-Identifier: MIT
/*
 * Backend slots: added, connected, ejected (down, with back-off), drained,
 * removed. A slot's index is the one the kernel's maps and the gw_backend
 * header field use. Each data path's connections to a backend are its own
 * (g->kpath, g->upath).
 */
#include "backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cancel.h"
#include "chash.h"
#include "conn.h"
#include "log.h"
#include "probe.h"

#define BACKOFF_MAX_MS 5000

enum kvs_backend_state gw_backend_state(const struct gw *g, uint32_t b)
{
	const struct gw_backend *be = &g->be[b];

	if (!be->present)
		return KVS_BE_ABSENT;
	if (!be->up) /* reconnected after a failed health check: its probes run */
		return be->probation && be->probing ? KVS_BE_PROBATION : KVS_BE_DOWN;
	if (be->probation)
		return KVS_BE_PROBATION;
	if (be->removing)
		return KVS_BE_REMOVING;
	if (be->draining)
		return KVS_BE_DRAINING;
	return be->said_not_ready ? KVS_BE_NOT_READY : KVS_BE_UP;
}

/* The kernel follows routes to b, and sends it requests, only while UP. */
void gw_publish_backend(struct gw *g, uint32_t b)
{
	kvs_dp_set_backend(&g->dp, b, gw_backend_state(g, b), g->be[b].pool_n,
			   g->cfg->max_outstanding);
}

struct fail_ctx {
	struct gw *g;
	const char *backend;
	struct gw_ended *ended; /* for their CANCELs (cancel.c) */
	uint32_t n, cap;
};

static void fail_request(void *ctx, uint64_t client, uint64_t req_id)
{
	struct fail_ctx *f = ctx;
	char msg[160];

	snprintf(msg, sizeof(msg), "kvsplice: backend %s failed while serving the request",
		 f->backend);
	gw_send_error(f->g, client, req_id, KVS_E_BACKEND_GONE, msg);
	if (f->n == f->cap) {
		uint32_t ncap = f->cap ? f->cap * 2 : 64;
		struct gw_ended *e = realloc(f->ended, ncap * sizeof(*e));

		if (!e)
			return; /* that one is not cancelled: it runs to its end */
		f->ended = e;
		f->cap = ncap;
	}
	f->ended[f->n++] = (struct gw_ended){ client, req_id };
}

uint64_t gw_silent_keep_ns(const struct gw *g)
{
	uint64_t interval = g->cfg->health_interval_ms ? g->cfg->health_interval_ms : 1000;

	return 10 * interval * 1000000ull;
}

bool gw_backend_err_silent(int err)
{
	return err == -ETIMEDOUT || err == -EHOSTUNREACH || err == -ENETUNREACH ||
	       err == -EHOSTDOWN || err == -ENETDOWN;
}

/*
 * What b held is gone, and so are the routes that promised it: its index
 * forgotten, its routes voided (one increment) and, if the map may hold
 * some, deleted in one walk of the map (up to 70-90 ms of this loop when
 * full, once per time it was up), so that they hold neither entries nor
 * their tenants' shares (route_shares) until the LRU or a trim takes them.
 */
static void withdraw_routes(struct gw *g, uint32_t b, const char *why)
{
	struct gw_backend *be = &g->be[b];

	be->silent_since_ns = 0;
	kvs_policy_forget_backend(&g->policy, b);
	kvs_dp_withdraw_routes(&g->dp, b);
	if (!be->routes_live)
		return;
	be->routes_live = false;
	be->routes_purged = kvs_dp_purge_routes(&g->dp, b);
	if (be->routes_purged < 0)
		pr_warn("event=backend_routes_purge_failed backend=%s index=%u err=\"%s\" "
			"hint=\"its routes are void all the same; the LRU or a trim removes them\"",
			be->name, b, strerror((int)-be->routes_purged));
	else if (be->routes_purged) /* (none: a backend that never had any) */
		pr_info("event=backend_routes_withdrawn backend=%s index=%u routes_removed=%ld "
			"reason=\"%s\"",
			be->name, b, be->routes_purged, why);
}

void gw_backend_instance(struct gw *g, uint32_t b, uint32_t instance, uint32_t known)
{
	struct gw_backend *be = &g->be[b];
	uint32_t was = be->instance;

	if (!instance || instance == was)
		return;
	/* Learned since the PING went (another connection's answer read
	 * first): this answer may be older than that one, the former
	 * instance's, and is not a restart; the next check's answer says. */
	if (known != was)
		return;
	be->instance = instance;
	if (!was) /* the first it said (to this controller): nothing to compare */
		return;
	be->restarts++;
	pr_info("event=backend_restarted backend=%s index=%u instance=%u previous=%u up=%d "
		"hint=\"a new instance: it restarted and its cache is empty; the routes to it "
		"are withdrawn and its prefixes placed anew\"",
		be->name, b, instance, was, be->up);
	withdraw_routes(g, b, "it restarted (a new instance)");
	/* Up (it restarted between two checks): it takes work, and routes
	 * to the new instance, from now on. */
	if (be->up)
		be->routes_live = true;
}

void gw_backend_capacity(struct gw *g, uint32_t b, uint32_t kv_blocks)
{
	if (!g->cfg->kv_reports || !kv_blocks || !kvs_policy_set_capacity(&g->policy, b, kv_blocks))
		return;
	kvs_dp_set_index_blocks(&g->dp, b, kvs_policy_index_blocks(&g->policy, b));
	pr_info("event=backend_capacity backend=%s kv_blocks=%u index_blocks=%u", g->be[b].name,
		kv_blocks, kvs_policy_index_blocks(&g->policy, b));
}

static void backend_down(struct gw *g, uint32_t b, const char *why, bool silent)
{
	struct gw_backend *be = &g->be[b];
	bool was_up = be->up;

	be->up = false;
	be->probing = 0; /* its connections close below, probed or not */
	kvs_dp_set_reason(&g->dp, b, why);
	gw_publish_backend(g, b);
	if (!silent)
		withdraw_routes(g, b, why);
	else if (be->routes_live && !be->silent_since_ns)
		be->silent_since_ns = kvs_now_ns();
	g->kpath->disconnect(g, b);
	g->upath->disconnect(g, b);
	if (was_up) {
		/* Every request it still owed an answer gets an ERROR now: a
		 * client must never wait on a backend that is gone. The
		 * kernel's records zero its counts, the userspace path's
		 * then go without touching them. */
		struct fail_ctx f = { .g = g, .backend = be->name };
		int n = g->kpath->fail_backend(g, b, fail_request, &f);

		n += g->upath->fail_backend(g, b, fail_request, &f);

		g->ctl.failed_inflight += (uint64_t)n;
		pr_warn("event=backend_down backend=%s reason=\"%s\" failed_requests=%d", be->name,
			why, n);
		/* It may still be working on them (hung, cut off, or only one
		 * connection lost): tell it to stop. */
		gw_cancel_ended(g, b, f.ended, f.n);
		free(f.ended);
		be->said_down = true;
	} else if (!be->said_down && !be->said_not_kvs1 && !be->said_not_ready && !be->on_trial) {
		/* Never up (given at start, added, listed by a reload), or its
		 * first retry after backend_down: said once, not at every
		 * retry; said again only after it has been up. */
		pr_warn("event=backend_unreachable backend=%s index=%u reason=\"%s\" "
			"hint=\"it takes no work until it answers; retried with back-off (at "
			"most %u ms apart), kvsplicectl backends shows why it is down\"",
			be->name, b, why, BACKOFF_MAX_MS);
		be->said_down = true;
	}
	be->backoff_ms = be->backoff_ms ? be->backoff_ms * 2 : 100;
	if (be->backoff_ms > BACKOFF_MAX_MS)
		be->backoff_ms = BACKOFF_MAX_MS;
	be->retry_at_ns = kvs_now_ns() + be->backoff_ms * 1000000ull;
}

void gw_backend_down(struct gw *g, uint32_t b, const char *why)
{
	backend_down(g, b, why, false);
}

void gw_backend_silent(struct gw *g, uint32_t b, const char *why)
{
	backend_down(g, b, why, true);
}

void gw_backend_readiness(struct gw *g, uint32_t b, bool ready)
{
	struct gw_backend *be = &g->be[b];

	if (ready == !be->said_not_ready)
		return;
	if (ready)
		pr_info("event=backend_ready backend=%s index=%u", be->name, b);
	else
		pr_warn("event=backend_not_ready backend=%s index=%u hint=\"it answers PINGs but "
			"says it cannot serve (its inference server down, loading or failing); "
			"no new requests while it says so, down after %u ms of it\"",
			be->name, b, 3 * g->cfg->health_interval_ms);
	be->said_not_ready = !ready;
	/* New work stops at once, not at the ejection three intervals on:
	 * sent there meanwhile, the adapter failed each request at once and,
	 * the backend being the least loaded, new prefixes went there first
	 * (257 of 300 failed in an operator's trial). The reason shows in
	 * `kvsplicectl backends`, a draining backend's too. */
	kvs_dp_set_reason(&g->dp, b, ready ? "" : "its server says it is not ready");
	gw_publish_backend(g, b);
}

/* Every new connection of b has answered its probe: it takes work. */
static void backend_ready(struct gw *g, uint32_t b)
{
	struct gw_backend *be = &g->be[b];
	bool readmitted = be->probation;

	be->up = true;
	be->probation = false;
	be->backoff_ms = 0;
	be->next_ping_ns = 0;
	be->said_not_kvs1 = false;
	be->said_down = false;
	if (be->silent_since_ns)
		pr_info("event=backend_routes_kept backend=%s index=%u down_ms=%llu "
			"hint=\"it was only silent: its cache and the routes to it stand\"",
			be->name, b,
			(unsigned long long)((kvs_now_ns() - be->silent_since_ns) / 1000000));
	be->silent_since_ns = 0;
	be->routes_live = true;
	kvs_dp_set_reason(&g->dp, b, "");
	gw_publish_backend(g, b);
	if (readmitted)
		pr_info("event=backend_readmitted backend=%s index=%u", be->name, b);
	else
		pr_info("event=backend_up backend=%s index=%u pool=%u", be->name, b,
			g->cfg->pool_size);
}

void gw_backend_probed(struct gw *g, uint32_t b, int err, const char *why)
{
	struct gw_backend *be = &g->be[b];
	char reason[sizeof(g->dp.backends[b].reason)];

	if (be->probing)
		be->probing--;
	if (!err) {
		gw_backend_readiness(g, b, true);
		if (!be->probing && !be->up)
			backend_ready(g, b);
		return;
	}
	g->ctl.upstream_failures++;
	if (err == -EPROTO) {
		/* An HTTP server, a TLS port, something else: said once, with
		 * what it answered; retried quietly (it may be replaced). */
		if (!be->said_not_kvs1 && !be->on_trial)
			pr_warn("event=backend_not_kvs1 backend=%s index=%u answer=\"%s\" "
				"hint=\"this is not a KVS1 backend (an inference server's HTTP "
				"port?): run kvsplice-adapter next to the server "
				"(kvsplice-adapter --listen ADDR:PORT --server http://%s) and "
				"give the gateway the adapter's ADDR:PORT\"",
				be->name, b, why, be->name);
		be->said_not_kvs1 = true;
		snprintf(reason, sizeof(reason),
			 "not KVS1, put kvsplice-adapter in front of it; it answered \"%s\"", why);
		why = reason;
	} else if (err == -EAGAIN) {
		gw_backend_readiness(g, b, false);
	}
	backend_down(g, b, why, gw_backend_err_silent(err));
}

int gw_backend_dial(struct gw *g, uint32_t b)
{
	struct gw_backend *be = &g->be[b];
	/* The kernel's pool (none without BPF); the userspace path's own
	 * connections while it takes clients (gw_set_datapath() makes them
	 * when it starts to). Each is probed with a PING first: the backend
	 * is up once all have answered (gw_backend_probed). */
	int err;

	be->probing = 0;
	err = g->dp.in_memory ? 0 : g->kpath->connect(g, b);
	if (!err && g->user_path)
		err = g->upath->connect(g, b);
	if (err) {
		g->ctl.upstream_failures++;
		backend_down(g, b, strerror(-err), gw_backend_err_silent(err));
		return err;
	}
	if (!be->probing) { /* no data path needs a connection (no BPF, none
			     * on the userspace path yet): nothing to wait for */
		backend_ready(g, b);
		return 0;
	}
	gw_publish_backend(g, b);
	/* Ejected by the health check: connections alone do not prove it
	 * works (a hung process still completes handshakes); its probes do. */
	/* Once an ejection: a server still not ready reconnects at every
	 * back-off (8 lines in 27 s in an operator's trial). */
	if (be->probation && !be->said_probation)
		pr_info("event=backend_probation backend=%s index=%u", be->name, b);
	else if (be->probation)
		pr_debug("event=backend_probation backend=%s index=%u", be->name, b);
	be->said_probation = be->probation;
	return 0;
}

int gw_backend_connect(struct gw *g, uint32_t b, uint32_t wait_ms)
{
	int err = gw_backend_dial(g, b);

	if (err)
		return err;
	gw_probe_settle(g, (int)b, wait_ms);
	return g->be[b].up ? 0 : g->be[b].probing ? -EINPROGRESS : -ECONNREFUSED;
}

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
void gw_slot_fill(struct gw *g, uint32_t b, const struct kvs_addr *a)
{
	struct gw_backend *be = &g->be[b];
	struct kvs_endpoint ep;

	memset(be, 0, sizeof(*be));
	be->present = true;
	/* A take-over's or a restart's map may hold its routes: withdrawn
	 * (or kept, if silent) as anyone's. */
	be->routes_live = true;
	be->pool_n = g->cfg->pool_size; /* a take-over's: as handed over (pool.c) */
	/* A take-over's or a restart's record holds the backend's whole
	 * history (0 in a fresh one): the index's correction starts here,
	 * and its first interval is not all that history judged by this
	 * index, which knew none of the hits the last one's did. */
	kvs_dp_end_counters(&g->dp, b, &be->fb_predicted, &be->fb_mispredicted, &be->fb_unexpected);
	be->addr = *a;
	kvs_addr_str(a, be->name, sizeof(be->name));
	kvs_endpoint_of(&a->ss, &ep);
	kvs_dp_set_backend_addr(&g->dp, b, &ep);
	kvs_dp_set_place_seed(&g->dp, b, kvs_str_hash(be->name));
	kvs_dp_set_expect_output(&g->dp, b, g->expect_output);
}

static int backend_add(struct gw *g, const struct kvs_addr *a, bool on_trial)
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
	gw_slot_fill(g, b, a);
	g->nslots = n;
	g->be[b].on_trial = on_trial;
	if (!on_trial)
		pr_info("event=backend_added backend=%s index=%u", name, b);
	gw_backend_connect(g, b, GW_PROBE_WAIT_MS);
	return (int)b;
}

int gw_backend_add(struct gw *g, const struct kvs_addr *a)
{
	return backend_add(g, a, false);
}

int gw_backend_try(struct gw *g, const struct kvs_addr *a)
{
	return backend_add(g, a, true);
}

void gw_backend_admit(struct gw *g, uint32_t b)
{
	g->be[b].on_trial = false;
	pr_info("event=backend_added backend=%s index=%u state=%s", g->be[b].name, b,
		kvs_backend_state_name(gw_backend_state(g, b)));
}

void gw_backend_drain(struct gw *g, uint32_t b, bool on)
{
	struct gw_backend *be = &g->be[b];

	be->draining = on;
	if (!on)
		be->removing = false;
	gw_publish_backend(g, b);
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
	gw_publish_backend(g, b);
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
	bool on_trial = be->on_trial; /* refused: its caller says so */
	long purged;

	snprintf(name, sizeof(name), "%s", be->name);
	be->said_down = true; /* removed is not unreachable: no such line */
	be->routes_purged = 0;
	/* its routes deleted from the map here, or when it went down */
	gw_backend_down(g, b, "removed by the operator");
	purged = be->routes_purged;
	memset(be, 0, sizeof(*be));
	kvs_dp_clear_backend(&g->dp, b);
	kvs_policy_remove_backend(&g->policy, b);
	if (sync_ring(g, g->nslots))
		pr_warn("event=ring_rebuild_failed hint=\"cold prefixes may still go to %s\"",
			name);
	if (!on_trial)
		pr_info("event=backend_removed backend=%s index=%u routes_removed=%ld", name, b,
			purged);
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

bool gw_backend_unreachable(const struct gw *g, uint32_t b)
{
	const struct gw_backend *be = &g->be[b];

	/* Probes still out: it accepted the connections (slow to answer,
	 * or hung). Not ready: a KVS1 backend whose server is not up yet.
	 * Both are reachable; it comes up once they answer ready. */
	return be->present && !be->up && !be->probing && !be->said_not_ready;
}

void gw_backend_withdraw(struct gw *g, uint32_t b)
{
	backend_removed(g, b);
}

void gw_backends_tick(struct gw *g, uint64_t now)
{
	for (uint32_t i = 0; i < g->nslots; i++) {
		if (!g->be[i].present)
			continue;
		if (g->be[i].removing && (kvs_dp_outstanding(&g->dp, i) == 0 || !g->be[i].up ||
					  now >= g->be[i].remove_deadline_ns))
			backend_removed(g, i);
		else if (!g->be[i].up && !g->be[i].probing && now >= g->be[i].retry_at_ns)
			gw_backend_connect(g, i, 0);
		if (g->be[i].present && !g->be[i].up && g->be[i].silent_since_ns &&
		    now >= g->be[i].silent_since_ns + gw_silent_keep_ns(g))
			withdraw_routes(g, i, "down past ten health-check intervals");
	}
}

/* cache_key s + 1: slot s as the gateway sees it (include/kvsplice/proto.h).
 * The request count is the kernel's (both paths'), so the client's own
 * count from the ENDs can be checked against it. */
static void pong_slot(struct gw *g, uint32_t s, struct kvs_load_info *li)
{
	uint64_t tokens, requests;
	const struct kvs_be_report *rep;

	li->backend_id = s;
	if (s >= g->nslots || !g->be[s].present) {
		li->flags |= KVS_LOAD_F_NO_BACKEND | KVS_LOAD_F_NOT_READY;
		return;
	}
	kvs_dp_charged(&g->dp, s, &tokens, &requests);
	rep = &g->dp.backends[s].report;
	li->running = (uint32_t)kvs_dp_outstanding(&g->dp, s);
	li->waiting = (uint32_t)requests;
	li->kv_used_blocks = rep->kv_used_blocks;
	li->kv_total_blocks = rep->kv_total_blocks;
	if (gw_backend_state(g, s) != KVS_BE_UP)
		li->flags |= KVS_LOAD_F_NOT_READY;
}

void gw_pong_payload(struct gw *g, uint64_t ask, uint8_t payload[sizeof(struct kvs_load)])
{
	struct kvs_load_info li = { .backend_id = KVS_GATEWAY_ID, .flags = KVS_LOAD_F_FLEET };

	if (ask && ask <= KVS_MAX_BACKENDS) {
		pong_slot(g, (uint32_t)(ask - 1), &li);
	} else {
		for (uint32_t b = 0; b < g->nslots; b++) {
			li.running += (uint32_t)kvs_dp_outstanding(&g->dp, b);
			li.kv_used_blocks += gw_backend_state(g, b) == KVS_BE_UP;
			li.kv_total_blocks += g->be[b].present;
		}
	}
	kvs_load_encode(&li, payload);
}
