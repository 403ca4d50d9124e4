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
 * controller carries on. */
void gw_upgrade_reap(struct gw *g);

#endif
