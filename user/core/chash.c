// SPDX-License-Identifier: MIT
/* Consistent hashing with bounded loads: where a new prefix goes. */
#include "chash.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kvsplice/hash.h"

uint64_t kvs_str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 0x100000001b3ull;
	}
	return kvs_fmix64(h);
}

static int point_cmp(const void *a, const void *b)
{
	const struct kvs_chash_point *x = a, *y = b;

	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	return x->backend < y->backend ? -1 : (x->backend > y->backend);
}

int kvs_chash_build(struct kvs_chash *c, const char *const *names, uint32_t n, uint32_t vnodes)
{
	char label[320];
	uint32_t i, v, k = 0;

	c->ring = NULL;
	c->nbackends = c->npoints = 0;
	if (n == 0 || vnodes == 0)
		return -EINVAL;
	c->ring = calloc((size_t)n * vnodes, sizeof(*c->ring));
	if (!c->ring)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		for (v = 0; names[i] && v < vnodes; v++) {
			snprintf(label, sizeof(label), "%s#%u", names[i], v);
			c->ring[k].pos = kvs_str_hash(label);
			c->ring[k].backend = i;
			k++;
		}
	}
	qsort(c->ring, k, sizeof(*c->ring), point_cmp);
	c->nbackends = n;
	c->npoints = k;
	return 0;
}

void kvs_chash_free(struct kvs_chash *c)
{
	free(c->ring);
	c->ring = NULL;
	c->nbackends = c->npoints = 0;
}

int kvs_chash_pick(const struct kvs_chash *c, uint64_t key, const uint64_t *load,
		   const uint8_t *eligible, double balance)
{
	uint64_t total = 0, bound;
	uint32_t i, n_ok = 0, lo = 0, hi = c->npoints, start;

	for (i = 0; i < c->nbackends; i++) {
		if (eligible[i]) {
			n_ok++;
			total += load[i];
		}
	}
	if (n_ok == 0 || c->npoints == 0)
		return -1;
	if (balance < 1.0)
		balance = 1.0;
	bound = (uint64_t)ceil(balance * (double)(total + 1) / n_ok);

	/* First point at or after key (binary search), then walk clockwise. */
	key = kvs_fmix64(key);
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (c->ring[mid].pos < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	start = lo % c->npoints;
	for (i = 0; i < c->npoints; i++) {
		const struct kvs_chash_point *p = &c->ring[(start + i) % c->npoints];

		if (eligible[p->backend] && load[p->backend] + 1 <= bound)
			return (int)p->backend;
	}
	return -1; /* unreachable: some eligible backend is at or below the mean */
}
