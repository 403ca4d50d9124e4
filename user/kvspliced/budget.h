/* SPDX-License-Identifier: MIT */
/*
 * A client over its budget of controller work (--ctl-rate,
 * include/kvsplice/budget.h): answered cheaply, and closed if it stays
 * over. The kernel path's budget is taken by the verdict, which marks what
 * it passes up; the userspace path's here.
 */
#ifndef KVS_GW_BUDGET_H
#define KVS_GW_BUDGET_H

#include "gw.h"

/* A frame of userspace-path client c for the controller, against its
 * budget: enum kvs_budget_verdict. */
int gw_budget_take(struct gw *g, struct gw_conn *c);
/* A request over c's budget: answered busy, without a decision. */
void gw_budget_refuse(struct gw *g, struct gw_conn *c, uint64_t req_id);
/* c went --ctl-close-after frames over its budget: answered busy (for the
 * frame req_id names: a request, which the kernel counted in flight, or
 * else a frame of no request) and closed after ERROR_GRACE_MS. */
void gw_budget_close(struct gw *g, struct gw_conn *c, uint64_t req_id, bool request);

#endif
