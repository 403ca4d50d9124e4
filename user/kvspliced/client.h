/* SPDX-License-Identifier: MIT */
/* Clients accepted, each onto the data path new clients take. */
#ifndef KVS_GW_CLIENT_H
#define KVS_GW_CLIENT_H

#include "gw.h"

/* The multishot accept on the listening socket. 0 or -errno. */
int gw_clients_accept(struct gw *g);
/* Completion handler: OP_ACCEPT. */
void gw_client_on_accept(struct gw *g, struct io_uring_cqe *cqe);

#endif
