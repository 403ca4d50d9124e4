// SPDX-License-Identifier: MIT
/* Client connections counted by source address (--max-source-conns). */
#include "sources.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "netutil.h"

bool kvs_source_of(const struct sockaddr_storage *ss, struct kvs_source_key *k)
{
	uint8_t a[16];
	int family = kvs_addr_of(ss, a);

	memset(k, 0, sizeof(*k));
	if (family == 6) { /* its /64; family 6 in byte 15 */
		memcpy(k->b, a, 8);
		k->b[15] = 6;
	} else if (family == 4) {
		k->b[0] = 4;
		memcpy(k->b + 12, a, 4);
	}
	return family != 0;
}

static uint32_t hash(const struct kvs_source_key *k)
{
	uint64_t x, y;

	memcpy(&x, k->b, 8);
	memcpy(&y, k->b + 8, 8);
	x ^= y * 0x9e3779b97f4a7c15ull;
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(x ^ (x >> 29));
}

/* Where k is, or the empty slot where it would go. */
static struct kvs_source *find(const struct kvs_sources *s, const struct kvs_source_key *k)
{
	uint32_t mask = s->cap - 1, i = hash(k) & mask;

	while (s->slot[i].conns && memcmp(&s->slot[i].key, k, sizeof(*k)))
		i = (i + 1) & mask;
	return &s->slot[i];
}

static int grow(struct kvs_sources *s)
{
	struct kvs_sources n = { .cap = s->cap ? s->cap * 2 : 64, .n = s->n };

	n.slot = calloc(n.cap, sizeof(*n.slot));
	if (!n.slot)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->cap; i++)
		if (s->slot[i].conns)
			*find(&n, &s->slot[i].key) = s->slot[i];
	free(s->slot);
	*s = n;
	return 0;
}

int kvs_sources_add(struct kvs_sources *s, const struct kvs_source_key *k)
{
	struct kvs_source *e;

	/* At most half full: probes stay short. */
	if ((s->n + 1) * 2 > s->cap && grow(s))
		return -ENOMEM;
	e = find(s, k);
	if (!e->conns) {
		e->key = *k;
		s->n++;
	}
	return (int)++e->conns;
}

/* Linear probing without tombstones: the entries after a freed slot, up to
 * the next empty one, move back where a search for them would look. */
static void remove_at(struct kvs_sources *s, uint32_t i)
{
	uint32_t mask = s->cap - 1, j = i;

	s->slot[i].conns = 0;
	for (;;) {
		uint32_t home;

		j = (j + 1) & mask;
		if (!s->slot[j].conns)
			return;
		home = hash(&s->slot[j].key) & mask;
		/* j's entry may fill i unless its home lies in (i, j]. */
		if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
			s->slot[i] = s->slot[j];
			s->slot[j].conns = 0;
			i = j;
		}
	}
}

void kvs_sources_del(struct kvs_sources *s, const struct kvs_source_key *k)
{
	struct kvs_source *e;

	if (!s->cap)
		return;
	e = find(s, k);
	if (!e->conns || --e->conns)
		return;
	s->n--;
	remove_at(s, (uint32_t)(e - s->slot));
}

uint32_t kvs_sources_count(const struct kvs_sources *s, const struct kvs_source_key *k)
{
	return s->cap ? find(s, k)->conns : 0;
}

void kvs_sources_free(struct kvs_sources *s)
{
	free(s->slot);
	memset(s, 0, sizeof(*s));
}
