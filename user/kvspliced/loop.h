/* SPDX-License-Identifier: MIT */
/* The io_uring ring: submission entries, and completions by op code. */
#ifndef KVS_GW_LOOP_H
#define KVS_GW_LOOP_H

#include "gw.h"

/* A submission entry; when the ring is full, what is queued is submitted
 * first. NULL if there is still none. */
struct io_uring_sqe *gw_sqe(struct io_uring *ring);
static inline struct io_uring_sqe *gw_get_sqe(struct gw *g)
{
	return gw_sqe(&g->ring);
}
/* The connection a completion's user_data names, or NULL if that slot has
 * been reused since (the generation differs) or is empty. */
struct gw_conn *gw_conn_of(struct gw *g, uint64_t data);
/* Hands a completion to the handler registered for its op in g->on_op
 * (none: ignored, as a cancellation's own completion is). */
void gw_loop_dispatch(struct gw *g, struct io_uring_cqe *cqe);
/* A multishot accept on a listening socket; its completions carry op. */
int gw_arm_accept(struct gw *g, int fd, uint64_t op);
/* A multishot accept that ended with res (its completion's), armed again:
 * at once after a success, 100 ms later after a failure (out of
 * descriptors, EMFILE, it would fail again at once, for ever). */
int gw_rearm_accept(struct gw *g, int fd, uint64_t op, int res);

#endif
