// SPDX-License-Identifier: MIT
/*
 * routes_fill: fills a pinned routes map with N void routes (their gen
 * matches no backend's, so the verdict never follows one), in batches, as
 * a fleet's worth of learnt prefixes would fill it: for measuring what
 * walks the map (scripts/bench-scrape.sh).
 *
 *   routes_fill PINNED_ROUTES_MAP N
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvsplice/maps.h"

#define BATCH 4096

int main(int argc, char **argv)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
	static __u64 keys[BATCH];
	static struct kvs_route vals[BATCH];
	long n, i;
	int fd;

	if (argc != 3 || (n = atol(argv[2])) < 0) {
		fprintf(stderr, "usage: routes_fill PINNED_ROUTES_MAP N\n");
		return 2;
	}
	fd = bpf_obj_get(argv[1]);
	if (fd < 0) {
		fprintf(stderr, "routes_fill: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	for (i = 0; i < n; i += BATCH) {
		__u32 c = n - i < BATCH ? (__u32)(n - i) : BATCH;

		for (__u32 j = 0; j < c; j++) {
			keys[j] = 0x9e3779b97f4a7c15ull * (__u64)(i + j + 1);
			vals[j] = (struct kvs_route){ .depth_blocks = 16, .gen = 0xdead0000u };
		}
		if (bpf_map_update_batch(fd, keys, vals, &c, &opts)) {
			fprintf(stderr, "routes_fill: update: %s\n", strerror(errno));
			return 1;
		}
	}
	return 0;
}
