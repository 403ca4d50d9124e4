// SPDX-License-Identifier: MIT
/*
 * A client over its budget of controller work: a request answered busy at
 * once (no hashing, no decision, no route), a client that stays over
 * closed. What a PING or CANCEL over it costs is a drop, in the verdict
 * or on the userspace path (docs/RUNBOOK.md, "One client and the
 * controller").
 */
#include "budget.h"

#include <stdio.h>

#include "conn.h"
#include "log.h"

int gw_budget_take(struct gw *g, struct gw_conn *c)
{
	return kvs_budget_take(&c->budget, kvs_now_ns());
}

void gw_budget_refuse(struct gw *g, struct gw_conn *c, uint64_t req_id)
{
	char msg[96];

	g->ctl.busy_budget++;
	snprintf(msg, sizeof(msg), "kvsplice: over this connection's %u controller frames a second",
		 c->budget.rate);
	gw_send_error(g, c->cookie, req_id, KVS_E_BUSY, msg);
}

void gw_budget_close(struct gw *g, struct gw_conn *c, uint64_t req_id, bool request)
{
	char msg[128];

	g->ctl.budget_closed++;
	pr_info("event=client_over_budget conn=%llu rate=%u burst=%u close_after=%u",
		(unsigned long long)c->cookie, c->budget.rate, c->budget.burst,
		c->budget.close_after);
	snprintf(msg, sizeof(msg),
		 "kvsplice: %u frames over this connection's %u controller frames a second; "
		 "closing",
		 c->budget.close_after, c->budget.rate);
	if (request)
		gw_send_error(g, c->cookie, req_id, KVS_E_BUSY, msg);
	else
		gw_send_notice(g, c->cookie, req_id, KVS_E_BUSY, msg);
	c->close_at_ns = kvs_now_ns() + ERROR_GRACE_MS * 1000000ull;
}
