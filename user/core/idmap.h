/* SPDX-License-Identifier: MIT */
/* A map from 64-bit ids (socket cookies) to pointers: open addressing,
 * linear probing, backward-shift deletion, grows at 50% load. Pure. */
#ifndef KVS_IDMAP_H
#define KVS_IDMAP_H

#include <stdint.h>

struct kvs_idmap_slot {
	uint64_t id; /* 0 = empty: socket cookies start at 1 */
	void *val;
};

struct kvs_idmap {
	struct kvs_idmap_slot *slots;
	uint32_t mask;
	uint32_t count;
};

int kvs_idmap_init(struct kvs_idmap *m, uint32_t capacity);
void kvs_idmap_free(struct kvs_idmap *m);
/* 0, -EINVAL for id 0, -ENOMEM; replaces an existing entry. */
int kvs_idmap_put(struct kvs_idmap *m, uint64_t id, void *val);
void *kvs_idmap_get(const struct kvs_idmap *m, uint64_t id);
void kvs_idmap_del(struct kvs_idmap *m, uint64_t id);

#endif
