/* SPDX-License-Identifier: MIT */
/* Reloads: the configuration read again, its backend list and the
 * controller's own limits applied at once, the rest named. */
#ifndef KVS_GW_RELOAD_H
#define KVS_GW_RELOAD_H

#include "gw.h"

/* Re-reads the configuration (gw_hooks.load) and applies its backend
 * list. 0 or -errno; a message for the operator in msg either way. */
int gw_reload(struct gw *g, char *msg, size_t len);

#endif
