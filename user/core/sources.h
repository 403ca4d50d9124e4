/* SPDX-License-Identifier: MIT */
/*
 * Client connections counted by where they come from, for
 * --max-source-conns: a source is an IPv4 address, or an IPv6 /64 (one
 * host can pick any address in its /64, so counting single IPv6 addresses
 * would limit nothing). An IPv4-mapped IPv6 peer (a dual-stack listener's)
 * counts as its IPv4 address. kvspliced and kvsplice-http count with it;
 * each leaves its trusted sources uncounted (--front-source,
 * --trusted-source).
 */
#ifndef KVS_SOURCES_H
#define KVS_SOURCES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* A source: 16 bytes, IPv4 in the last 4 with family 4 in the first. */
struct kvs_source_key {
	uint8_t b[16];
};

struct kvs_source {
	struct kvs_source_key key;
	uint32_t conns; /* 0: an empty slot */
};

/* An open-addressing table, grown as sources come and never shrunk. */
struct kvs_sources {
	struct kvs_source *slot;
	uint32_t cap; /* a power of two, or 0 */
	uint32_t n;   /* sources with at least one connection */
};

/* The source ss belongs to. false for an address family that has none
 * (a Unix socket): such a client is not counted. */
bool kvs_source_of(const struct sockaddr_storage *ss, struct kvs_source_key *k);
/* One more connection from k: its count after, or -ENOMEM (not counted). */
int kvs_sources_add(struct kvs_sources *s, const struct kvs_source_key *k);
/* One connection from k less (it must have been added). */
void kvs_sources_del(struct kvs_sources *s, const struct kvs_source_key *k);
/* Connections counted for k. */
uint32_t kvs_sources_count(const struct kvs_sources *s, const struct kvs_source_key *k);
void kvs_sources_free(struct kvs_sources *s);

#endif
