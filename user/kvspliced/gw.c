// SPDX-License-Identifier: MIT
/*
 * The controller's top: setup (fresh, or taking over from a running
 * controller), the event loop, the tick that calls each part in turn, and
 * teardown. The parts below never call up into here: completions reach them
 * through the handlers registered in set_handlers().
 */
#include "gateway.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend.h"
#include "client.h"
#include "conn.h"
#include "control.h"
#include "decide.h"
#include "fdstore.h"
#include "handover.h"
#include "health.h"
#include "idle.h"
#include "kpath.h"
#include "kvsplice/hash.h"
#include "log.h"
#include "loop.h"
#include "pins.h"
#include "policy.h"
#include "pool.h"
#include "probe.h"
#include "reload.h"
#include "reports.h"
#include "scrape.h"
#include "sdnotify.h"
#include "sendq.h"
#include "stop.h"
#include "upath.h"
#include "upgrade.h"

#define TICK_MS 100
#define OUT_LIMIT (64u << 20) /* what the inject socket may have queued, per buffer */

static void arm_tick(struct gw *g)
{
	struct io_uring_sqe *sqe = gw_get_sqe(g);

	if (!sqe)
		return;
	io_uring_prep_timeout(sqe, &g->tick, 0, 0);
	io_uring_sqe_set_data64(sqe, ud(OP_TICK, NULL));
}

/* Each part's tick, in the order the loop always called them: the
 * index corrected, backends checked, the kernel's progress read, stale
 * frames answered, removals and retries, connections closed, sends kicked,
 * the kernel's bound refreshed. */
static void on_tick(struct gw *g, struct io_uring_cqe *cqe)
{
	uint64_t now = kvs_now_ns();

	gw_reports_drain(g);
	gw_reports_arm(g);
	gw_feedback(g);
	gw_probe_tick(g, now);
	gw_health_tick(g, now);
	gw_upgrade_reap(g);
	gw_kpath_tick(g);
	gw_fdstore_tick(g);
	/* Every quarter of the frame timeout (at most each second): a frame
	 * is answered between 1 and 1.25 timeouts after it began. */
	if (now >= g->next_partial_scan_ns) {
		uint64_t period = g->cfg->frame_timeout_ms * 250000ull;

		gw_kpath_stale(g, now - g->cfg->frame_timeout_ms * 1000000ull);
		gw_up_stale(g, now - g->cfg->frame_timeout_ms * 1000000ull);
		g->next_partial_scan_ns = now + (period < 1000000000ull ? period : 1000000000ull);
	}
	gw_backends_tick(g, now);
	gw_pool_tick(g, now);
	gw_clients_tick(g, now);
	gw_idle_tick(g, now);
	gw_shares_tick(g, now);
	if (g->stopping)
		gw_stop_clients(g, now);
	gw_conns_tick(g, now);
	gw_kpath_kick(g);
	gw_up_tick(g);
	gw_publish_limits(g);
	arm_tick(g);
}

/* Who handles which completion, and the parts' hooks into each other. */
static void set_handlers(struct gw *g)
{
	g->on_op[OP_ACCEPT] = gw_client_on_accept;
	g->on_op[OP_ACCEPT_RETRY] = gw_client_on_retry;
	g->on_op[OP_RECV] = gw_conn_on_recv;
	g->on_op[OP_POLL] = gw_conn_on_poll;
	g->on_op[OP_SEND] = gw_kpath_on_send;
	g->on_op[OP_CSEND] = gw_up_on_send;
	g->on_op[OP_TICK] = on_tick;
	g->on_op[OP_HANDOVER] = gw_handover_on_poll;
	g->on_op[OP_METRICS_ACCEPT] = gw_scrape_on_accept;
	g->on_op[OP_CONTROL_ACCEPT] = gw_control_on_accept;
	g->on_op[OP_REPORTS] = gw_reports_on_poll;
	g->on_op[OP_CONNECT] = gw_conn_on_connect;
	g->kpath = &gw_kpath_ops;
	g->upath = &gw_upath_ops;
	g->on_backend_pong = gw_health_on_pong;
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

static void gw_teardown(struct gw *g)
{
	uint32_t i;

	/* First the ring: no recv may still be writing into a buffer we free. */
	io_uring_queue_exit(&g->ring);
	/* Stopped (not handed over): the store lets go of the sockets too. */
	if (!g->handed_over)
		gw_fdstore_clear(g);
	for (i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];

		if (!c)
			continue;
		/* Handed over: the sockets and their map entries are the new
		 * controller's now; closing our descriptors leaves them be.
		 * Not a lingering client's (never handed over): it closes
		 * here, its conns entry with it, and a copy in the fd store
		 * must not keep it open. */
		if (c->lingering)
			shutdown(c->fd, SHUT_RDWR);
		if (c->in_map && (!g->handed_over || c->lingering))
			kvs_dp_del_sock(&g->dp, c->key, c->cookie);
		gw_conn_free(g, c);
	}
	free(g->conns);
	for (i = 0; i < g->nslots; i++)
		gw_pool_forget(&g->be[i]);
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
	gw_reports_close(g);
	kvs_policy_free(&g->policy);
	kvs_idmap_free(&g->clients);
	gw_clients_close(g);
	free(g->unseen_q);
	free(g->gone);
	free(g->hashes);
	kvs_adm_close(&g->adm);
	kvs_dp_close(&g->dp, !g->cfg->keep_pins);
}

/* The backend slots to start with: the running controller's when taking
 * over (or the maps' when restarted from the descriptor store; its own list
 * is applied once it runs), else the configured list. */
/* The tenants' shares of the routes map, sized before anything is served
 * (written into the map by the first tick: gw_shares_tick). -ENOSPC when
 * --tenant-routes asks for more than the map has room for. */
static int init_shares(struct gw *g)
{
	int ncpus = libbpf_num_possible_cpus();
	uint64_t room;
	int err = gw_shares_size(g->tenants.n, g->cfg->tenant_routes, KVS_ROUTES_MAX,
				 ncpus > 0 ? (uint32_t)ncpus : 1, &g->shares.per_tenant, &room);

	if (err)
		pr_warn("event=tenant_routes_too_many tenant_routes=%u tenants=%u room=%llu "
			"hint=\"--tenant-routes x (tenant-sources + 1, the unbound clients) must "
			"fit in the routes map less a reserve per CPU: at most %llu each here\"",
			g->cfg->tenant_routes, g->tenants.n + 1, (unsigned long long)room,
			(unsigned long long)(room / (g->tenants.n + 1)));
	return err;
}

static int init_slots(struct gw *g, const struct gw_taken *t)
{
	const char *names[KVS_MAX_BACKENDS];
	struct kvs_policy_params pp;
	struct kvs_addr a;
	uint32_t b;

	if (t->nslots) {
		g->nslots = t->nslots;
		for (b = 0; b < t->nslots; b++) {
			const struct kvs_ho_backend *r = &t->be[b];

			if (!(r->flags & KVS_HO_BE_PRESENT))
				continue;
			if (kvs_parse_addr(r->name, &a))
				return -EPROTO;
			gw_slot_fill(g, b, &a);
			g->be[b].draining = r->flags & KVS_HO_BE_DRAINING;
			/* its ejection clock starts again with its next answer */
			g->be[b].said_not_ready = r->flags & KVS_HO_BE_NOT_READY;
			g->be[b].instance = r->instance; /* 0 from an older one */
			if (r->flags & KVS_HO_BE_REMOVING) {
				g->be[b].removing = true;
				g->be[b].remove_deadline_ns =
					kvs_now_ns() + g->cfg->drain_timeout_ms * 1000000ull;
			}
		}
	} else {
		g->nslots = g->cfg->nbackends;
		for (b = 0; b < g->cfg->nbackends; b++)
			gw_slot_fill(g, b, &g->cfg->backends[b]);
	}
	if (!g->nslots)
		return -EINVAL;
	for (b = 0; b < g->nslots; b++)
		names[b] = g->be[b].present ? g->be[b].name : NULL;
	kvs_policy_defaults(&pp);
	pp.nbackends = g->nslots;
	pp.index_blocks = g->cfg->index_blocks;
	pp.balance = g->cfg->balance;
	pp.keep_balance = g->cfg->keep_balance;
	pp.min_match_share = g->cfg->min_match_pct / 100.0;
	return kvs_policy_init(&g->policy, &pp, names);
}

/* Taking over: the sockets adopted, the old controller told to go, the
 * kernel's view of each backend set as this one sees it, then this one's
 * own backend list applied as a reload would. On failure before the ACK
 * the old controller carries on, and nothing of its is touched. Restarted
 * from the descriptor store (ho_sock -1), there is no one to tell, and on
 * failure no one carries on: this one stops as a fresh one would. */
static int start_taken_over(struct gw *g, struct gw_taken *t, int ho_sock)
{
	struct kvs_ho_hdr ack = { KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_ACK, 0 };
	uint32_t n = t->n, added, removed, stale = 0;
	bool ttft_kept[KVS_MAX_BACKENDS];
	int err = gw_adopt(g, t);

	for (uint32_t b = 0; b < KVS_MAX_BACKENDS; b++)
		ttft_kept[b] = (t->be[b].flags & (KVS_HO_BE_PRESENT | KVS_HO_BE_TTFT)) ==
			       (KVS_HO_BE_PRESENT | KVS_HO_BE_TTFT);
	gw_taken_free(t, false);
	if (err && ho_sock < 0) {
		pr_warn("event=fd_store_adopt_failed err=\"%s\"", strerror(-err));
		return err;
	}
	if (err) {
		/* The old controller carries on: leave its sockets, map
		 * entries and pins alone on the way out. */
		pr_warn("event=takeover_failed err=\"%s\"", strerror(-err));
		close(ho_sock);
		g->handed_over = true;
		g->dp.handed_over = true;
		return err;
	}
	if (ho_sock >= 0) {
		err = kvs_ho_send(ho_sock, &ack, sizeof(ack), NULL, 0);
		close(ho_sock);
	} else {
		gw_fdstore_adopted(g);
	}
	if (!err)
		err = gw_start_adopted(g);
	if (err)
		return err;
	if (ho_sock < 0)
		pr_info("event=restarted_from_fd_store sockets=%u clients=%u", n, g->clients.count);
	else
		pr_info("event=took_over sockets=%u clients=%u", n, g->clients.count);
	/* Once the old controller is gone (it may carry on until the ACK):
	 * the first-token counts of a slot it did not say it kept
	 * (KVS_HO_BE_TTFT: a controller from before them) are an earlier
	 * run's, perhaps of another backend. */
	for (uint32_t b = 0; b < KVS_MAX_BACKENDS; b++) {
		if (ttft_kept[b])
			continue;
		stale += b < g->nslots && g->be[b].present;
		kvs_dp_clear_ttft(&g->dp, b);
	}
	if (stale)
		pr_info("event=ttft_cleared slots=%u reason=\"the controller before did not count "
			"the backends' first-token times: those in the map were an earlier run's\"",
			stale);
	kvs_sd_notify("MAINPID=%d\nREADY=1", (int)getpid());
	/* The pool each backend has in the kernel stays as handed over until
	 * the tick brings it to this one's --pool (pool.c). A probation, say,
	 * is not carried over: the health check finds a backend that still
	 * does not answer. */
	gw_pool_adopted(g);
	for (uint32_t b = 0; b < g->nslots; b++)
		if (g->be[b].present)
			gw_publish_backend(g, b);
	/* The old one's backends this one does not list drain and go. */
	if (gw_backends_apply(g, g->cfg->backends, g->cfg->nbackends, &added, &removed))
		pr_warn("event=backends_not_all_added");
	else if (added || removed)
		pr_info("event=backend_list_applied added=%u removing=%u", added, removed);
	return 0;
}

/* Starting afresh: the controller's paths into the kernel (none without
 * BPF), the backends connected, the listening socket. */
static int start_fresh(struct gw *g)
{
	char addr[96];
	int err = g->dp.in_memory ? 0 : gw_kpath_setup(g);

	if (err) {
		pr_warn("event=controller_sockets_failed err=\"%s\"", strerror(-err));
		return err;
	}
	/* Every backend's probes at once, then waited for (up to their
	 * timeout): clients are accepted once the backends that answer are
	 * up. */
	for (uint32_t b = 0; b < g->nslots; b++)
		gw_backend_dial(g, b);
	gw_probe_settle(g, -1, gw_probe_timeout_ms(g));
	g->listen_fd = kvs_listen(&g->cfg->listen, 1024);
	if (g->listen_fd < 0) {
		pr_warn("event=listen_failed addr=%s err=\"%s\"",
			kvs_addr_str(&g->cfg->listen, addr, sizeof(addr)), strerror(-g->listen_fd));
		return g->listen_fd;
	}
	return 0;
}

/* Whether fd (a listening socket handed over) is bound where want says;
 * port 0 in want matches any port (it was picked at the first start). */
static bool bound_as(int fd, const struct kvs_addr *want)
{
	struct kvs_endpoint l, r, w;

	kvs_sock_endpoints(fd, &l, &r);
	kvs_endpoint_of(&want->ss, &w);
	return l.family == w.family && !memcmp(l.addr, w.addr, sizeof(l.addr)) &&
	       (!w.port || l.port == w.port);
}

/*
 * A take-over whose --listen is not where the listening socket it was
 * handed is bound (the configuration changed with the upgrade, or before
 * the crash the store's socket survived, for a restart): clients
 * are taken at the new address from now on. The handed-over socket is
 * closed once the connections it had queued are accepted, so none of
 * them is reset. If the new address cannot be had, the old one serves on
 * (and the log says so): failing here would drop every client.
 */
static void move_listener(struct gw *g)
{
	char from[96], to[96];
	struct kvs_endpoint l, r;
	int fd, old = g->listen_fd, c, n = 0;

	if ((!g->cfg->takeover && !g->fdstore.restarted) || old < 0 ||
	    bound_as(old, &g->cfg->listen))
		return;
	kvs_sock_endpoints(old, &l, &r);
	kvs_endpoint_str(&l, from, sizeof(from));
	kvs_addr_str(&g->cfg->listen, to, sizeof(to));
	fd = kvs_listen(&g->cfg->listen, 1024);
	if (fd < 0) {
		pr_warn("event=listen_move_failed from=%s to=%s err=\"%s\" action=\"listening "
			"where it was\"",
			from, to, strerror(-fd));
		return;
	}
	g->listen_fd = fd;
	kvs_set_nonblock(old, 1);
	while ((c = accept4(old, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		struct io_uring_cqe cqe = { .res = c, .flags = IORING_CQE_F_MORE };

		g->on_op[OP_ACCEPT](g, &cqe);
		n++;
	}
	close(old);
	gw_fdstore_drop(g, KVS_FDN_LISTEN);
	pr_info("event=listen_moved from=%s to=%s port=%d queued_accepted=%d", from, to,
		kvs_local_port(fd), n);
}

/* A take-over's --metrics socket where this configuration no longer has
 * it: closed (and opened where it says, by open_services). */
static void check_metrics(struct gw *g)
{
	const struct gw_config *cfg = g->cfg;
	struct kvs_endpoint l, r;
	char was[96];

	if (g->metrics_fd < 0 || (cfg->metrics_set && bound_as(g->metrics_fd, &cfg->metrics)))
		return;
	kvs_sock_endpoints(g->metrics_fd, &l, &r);
	pr_info("event=metrics_closed addr=%s reason=\"%s\"",
		kvs_endpoint_str(&l, was, sizeof(was)),
		cfg->metrics_set ? "--metrics moved" : "no --metrics");
	close(g->metrics_fd);
	g->metrics_fd = -1;
	gw_fdstore_drop(g, KVS_FDN_METRICS);
}

/* Clients accepted, the tick, --metrics, the hand-over socket, XDP
 * admission, the control socket; then READY. A take-over's listening
 * sockets move first if the configuration moved them. */
static int open_services(struct gw *g)
{
	const struct gw_config *cfg = g->cfg;
	uint32_t nbackends = 0;
	char addr[96];
	int err;

	move_listener(g);
	check_metrics(g);
	gw_clients_open(g);
	arm_tick(g);
	if (cfg->metrics_set && g->metrics_fd < 0) {
		g->metrics_fd = kvs_listen(&cfg->metrics, 16);
		if (g->metrics_fd < 0) {
			pr_warn("event=metrics_listen_failed addr=%s err=\"%s\"",
				kvs_addr_str(&cfg->metrics, addr, sizeof(addr)),
				strerror(-g->metrics_fd));
			return g->metrics_fd;
		}
		pr_info("event=metrics_listening addr=%s port=%d",
			kvs_addr_str(&cfg->metrics, addr, sizeof(addr)),
			kvs_local_port(g->metrics_fd));
	}
	if (g->metrics_fd >= 0 && gw_arm_accept(g, g->metrics_fd, OP_METRICS_ACCEPT))
		return -EBUSY;
	err = gw_handover_listen(g);
	if (err)
		return err;
	if (cfg->adm.ifname) {
		struct kvs_adm_opts ao = cfg->adm;

		ao.pin_dir = cfg->pin_dir;
		ao.port = (uint16_t)kvs_local_port(g->listen_fd);
		err = kvs_adm_open(&g->adm, &ao);
		if (err)
			return err;
	}
	err = gw_control_open(g);
	if (err)
		return err;
	if (cfg->port_file)
		kvs_write_port_file(cfg->port_file, kvs_local_port(g->listen_fd));
	/* Backends there are, not slots used (a take-over's slots include
	 * the empty ones a removal left) */
	for (uint32_t b = 0; b < g->nslots; b++)
		nbackends += g->be[b].present;
	pr_info("event=listening addr=%s port=%d backends=%u control=%s",
		kvs_addr_str(&cfg->listen, addr, sizeof(addr)), kvs_local_port(g->listen_fd),
		nbackends, g->control_path);
	kvs_sd_notify("READY=1");
	return 0;
}

/* Until told to stop or handed over: completions dispatched in batches;
 * between batches a pending hand-over (never from inside a batch: it reaps
 * completions itself), a reload or an upgrade asked for by a signal, and
 * the counters published. */
/* Requests sent to a backend and not ended, on either path (the backends
 * map's counts, which the controller's sends count too). */
static uint64_t in_flight(const struct gw *g)
{
	uint64_t n = 0;

	for (uint32_t b = 0; b < g->nslots; b++)
		if (g->be[b].present)
			n += kvs_dp_outstanding(&g->dp, b);
	return n;
}

/*
 * A stop's first signal: no new client is accepted and every backend is
 * drained, so that the kernel passes new requests up and the controller
 * answers them busy, while the requests in flight run to their END (the
 * kernel splices them; the userspace path goes on too). Then the loop
 * ends when none is left or --stop-drain-ms has passed. Without it a
 * stop closed every connection at once: a client with a request in flight
 * saw its connection close and no answer.
 */
static void stop_drain(struct gw *g)
{
	struct io_uring_sqe *sqe;

	g->stopping = true;
	g->stop_until_ns = kvs_now_ns() + (uint64_t)g->cfg->stop_drain_ms * 1000000ull;
	if (g->accepting && (sqe = gw_get_sqe(g))) {
		io_uring_prep_cancel64(sqe, ud(OP_ACCEPT, NULL), 0);
		io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, NULL));
	}
	/* Not listening any more (the socket itself, whoever else holds it,
	 * systemd's descriptor store too): a client connecting now is refused
	 * at once and tries elsewhere, rather than waiting in the backlog for
	 * an accept that never comes; those in the backlog are reset. */
	if (g->listen_fd >= 0)
		shutdown(g->listen_fd, SHUT_RDWR);
	for (uint32_t b = 0; b < g->nslots; b++)
		if (g->be[b].present && !g->be[b].draining)
			gw_backend_drain(g, b, true);
	pr_info("event=stop_draining in_flight=%llu timeout_ms=%u",
		(unsigned long long)in_flight(g), g->cfg->stop_drain_ms);
	gw_stop_clients(g, kvs_now_ns()); /* the idle ones told at once */
}

/* Whether the loop should end for a stop: at once, or once drained. */
static bool stop_now(struct gw *g, const struct gw_hooks *hooks)
{
	uint64_t left, now;

	if (!*hooks->stop) /* every turn of the loop: nothing more */
		return false;
	if (*hooks->stop > 1 || !g->cfg->stop_drain_ms)
		return true;
	if (!g->stopping) {
		stop_drain(g);
		return false;
	}
	now = kvs_now_ns();
	/* Drained: each client's connection closes as stop.c says, each no
	 * sooner than ERROR_GRACE_MS after its last answer (counted as it goes
	 * out, not once sent); the loop ends with the last of them, or at
	 * STOP_CLOSE_MAX_MS. Closing sooner reset those still sending. */
	if (g->stop_drained_ns) {
		if (gw_stop_clients_open(g) &&
		    now < g->stop_drained_ns + STOP_CLOSE_MAX_MS * 1000000ull)
			return false;
		pr_info("event=stop_clients_closed told=%u closed_quiet=%u closed_sending=%u "
			"left=%u",
			g->stop_told, g->stop_quiet, g->stop_cut, gw_stop_clients_open(g));
		return true;
	}
	left = in_flight(g);
	if (!left) {
		pr_info("event=stop_drained");
		g->stop_drained_ns = now;
		return false;
	}
	if (now < g->stop_until_ns)
		return false;
	pr_warn("event=stop_drain_timed_out in_flight=%llu timeout_ms=%u hint=\"their clients "
		"see the connection close: a longer --stop-drain-ms\"",
		(unsigned long long)left, g->cfg->stop_drain_ms);
	return true;
}

static int run_loop(struct gw *g, const struct gw_hooks *hooks)
{
	while (!stop_now(g, hooks) && !g->handed_over) {
		struct io_uring_cqe *cqe;
		unsigned int head, seen = 0;
		int err = io_uring_submit_and_wait(&g->ring, 1);

		if (err < 0 && err != -EINTR) {
			pr_warn("event=io_uring_wait_failed err=\"%s\"", strerror(-err));
			return err;
		}
		io_uring_for_each_cqe(&g->ring, head, cqe) {
			gw_loop_dispatch(g, cqe);
			seen++;
		}
		io_uring_cq_advance(&g->ring, seen);
		gw_clients_resume(g);
		if (g->ho_pending >= 0)
			gw_handover_run(g);
		if (hooks->reload && *hooks->reload) {
			char msg[512];

			*hooks->reload = 0;
			gw_reload(g, msg, sizeof(msg));
		}
		if (hooks->upgrade && *hooks->upgrade) {
			char msg[512];

			*hooks->upgrade = 0;
			if (gw_upgrade(g, msg, sizeof(msg)) < 0)
				pr_warn("event=upgrade_refused reason=\"%s\"", msg);
		}
		publish_ctl(g);
	}
	return 0;
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
		.kernel_place = cfg->kernel_place,
		.keep_balance_fp = kvs_policy_balance_fp(cfg->keep_balance),
		.recompute_weight = (uint32_t)KVS_POLICY_RECOMPUTE_WEIGHT,
	};
	struct gw g = { .live = *cfg,
			.hooks = hooks,
			.listen_fd = -1,
			.inject_fd = -1,
			.ho_fd = -1,
			.metrics_fd = -1,
			.control_fd = -1,
			.ho_pending = -1,
			.acc = { .reserve_fd = -1 },
			.expect_output = KVS_EXPECT_OUTPUT_INIT };
	struct gw_taken t = { 0 };
	struct gw_stored stored = { 0 };
	int err, ho_sock = -1;
	bool restarted = false; /* after a crash, with the store's sockets */

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
	set_handlers(&g);
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
		ho_sock = gw_take_state(g.ho_path, &t);
		if (ho_sock < 0) {
			io_uring_queue_exit(&g.ring);
			free(g.hashes);
			return ho_sock;
		}
		dpo.takeover = true;
	} else {
		/* Sockets systemd kept for us: the last controller crashed,
		 * and the pinned maps it left are the live state. */
		restarted = gw_fdstore_received(&stored, cfg->pin_dir) > 0 && cfg->fd_store;
		g.fdstore.restarted = restarted;
		if (restarted)
			dpo.takeover = true;
		else
			gw_stored_free(&stored); /* shut down: no one will serve them */
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
	if (!err && restarted && g.dp.in_memory)
		err = -EOPNOTSUPP;
	if (err) {
		if (ho_sock >= 0)
			close(ho_sock); /* the old controller carries on */
		gw_stored_free(&stored);
		gw_taken_free(&t, true);
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
	/* Checked when the configuration was read: they parse. */
	for (uint32_t i = 0; i < cfg->nfront_sources; i++) {
		struct kvs_cidr *n = &g.fronts[g.nfronts];

		if (!kvs_cidr_parse(cfg->front_sources[i], &n->family, n->addr, &n->prefixlen))
			g.nfronts++;
	}
	gw_fdstore_init(&g);
	err = gw_tenants_init(&g.tenants, cfg->tenant_sources, cfg->ntenant_sources);
	/* Taking over, they are published once the adoption is certain
	 * (gw_adopt): the old controller's clients use the map till then. */
	if (!err && !cfg->takeover && !restarted)
		err = gw_tenants_publish(&g.tenants, g.dp.tenants_fd);
	if (err)
		pr_warn("event=tenants_failed err=\"%s\"", strerror(-err));
	if (!err)
		err = init_shares(&g);
	if (!err && !cfg->takeover && !restarted)
		gw_shares_apply(&g);
	if (!err)
		err = kvs_idmap_init(&g.clients, 1024);
	if (!err && restarted)
		err = gw_fdstore_take(&g, &stored, &t);
	if (!err)
		err = init_slots(&g, &t);
	if (err) {
		if (cfg->takeover) { /* the old controller carries on */
			close(ho_sock);
			gw_taken_free(&t, true);
			g.handed_over = true;
			g.dp.handed_over = true;
		}
		if (restarted)
			gw_taken_free(&t, true);
		goto out;
	}
	kvs_policy_on_evict(&g.policy, gw_withdraw_route, &g);
	/* Without the reports the kernel still routes everything; the index
	 * just learns nothing from it (said in the log). */
	gw_reports_open(&g);
	err = cfg->takeover || restarted ? start_taken_over(&g, &t, ho_sock) : start_fresh(&g);
	if (!err)
		gw_reports_arm(&g);
	if (!err)
		err = open_services(&g);
	if (!err)
		err = run_loop(&g, hooks);
	if (err)
		goto out;
	publish_ctl(&g);
	if (!g.handed_over)
		kvs_sd_notify("STOPPING=1");
	pr_info("event=stopping slow_frames=%llu clients_accepted=%llu",
		(unsigned long long)g.ctl.slow_frames, (unsigned long long)g.ctl.clients_accepted);
out:
	gw_teardown(&g);
	return err;
}
