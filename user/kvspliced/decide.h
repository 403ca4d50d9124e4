/* SPDX-License-Identifier: MIT */
/*
 * The slow path's decision: where a request goes (the policy over the
 * backends' load and what each holds), the routes it installs in the kernel
 * and withdraws, and the kernel's load bound.
 */
#ifndef KVS_GW_DECIDE_H
#define KVS_GW_DECIDE_H

#include "gw.h"

/* The routing decision for a request from client c: on success 0, with
 * m->gw_backend and m->gw_conn set and *backend the choice; otherwise the
 * client has been answered with an ERROR and -1 is returned. kernel: also
 * consult and install the kernel's routes (the kernel path's decisions). */
int gw_decide(struct gw *g, struct gw_conn *c, struct kvs_msg *m, const uint8_t *prompt,
	      bool kernel, uint32_t *backend);
/* A request over its client's --max-client-inflight: answered busy. */
void gw_refuse_busy_client(struct gw *g, struct gw_conn *c, uint64_t req_id);
/* Client c, with n requests in flight, is at its limit (a front's own,
 * else --max-client-inflight; 0 is none). */
bool gw_client_at_limit(const struct gw *g, const struct gw_conn *c, uint32_t n);
/* The kernel's bound on each backend's work, from the fleet's load now. */
void gw_publish_limits(struct gw *g);
/* On the tick: each backend's index corrected from what its ENDs said. */
void gw_feedback(struct gw *g);
/* The policy's eviction callback (kvs_policy_on_evict): b's index evicted
 * a block a route names; the route is withdrawn with the others of the
 * same decision or tick. ctx is the struct gw. */
void gw_withdraw_route(void *ctx, uint32_t b, uint64_t hash);
/* Withdraws the routes gw_withdraw_route() queued, in one system call. */
void gw_withdraw_flush(struct gw *g);

#endif
