/* SPDX-License-Identifier: MIT */
/* Idle client connections closed (--idle-timeout-ms). */
#ifndef KVS_GW_IDLE_H
#define KVS_GW_IDLE_H

#include "gw.h"

/* On the tick: at most once a period (a quarter of the timeout, at most a
 * second), clients idle for the timeout are answered timeout and closed. */
void gw_idle_tick(struct gw *g, uint64_t now);

#endif
