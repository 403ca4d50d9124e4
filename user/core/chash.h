/* SPDX-License-Identifier: MIT */
/*
 * Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam,
 * 2018): a key goes to the first backend clockwise from its ring position
 * whose load is below ceil(balance * (total + 1) / n). Ring positions come
 * from the backends' names (ADDR:PORT), so every gateway with the same
 * backend list places cold prefixes the same way without talking. Pure.
 */
#ifndef KVS_CHASH_H
#define KVS_CHASH_H

#include <stdint.h>

#define KVS_CHASH_VNODES 160
#define KVS_CHASH_DEFAULT_BALANCE 1.25

struct kvs_chash_point {
	uint64_t pos;
	uint32_t backend;
};

struct kvs_chash {
	uint32_t nbackends;
	uint32_t npoints;
	struct kvs_chash_point *ring; /* sorted by pos */
};

/* 0 or -ENOMEM / -EINVAL. names[i] names backend i; a NULL name is a slot
 * with no backend (removed at run time): it gets no ring positions. */
int kvs_chash_build(struct kvs_chash *c, const char *const *names, uint32_t n, uint32_t vnodes);
void kvs_chash_free(struct kvs_chash *c);

/*
 * The backend for key, or -1 when none is eligible. load[i] is backend i's
 * outstanding work (any unit, the same for all); eligible[i] != 0 for
 * backends that may take new work. balance >= 1 (1.25 allows 25% above the
 * mean).
 */
int kvs_chash_pick(const struct kvs_chash *c, uint64_t key, const uint64_t *load,
		   const uint8_t *eligible, double balance);

/* 64-bit hash of a string (FNV-1a, then avalanched). */
uint64_t kvs_str_hash(const char *s);

#endif
