// SPDX-License-Identifier: MIT
/*
 * hash_check: proves that the kernel's prefix hashes equal userspace's.
 * Sends requests with random prompts (random bytes, random model and salt,
 * lengths from 0 to past the hashing window, on and off block boundaries)
 * through a running gateway, one at a time; after each response, reads the
 * per-CPU chain map the verdict filled and compares every block hash with
 * kvs_prefix_hashes() computed here.
 *
 *   hash_check ADDR:PORT PIN_DIR COUNT SEED
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec.h"
#include "kvsplice/hash.h"
#include "kvsplice/maps.h"
#include "netutil.h"
#include "pins.h"
#include "prompt.h"

/* Lengths that matter: empty, sub-block, exact blocks, one byte either side
 * of a block, of the kernel's read batch and of the window, and beyond the
 * window. */
static size_t pick_len(uint64_t *rng)
{
	static const size_t edges[] = {
		0,
		1,
		63,
		64,
		65,
		127,
		128,
		4096,
		4095,
		4097,
		KVS_HASH_BATCH * 64 - 1, /* the kernel reads a batch of blocks at once */
		KVS_HASH_BATCH * 64,
		KVS_HASH_BATCH * 64 + 1,
		(KVS_HASH_BATCH + 1) * 64,
		(2 * KVS_HASH_BATCH - 1) * 64,
		KVS_MAX_WINDOW_BLOCKS * 64 - 1,
		KVS_MAX_WINDOW_BLOCKS * 64,
		KVS_MAX_WINDOW_BLOCKS * 64 + 1,
		KVS_MAX_WINDOW_BLOCKS * 64 + 5000,
	};
	uint64_t r = kvs_splitmix64(rng);

	if (r % 3 == 0)
		return edges[(r >> 8) % (sizeof(edges) / sizeof(edges[0]))];
	return (size_t)((r >> 8) % (KVS_MAX_WINDOW_BLOCKS * 64 + 20000));
}

static int await_end(int fd, uint64_t id, struct kvs_buf *rx)
{
	const uint8_t *frame;
	struct kvs_msg m;
	int r;

	for (;;) {
		while ((r = kvs_next_frame(rx, KVS_MAX_PAYLOAD_LIMIT, &m, &frame)) > 0) {
			kvs_buf_consume(rx, KVS_HDR_LEN + (size_t)m.payload_len);
			if (m.req_id == id && (m.type == KVS_T_END || m.type == KVS_T_ERROR))
				return m.type == KVS_T_END ? 0 : -EIO;
		}
		if (r < 0)
			return -EPROTO;
		if (kvs_buf_recv(rx, fd, 65536) <= 0)
			return -EPIPE;
	}
}

int main(int argc, char **argv)
{
	int ncpu = libbpf_num_possible_cpus(), fd, chain_fd, c, i, failures = 0;
	struct kvs_chain *per;
	uint64_t rng, count, want[KVS_MAX_WINDOW_BLOCKS];
	struct kvs_addr addr;
	struct kvs_buf rx, tx;
	uint8_t *prompt;
	__u32 zero = 0;

	if (argc != 5 || kvs_parse_addr(argv[1], &addr)) {
		fprintf(stderr, "usage: hash_check ADDR:PORT PIN_DIR COUNT SEED\n");
		return 2;
	}
	count = strtoull(argv[3], NULL, 10);
	rng = strtoull(argv[4], NULL, 10);
	chain_fd = kvs_pin_open(argv[2], KVS_MAP_CHAIN);
	fd = kvs_connect(&addr, 2000);
	per = calloc((size_t)ncpu, sizeof(*per));
	prompt = malloc(KVS_MAX_WINDOW_BLOCKS * 64 + 20000);
	if (chain_fd < 0 || fd < 0 || !per || !prompt) {
		fprintf(stderr, "hash_check: setup failed (chain map %d, connect %d)\n", chain_fd,
			fd);
		return 1;
	}
	kvs_buf_init(&rx, 0);
	kvs_buf_init(&tx, 0);
	for (uint64_t id = 1; id <= count; id++) {
		size_t len = pick_len(&rng), n, got_cpu = SIZE_MAX;
		struct kvs_msg m = {
			.type = KVS_T_REQUEST,
			.req_id = id,
			.model_id = (uint32_t)kvs_splitmix64(&rng),
			.cache_salt = kvs_splitmix64(&rng),
			.max_tokens = 0,
		};

		for (size_t k = 0; k < len; k += 8) {
			uint64_t w = kvs_splitmix64(&rng);

			memcpy(prompt + k, &w, len - k < 8 ? len - k : 8);
		}
		kvs_buf_consume(&tx, tx.len);
		if (kvs_put_frame(&tx, &m, prompt, (uint32_t)len) ||
		    kvs_write_all(fd, kvs_buf_head(&tx), tx.len) || await_end(fd, id, &rx)) {
			fprintf(stderr, "hash_check: request %llu (len %zu) failed\n",
				(unsigned long long)id, len);
			return 1;
		}
		if (bpf_map_lookup_elem(chain_fd, &zero, per)) {
			perror("hash_check: chain map");
			return 1;
		}
		for (c = 0; c < ncpu; c++)
			if (per[c].req_id == id)
				got_cpu = (size_t)c;
		if (got_cpu == SIZE_MAX) {
			fprintf(stderr, "hash_check: request %llu: the kernel recorded no chain\n",
				(unsigned long long)id);
			failures++;
			continue;
		}
		n = kvs_prefix_hashes(kvs_seed(m.model_id, m.cache_salt), prompt, len, want,
				      KVS_MAX_WINDOW_BLOCKS);
		if (per[got_cpu].n != n) {
			fprintf(stderr,
				"hash_check: request %llu (len %zu): kernel hashed %u blocks, "
				"userspace %zu\n",
				(unsigned long long)id, len, per[got_cpu].n, n);
			failures++;
			continue;
		}
		for (i = 0; i < (int)n; i++) {
			if (per[got_cpu].h[i] != want[i]) {
				fprintf(stderr,
					"hash_check: request %llu (len %zu): block %d: kernel "
					"%016llx, userspace %016llx\n",
					(unsigned long long)id, len, i,
					(unsigned long long)per[got_cpu].h[i],
					(unsigned long long)want[i]);
				failures++;
				break;
			}
		}
	}
	printf("hash_check: %llu prompts, %d mismatches\n", (unsigned long long)count, failures);
	kvs_buf_free(&rx);
	kvs_buf_free(&tx);
	free(prompt);
	free(per);
	close(fd);
	close(chain_fd);
	return failures ? 1 : 0;
}
