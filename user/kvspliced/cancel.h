/* SPDX-License-Identifier: MIT */
/* CANCELs for the requests the gateway ended itself while their backend may
 * still be working on them, on a fresh connection to that backend. */
#ifndef KVS_GW_CANCEL_H
#define KVS_GW_CANCEL_H

#include "gw.h"

/* A request the gateway ended: its client's connection and id. */
struct gw_ended {
	uint64_t client, req_id;
};

/* CANCELs for reqs[0..n), all of backend b (its connections already
 * closed), written on a connection made for them and closed at once; best
 * effort (a backend that is gone refuses it). How many were written now:
 * 0 too when its handshake is still under way (the event loop writes them
 * once it is over, within GW_CONNECT_TIMEOUT_MS, and logs cancels_sent). */
uint32_t gw_cancel_ended(struct gw *g, uint32_t b, const struct gw_ended *reqs, uint32_t n);

#endif
