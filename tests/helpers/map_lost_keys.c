// SPDX-License-Identifier: MIT
/*
 * map_lost_keys: counts the keys a pinned hash map lists that a lookup of
 * them does not find, twice over: an element filed under another key's
 * hash (its key rewritten while the kernel inserted it:
 * bpf/datapath/route.bpf.h, learn_routes) stays listed and unfindable,
 * where a key deleted between the walk and the lookup is gone from the
 * second walk. Walked by bucket (user/core/mapwalk.c): a walk by
 * bpf_map_get_next_key cycles on such a key.
 *
 *   map_lost_keys PINNED_MAP
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mapwalk.h"

struct walk {
	int fd;
	__u32 ksz, vsz;
	unsigned char *lost; /* keys not found, ksz bytes each */
	size_t nlost, cap;
	bool second; /* the second walk */
	size_t nagain;
	void *val;
};

static int is_lost(const struct walk *w, const unsigned char *k)
{
	for (size_t i = 0; i < w->nlost; i++)
		if (!memcmp(w->lost + i * w->ksz, k, w->ksz))
			return 1;
	return 0;
}

static int check(void *ctx, const void *keys, const void *vals, uint32_t n)
{
	struct walk *w = ctx;

	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *k = (const unsigned char *)keys + (size_t)i * w->ksz;

		if (bpf_map_lookup_elem(w->fd, k, w->val) == 0)
			continue;
		if (w->second) { /* lost both times */
			w->nagain += is_lost(w, k);
			continue;
		}
		if (w->nlost == w->cap) {
			size_t cap = w->cap ? w->cap * 2 : 64;
			unsigned char *nl = realloc(w->lost, cap * w->ksz);

			if (!nl)
				return -ENOMEM;
			w->lost = nl;
			w->cap = cap;
		}
		memcpy(w->lost + w->nlost++ * w->ksz, k, w->ksz);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);
	struct walk w = { 0 };
	int err, rc = 1;

	if (argc != 2) {
		fprintf(stderr, "usage: map_lost_keys PINNED_MAP\n");
		return 2;
	}
	w.fd = bpf_obj_get(argv[1]);
	memset(&info, 0, sizeof(info));
	if (w.fd < 0 || bpf_obj_get_info_by_fd(w.fd, &info, &len)) {
		fprintf(stderr, "map_lost_keys: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	w.ksz = info.key_size;
	w.vsz = info.value_size;
	w.val = malloc(w.vsz);
	err = w.val ? kvs_map_walk_batches(w.fd, w.ksz, w.vsz, 4096, check, &w) : -ENOMEM;
	if (!err && w.nlost) {
		w.second = true;
		err = kvs_map_walk_batches(w.fd, w.ksz, w.vsz, 4096, check, &w);
	}
	if (err)
		fprintf(stderr, "map_lost_keys: %s: %s\n", argv[1], strerror(-err));
	else {
		printf("%zu\n", w.nagain);
		rc = 0;
	}
	free(w.lost);
	free(w.val);
	return rc;
}
