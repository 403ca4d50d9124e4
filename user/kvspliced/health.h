/* SPDX-License-Identifier: MIT */
/* Health checks: a PING to each backend through the kernel, ejection of one
 * that stops answering or says it is not ready. */
#ifndef KVS_GW_HEALTH_H
#define KVS_GW_HEALTH_H

#include "gw.h"

/* On the tick: PINGs due, backends silent for three intervals ejected. */
void gw_health_tick(struct gw *g, uint64_t now);
/* A backend's PONG to a check (g->on_backend_pong). */
void gw_health_on_pong(struct gw *g, const struct kvs_msg *m, const uint8_t *payload);

#endif
