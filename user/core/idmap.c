// SPDX-License-Identifier: MIT
/* A map from socket cookies to pointers (open addressing). */
#include "idmap.h"

#include <errno.h>
#include <stdlib.h>

#include "kvsplice/hash.h"

int kvs_idmap_init(struct kvs_idmap *m, uint32_t capacity)
{
	uint32_t size = 16;

	while (size < 2 * capacity)
		size *= 2;
	m->slots = calloc(size, sizeof(*m->slots));
	if (!m->slots)
		return -ENOMEM;
	m->mask = size - 1;
	m->count = 0;
	return 0;
}

void kvs_idmap_free(struct kvs_idmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->count = 0;
}

static uint32_t home(const struct kvs_idmap *m, uint64_t id)
{
	return (uint32_t)kvs_fmix64(id) & m->mask;
}

static uint32_t find(const struct kvs_idmap *m, uint64_t id)
{
	uint32_t s = home(m, id);

	while (m->slots[s].id && m->slots[s].id != id)
		s = (s + 1) & m->mask;
	return s;
}

static int grow(struct kvs_idmap *m)
{
	struct kvs_idmap old = *m;
	uint32_t i;

	if (kvs_idmap_init(m, (old.mask + 1)))
		return *m = old, -ENOMEM;
	for (i = 0; i <= old.mask; i++)
		if (old.slots[i].id)
			m->slots[find(m, old.slots[i].id)] = old.slots[i];
	m->count = old.count;
	free(old.slots);
	return 0;
}

int kvs_idmap_put(struct kvs_idmap *m, uint64_t id, void *val)
{
	uint32_t s;

	if (!id)
		return -EINVAL;
	if (2 * (m->count + 1) > m->mask + 1 && grow(m))
		return -ENOMEM;
	s = find(m, id);
	if (!m->slots[s].id)
		m->count++;
	m->slots[s].id = id;
	m->slots[s].val = val;
	return 0;
}

void *kvs_idmap_get(const struct kvs_idmap *m, uint64_t id)
{
	return id ? m->slots[find(m, id)].val : NULL;
}

void kvs_idmap_del(struct kvs_idmap *m, uint64_t id)
{
	uint32_t s, j;

	if (!id)
		return;
	s = find(m, id);
	if (!m->slots[s].id)
		return;
	m->count--;
	for (j = s;;) {
		uint32_t h;

		j = (j + 1) & m->mask;
		if (!m->slots[j].id)
			break;
		h = home(m, m->slots[j].id);
		/* Move j into the hole unless its home lies cyclically in (s, j]. */
		if ((j > s && (h <= s || h > j)) || (j < s && h <= s && h > j)) {
			m->slots[s] = m->slots[j];
			s = j;
		}
	}
	m->slots[s].id = 0;
	m->slots[s].val = NULL;
}
