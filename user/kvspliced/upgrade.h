/* SPDX-License-Identifier: MIT */
/* Upgrades: a successor started from the program file takes over. */
#ifndef KVS_GW_UPGRADE_H
#define KVS_GW_UPGRADE_H

#include "gw.h"

/* Starts this program's file anew (a new binary, if one was installed) with
 * the same arguments and --takeover: it takes every socket over and this
 * controller exits. Returns the successor's pid, or -errno; a message for
 * the operator in msg either way. */
int gw_upgrade(struct gw *g, char *msg, size_t len);
/* On the tick: a successor that exited means the upgrade failed; this
 * controller carries on. One that has not begun taking over by its
 * deadline (KVSPLICED_UPGRADE_TIMEOUT_MS in the environment, default 25 s)
 * is killed first, so that it does not hold off every later upgrade. */
void gw_upgrade_reap(struct gw *g);
/* A hand-over began on socket s: if its peer is the successor, it has no
 * deadline any more (it is never killed mid-hand-over; if that fails, it
 * exits by itself). */
void gw_upgrade_began(struct gw *g, int s);

#endif
