/* SPDX-License-Identifier: MIT */
/* A socket's outgoing bytes, sent in order through the ring. */
#ifndef KVS_GW_SENDQ_H
#define KVS_GW_SENDQ_H

#include "gw.h"

void gw_sendq_init(struct gw_sendq *q, size_t limit);
void gw_sendq_free(struct gw_sendq *q);
/* Where to append the next bytes. */
static inline struct kvs_buf *gw_sendq_buf(struct gw_sendq *q)
{
	return &q->out[q->cur];
}
/* Something is queued or being sent. */
bool gw_sendq_busy(const struct gw_sendq *q);
/* Starts a send on fd if none is in flight and something is queued; its
 * completion carries udata. */
void gw_sendq_kick(struct io_uring *ring, struct gw_sendq *q, int fd, uint64_t udata);
/* A send completed with res: consumes what went and kicks the rest. res if
 * it is an error (nothing else done), else 0. */
int gw_sendq_done(struct io_uring *ring, struct gw_sendq *q, int fd, uint64_t udata, int res);
/* Everything queued, with blocking sends on fd (no send may be in flight).
 * 0 or -errno. */
int gw_sendq_flush_sync(struct gw_sendq *q, int fd);

#endif
