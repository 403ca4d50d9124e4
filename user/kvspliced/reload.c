// SPDX-License-Identifier: MIT
/* Reloads (SIGHUP, kvsplicectl reload): the configuration read again, its
 * backend list and the controller's own limits applied at once, the
 * settings that need a restart named. */
#include "reload.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "log.h"

/* Two CIDR lists as given: a change of one entry is a change too. */
static bool lists_differ(const char *const *a, uint32_t na, const char *const *b, uint32_t nb)
{
	if (na != nb)
		return true;
	for (uint32_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]))
			return true;
	return false;
}

/* Settings a reload applies at once (the controller's own); the others
 * are the kernel's, the sockets' or the listeners' and need a restart, or
 * an upgrade (its successor applies them: docs/RUNBOOK.md, Upgrade). */
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
	c->max_source_conns = n->max_source_conns; /* for the clients that come next */
	c->idle_timeout_ms = n->idle_timeout_ms;
	c->stop_drain_ms = n->stop_drain_ms; /* read when a stop comes */
	g->policy.p.balance = n->balance;
	g->policy.balance_fp = kvs_policy_balance_fp(n->balance);
	g->policy.p.keep_balance = n->keep_balance > n->balance ? n->keep_balance : n->balance;
	for (uint32_t i = 0; republish && i < g->nslots; i++)
		if (g->be[i].present)
			gw_publish_backend(g, i);
#define RESTART_IF(cond, key)                                                                      \
	do {                                                                                       \
		if ((cond) && off < len) {                                                         \
			off += (size_t)snprintf(msg + off, len - off, " %s", key);                 \
			pr_warn("event=reload_needs_restart key=%s", key);                         \
		}                                                                                  \
	} while (0)
	RESTART_IF(strcmp(kvs_addr_str(&c->listen, a, sizeof(a)),
			  kvs_addr_str(&n->listen, b, sizeof(b))),
		   "listen");
	RESTART_IF(c->pool_size != n->pool_size, "pool");
	RESTART_IF(lists_differ(c->front_sources, c->nfront_sources, n->front_sources,
				n->nfront_sources) ||
			   c->front_max_inflight != n->front_max_inflight,
		   "front-source/max-front-inflight");
	RESTART_IF(lists_differ(c->tenant_sources, c->ntenant_sources, n->tenant_sources,
				n->ntenant_sources) ||
			   c->tenant_routes != n->tenant_routes,
		   "tenant-source/tenant-routes");
	RESTART_IF(c->kernel_place != n->kernel_place, "kernel-place");
	/* balance: the work limit (published on the tick) and the controller's
	 * policy take it now; so does the policy's keep bound, but the
	 * kernel's is in its rodata, set at load (until e1e1e84 that was
	 * balance too) */
	RESTART_IF(!g->dp.in_memory &&
			   kvs_policy_balance_fp(n->keep_balance) != g->dp.keep_balance_fp,
		   "keep-balance");
	RESTART_IF(c->client_max_inflight != n->client_max_inflight, "max-client-inflight");
	/* each client's budget is set when it is accepted */
	RESTART_IF(c->ctl_rate != n->ctl_rate || c->ctl_burst != n->ctl_burst ||
			   c->ctl_close_after != n->ctl_close_after,
		   "ctl-rate/ctl-burst/ctl-close-after");
	RESTART_IF(c->max_payload != n->max_payload, "max-frame");
	RESTART_IF(c->window_blocks != n->window_blocks, "window-blocks");
	RESTART_IF(c->min_match_pct != n->min_match_pct, "min-match-pct");
	RESTART_IF(c->index_blocks != n->index_blocks || c->kv_reports != n->kv_reports,
		   "backend-kv-blocks/backend-kv-reports");
	RESTART_IF(c->release_prefill_early != n->release_prefill_early, "release-prefill");
	RESTART_IF(c->metrics_set != n->metrics_set ||
			   (n->metrics_set && strcmp(kvs_addr_str(&c->metrics, a, sizeof(a)),
						     kvs_addr_str(&n->metrics, b, sizeof(b)))),
		   "metrics");
	RESTART_IF(!c->adm.ifname != !n->adm.ifname ||
			   (n->adm.ifname && strcmp(c->adm.ifname, n->adm.ifname)) ||
			   lists_differ(c->adm.allow, c->adm.nallow, n->adm.allow, n->adm.nallow) ||
			   lists_differ(c->adm.deny, c->adm.ndeny, n->adm.deny, n->adm.ndeny) ||
			   c->adm.syn_rate != n->adm.syn_rate ||
			   c->adm.syn_burst != n->adm.syn_burst,
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
		pr_info("event=reload_skipped reason=\"%s\"", msg);
		return -ENOENT;
	}
	err = g->hooks->load(g->hooks->ctx, &n, msg, len);
	if (err) {
		char q[1024];

		pr_warn("event=reload_failed config=%s err=\"%s\"", g->cfg->config_path,
			kvs_log_quote(msg, q, sizeof(q)));
		return err;
	}
	err = gw_backends_apply(g, n.backends, n.nbackends, &added, &removed);
	off = (size_t)snprintf(msg, len, "reloaded %s: %u backends listed, %u added, %u removing",
			       g->cfg->config_path, n.nbackends, added, removed);
	if (err && off < len)
		off += (size_t)snprintf(msg + off, len - off, "; not all added: %s",
					strerror(-err));
	if (off < len) {
		snprintf(msg + off, len - off,
			 "; unchanged until a restart or 'kvsplicectl upgrade':");
		reload_settings(g, &n, msg, len);
		if (!strcmp(msg + strlen(msg) - 1, ":"))
			msg[off] = '\0'; /* nothing needs one */
	}
	pr_info("event=reloaded config=%s backends=%u added=%u removing=%u", g->cfg->config_path,
		n.nbackends, added, removed);
	return err;
}
