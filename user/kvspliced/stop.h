/* SPDX-License-Identifier: MIT */
/* A stop's client connections closed without losing a request (stop.c). */
#ifndef KVS_GW_STOP_H
#define KVS_GW_STOP_H

#include "gw.h"

/* The most a stop's clients take to close after the drain: told, then
 * quiet or cut off, then their own close awaited (stop.c). */
#define STOP_CLOSE_MAX_MS 3500

/* While stopping (from its first signal, then on every tick): each client
 * with nothing in flight is told its connection closes, then, once quiet
 * (or still sending at the limit), its sending side is shut and what it
 * sends after is dropped until it closes. */
void gw_stop_clients(struct gw *g, uint64_t now);
/* Client connections not closed yet. */
uint32_t gw_stop_clients_open(const struct gw *g);

#endif
