/* SPDX-License-Identifier: MIT */
/* The --metrics endpoint: one scrape a connection, the exposition
 * rendered from the maps and the controller's counters. */
#ifndef KVS_GW_SCRAPE_H
#define KVS_GW_SCRAPE_H

#include "gw.h"

/* Completion handler: OP_METRICS_ACCEPT. */
void gw_scrape_on_accept(struct gw *g, struct io_uring_cqe *cqe);

#endif
