// SPDX-License-Identifier: MIT
/* A BPF map read in batches, by bucket (bpf_map_lookup_batch). */
#include <bpf/bpf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mapwalk.h"

int kvs_map_walk_batches(int fd, size_t ksz, size_t vsz, uint32_t batch,
			 int (*fn)(void *ctx, const void *keys, const void *vals, uint32_t n),
			 void *ctx)
{
	uint8_t *keys = malloc(ksz * batch), *vals = malloc(vsz * batch);
	uint8_t in[16], out[16]; /* batch cursors: a key's size suffices */
	bool first = true;
	int err = keys && vals ? 0 : -ENOMEM;

	while (!err) {
		__u32 count = batch;
		int r = bpf_map_lookup_batch(fd, first ? NULL : in, out, keys, vals, &count, NULL);

		if (r && errno != ENOENT) {
			err = -errno;
			break;
		}
		if (count)
			err = fn(ctx, keys, vals, count);
		if (r) /* ENOENT: that was the last batch */
			break;
		memcpy(in, out, sizeof(in));
		first = false;
	}
	free(keys);
	free(vals);
	return err;
}
