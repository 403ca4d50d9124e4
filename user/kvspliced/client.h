/* SPDX-License-Identifier: MIT */
/* Clients accepted, each onto the data path new clients take; out of
 * descriptors, the accept backs off and the clients waiting are answered
 * busy. */
#ifndef KVS_GW_CLIENT_H
#define KVS_GW_CLIENT_H

#include "gw.h"

/* At start: the soft descriptor limit raised to the hard one, the reserve
 * descriptor opened, the accept armed. 0 or -errno. */
int gw_clients_open(struct gw *g);
/* The multishot accept on the listening socket, unless it is armed or
 * backing off already. 0 or -errno. */
int gw_clients_accept(struct gw *g);
/* After each batch of completions: a connection closed while the accept
 * backs off, so it need not wait any longer. */
void gw_clients_resume(struct gw *g);
/* On the tick: the failures counted since the last line logged, once per
 * interval; an accept that should be armed and is not, armed. */
void gw_clients_tick(struct gw *g, uint64_t now);
/* Teardown: the reserve descriptor and the per-source counts. */
void gw_clients_close(struct gw *g);
/* Completion handlers: OP_ACCEPT, OP_ACCEPT_RETRY. */
void gw_client_on_accept(struct gw *g, struct io_uring_cqe *cqe);
void gw_client_on_retry(struct gw *g, struct io_uring_cqe *cqe);

#endif
