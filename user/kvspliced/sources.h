/* SPDX-License-Identifier: MIT */
/*
 * Client connections counted by where they come from, for
 * --max-source-conns: a source is an IPv4 address, or an IPv6 /64 (one
 * host can pick any address in its /64, so counting single IPv6 addresses
 * would limit nothing). An IPv4-mapped IPv6 peer (a dual-stack listener's)
 * counts as its IPv4 address. Fronts (--front-source) are not counted.
 */
#ifndef KVS_GW_SOURCES_H
#define KVS_GW_SOURCES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* A source: 16 bytes, IPv4 in the last 4 with family 4 in the first. */
struct gw_source_key {
	uint8_t b[16];
};

struct gw_source {
	struct gw_source_key key;
	uint32_t conns; /* 0: an empty slot */
};

/* An open-addressing table, grown as sources come and never shrunk. */
struct gw_sources {
	struct gw_source *slot;
	uint32_t cap; /* a power of two, or 0 */
	uint32_t n;   /* sources with at least one connection */
};

/* The source ss belongs to. false for an address family that has none
 * (a Unix socket): such a client is not counted. */
bool gw_source_of(const struct sockaddr_storage *ss, struct gw_source_key *k);
/* One more connection from k: its count after, or -ENOMEM (not counted). */
int gw_sources_add(struct gw_sources *s, const struct gw_source_key *k);
/* One connection from k less (it must have been added). */
void gw_sources_del(struct gw_sources *s, const struct gw_source_key *k);
/* Connections counted for k. */
uint32_t gw_sources_count(const struct gw_sources *s, const struct gw_source_key *k);
void gw_sources_free(struct gw_sources *s);

#endif
