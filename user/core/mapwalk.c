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

struct read_all {
	size_t ksz, vsz, n, cap;
	uint8_t *keys, *vals;
};

static int append(void *ctx, const void *keys, const void *vals, uint32_t n)
{
	struct read_all *a = ctx;

	if (a->n + n > a->cap) {
		size_t cap = a->cap ? a->cap : 1024;
		uint8_t *k, *v;

		while (cap < a->n + n)
			cap *= 2;
		k = realloc(a->keys, cap * a->ksz);
		if (k)
			a->keys = k;
		v = k ? realloc(a->vals, cap * a->vsz) : NULL;
		if (!v)
			return -ENOMEM;
		a->vals = v;
		a->cap = cap;
	}
	memcpy(a->keys + a->n * a->ksz, keys, n * a->ksz);
	memcpy(a->vals + a->n * a->vsz, vals, n * a->vsz);
	a->n += n;
	return 0;
}

int kvs_map_read_all(int fd, size_t ksz, size_t vsz, void **keys, void **vals, size_t *n)
{
	struct read_all a = { .ksz = ksz, .vsz = vsz };
	int err = kvs_map_walk_batches(fd, ksz, vsz, 4096, append, &a);

	if (err) {
		free(a.keys);
		free(a.vals);
		a.keys = a.vals = NULL;
		a.n = 0;
	}
	*keys = a.keys;
	*vals = a.vals;
	*n = a.n;
	return err;
}
