// SPDX-License-Identifier: MIT
/* Request rates of prefixes where the controller decides (hot_table.h). */
#include "hot_table.h"

#include <errno.h>
#include <stdlib.h>

#include "kvsplice/hash.h"
#include "kvsplice/place.h"

int kvs_hot_table_init(struct kvs_hot_table *t, uint32_t slots)
{
	uint32_t n = KVS_HOT_TABLE_PROBE;

	while (n < slots && n < (1u << 30))
		n <<= 1;
	t->e = calloc(n, sizeof(*t->e));
	t->mask = n - 1;
	t->replaced = 0;
	return t->e ? 0 : -ENOMEM;
}

void kvs_hot_table_free(struct kvs_hot_table *t)
{
	free(t->e);
	t->e = NULL;
}

static uint32_t home(const struct kvs_hot_table *t, uint64_t hash)
{
	return (uint32_t)kvs_fmix64(hash) & t->mask;
}

static struct kvs_hot_entry *find(const struct kvs_hot_table *t, uint64_t hash)
{
	uint32_t i, at = home(t, hash);

	for (i = 0; i < KVS_HOT_TABLE_PROBE; i++) {
		struct kvs_hot_entry *e = &t->e[(at + i) & t->mask];

		if (e->at && e->hash == hash)
			return e;
	}
	return NULL;
}

void kvs_hot_table_count(struct kvs_hot_table *t, uint64_t hash, uint64_t now)
{
	struct kvs_hot_entry *e = find(t, hash), *victim = NULL;
	uint64_t least = UINT64_MAX;
	uint32_t i, at = home(t, hash);

	if (!e) {
		for (i = 0; i < KVS_HOT_TABLE_PROBE; i++) {
			struct kvs_hot_entry *s = &t->e[(at + i) & t->mask];
			uint64_t n;

			if (!s->at || now < s->at || now - s->at >= 2 * KVS_HOT_WINDOW_NS) {
				victim = s;
				least = 0;
				break;
			}
			n = (uint64_t)s->cur + s->prev;
			if (n < least) {
				least = n;
				victim = s;
			}
		}
		if (least)
			t->replaced++;
		/* its first window starts now: left at 0 (an empty slot's
		 * mark) by a clock under a window from 0, as the simulator's
		 * virtual time is, the slot stayed empty to find() */
		*victim = (struct kvs_hot_entry){ .hash = hash, .at = now };
		e = victim;
	}
	kvs_hot_count(&e->at, &e->cur, &e->prev, now);
}

uint64_t kvs_hot_table_rate(const struct kvs_hot_table *t, uint64_t hash, uint64_t now)
{
	const struct kvs_hot_entry *e = find(t, hash);

	return e ? kvs_hot_rate(e->at, e->cur, e->prev, now) : 0;
}
