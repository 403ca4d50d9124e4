// SPDX-License-Identifier: MIT
/* Block hash to value: linear probing, deletion by backward shift (no
 * tombstones), doubled at 3/4 full. */
#include "sim_bmap.h"

#include <stdlib.h>
#include <string.h>

#include "kvsplice/hash.h"

static uint32_t home(const struct sim_bmap *m, uint64_t key)
{
	return (uint32_t)kvs_fmix64(key) & m->mask;
}

static int alloc_slots(struct sim_bmap *m, uint32_t size)
{
	m->keys = malloc(sizeof(*m->keys) * size);
	m->vals = malloc(sizeof(*m->vals) * size);
	if (!m->keys || !m->vals) {
		free(m->keys);
		free(m->vals);
		return -1;
	}
	memset(m->vals, 0xff, sizeof(*m->vals) * size); /* all SIM_BMAP_NONE */
	m->mask = size - 1;
	m->n = 0;
	return 0;
}

int sim_bmap_init(struct sim_bmap *m)
{
	return alloc_slots(m, 1024);
}

void sim_bmap_free(struct sim_bmap *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = NULL;
	m->vals = NULL;
}

static uint32_t slot_of(const struct sim_bmap *m, uint64_t key)
{
	uint32_t i = home(m, key);

	while (m->vals[i] != SIM_BMAP_NONE && m->keys[i] != key)
		i = (i + 1) & m->mask;
	return i;
}

uint32_t sim_bmap_get(const struct sim_bmap *m, uint64_t key)
{
	return m->vals[slot_of(m, key)];
}

static int grow(struct sim_bmap *m)
{
	struct sim_bmap old = *m;
	uint32_t i;

	if (alloc_slots(m, (old.mask + 1) * 2)) {
		*m = old;
		return -1;
	}
	for (i = 0; i <= old.mask; i++)
		if (old.vals[i] != SIM_BMAP_NONE)
			sim_bmap_put(m, old.keys[i], old.vals[i]);
	sim_bmap_free(&old);
	return 0;
}

int sim_bmap_put(struct sim_bmap *m, uint64_t key, uint32_t v)
{
	uint32_t i;

	if ((m->n + 1) * 4ull > (m->mask + 1) * 3ull && grow(m))
		return -1;
	i = slot_of(m, key);
	if (m->vals[i] == SIM_BMAP_NONE) {
		m->keys[i] = key;
		m->n++;
	}
	m->vals[i] = v;
	return 0;
}

void sim_bmap_del(struct sim_bmap *m, uint64_t key)
{
	uint32_t i = slot_of(m, key), j = i, h;

	if (m->vals[i] == SIM_BMAP_NONE)
		return;
	m->n--;
	/* Shift back every later entry of the run that may sit at i. */
	for (;;) {
		m->vals[i] = SIM_BMAP_NONE;
		for (;;) {
			j = (j + 1) & m->mask;
			if (m->vals[j] == SIM_BMAP_NONE)
				return;
			h = home(m, m->keys[j]);
			/* j's entry stays if its home lies cyclically in (i, j] */
			if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
				continue;
			break;
		}
		m->keys[i] = m->keys[j];
		m->vals[i] = m->vals[j];
		i = j;
	}
}
