// SPDX-License-Identifier: MIT
/* The prefix hash: frozen known answers (gateways and backends of different
 * builds must agree, so a change must be deliberate), the chain property,
 * tenant separation and the checkpoint schedule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "kvsplice/hash.h"
#include "prompt.h"

static void known_answers(void **state)
{
	unsigned char p[256];
	uint64_t h[4];
	int i;

	(void)state;
	for (i = 0; i < 256; i++)
		p[i] = (unsigned char)i;
	assert_true(kvs_seed(0, 0) == 0xd6d159a7c19aeaf0ull);
	assert_true(kvs_seed(7, 0x1122334455667788ull) == 0x5a54bd557aaa2276ull);
	assert_int_equal(kvs_prefix_hashes(kvs_seed(0, 0), p, 256, h, 4), 4);
	/* KVS_HASH_VERSION 2 (version 1: 0x3f5a4fd6ffdc1291, ...) */
	assert_int_equal(KVS_HASH_VERSION, 2);
	assert_true(h[0] == 0xcaa113623ebf515cull);
	assert_true(h[1] == 0xc5f245f472f5835dull);
	assert_true(h[2] == 0x2d219b914ffa9b36ull);
	assert_true(h[3] == 0x7a414d949cd67306ull);
	assert_true(kvs_key_hash(kvs_seed(0, 0), 42) == 0x0324c92427441383ull);
}

/*
 * The block digest works on four lanes side by side: it must still see
 * every bit, and where each word is. Every single-bit flip, and every swap
 * of two different words (within a lane, across lanes), changes the block's
 * hash.
 */
static void every_bit_and_word_position_counts(void **state)
{
	unsigned char blk[KVS_BLOCK_BYTES], x[KVS_BLOCK_BYTES];
	uint64_t base, w[KVS_BLOCK_BYTES / 8];
	int i, j;

	(void)state;
	kvs_text_fill(99, blk, sizeof(blk));
	base = kvs_block_hash(kvs_seed(0, 0), blk);
	for (i = 0; i < KVS_BLOCK_BYTES * 8; i++) {
		memcpy(x, blk, sizeof(x));
		x[i / 8] ^= (unsigned char)(1u << (i % 8));
		assert_true(kvs_block_hash(kvs_seed(0, 0), x) != base);
	}
	memcpy(w, blk, sizeof(w));
	for (i = 0; i < KVS_BLOCK_BYTES / 8; i++) {
		for (j = i + 1; j < KVS_BLOCK_BYTES / 8; j++) {
			uint64_t s[KVS_BLOCK_BYTES / 8];

			if (w[i] == w[j])
				continue;
			memcpy(s, w, sizeof(s));
			s[i] = w[j];
			s[j] = w[i];
			assert_true(kvs_block_hash(kvs_seed(0, 0), (unsigned char *)s) != base);
		}
	}
}

/* Equal prefix -> equal hashes up to the first differing block, different
 * from there on. */
static void chain_property(void **state)
{
	unsigned char a[64 * 10], b[64 * 10];
	uint64_t ha[10], hb[10];
	int i;

	(void)state;
	kvs_text_fill(1, a, sizeof(a));
	memcpy(b, a, sizeof(b));
	b[64 * 6 + 5] ^= 1; /* differ in block 6 */
	kvs_prefix_hashes(kvs_seed(1, 2), a, sizeof(a), ha, 10);
	kvs_prefix_hashes(kvs_seed(1, 2), b, sizeof(b), hb, 10);
	for (i = 0; i < 6; i++)
		assert_true(ha[i] == hb[i]);
	for (i = 6; i < 10; i++)
		assert_true(ha[i] != hb[i]);
	/* A block equal in content but after a different history differs. */
	memcpy(b, a, sizeof(b));
	b[0] ^= 1;
	kvs_prefix_hashes(kvs_seed(1, 2), b, sizeof(b), hb, 10);
	assert_true(ha[9] != hb[9]);
}

static void tenants_and_models_separate(void **state)
{
	unsigned char p[64 * 4];
	uint64_t h1[4], h2[4], h3[4];

	(void)state;
	kvs_text_fill(3, p, sizeof(p));
	kvs_prefix_hashes(kvs_seed(0, 1), p, sizeof(p), h1, 4);
	kvs_prefix_hashes(kvs_seed(0, 2), p, sizeof(p), h2, 4);
	kvs_prefix_hashes(kvs_seed(1, 1), p, sizeof(p), h3, 4);
	for (int i = 0; i < 4; i++) {
		assert_true(h1[i] != h2[i]);
		assert_true(h1[i] != h3[i]);
	}
	assert_true(kvs_key_hash(kvs_seed(0, 1), 9) != kvs_key_hash(kvs_seed(0, 2), 9));
}

static void partial_block_and_max(void **state)
{
	unsigned char p[64 * 3 + 63];
	uint64_t h[8];

	(void)state;
	kvs_text_fill(4, p, sizeof(p));
	assert_int_equal(kvs_prefix_hashes(0, p, sizeof(p), h, 8), 3);
	assert_int_equal(kvs_prefix_hashes(0, p, 63, h, 8), 0);
	assert_int_equal(kvs_prefix_hashes(0, p, 0, h, 8), 0);
	assert_int_equal(kvs_prefix_hashes(0, p, sizeof(p), h, 2), 2);
	for (int i = 0; i < 3; i++)
		assert_true(h[i] != 0);
}

static void checkpoint_schedule(void **state)
{
	static const uint32_t want[KVS_MAX_CHECKPOINTS] = {
		4, 8, 16, 32, 64, 128, 192, 256, 320, 384, 448, 512, 640, 768, 896, 1024,
	};

	(void)state;
	for (int j = 0; j < KVS_MAX_CHECKPOINTS; j++)
		assert_int_equal(kvs_checkpoint(j), want[j]);
	assert_int_equal(kvs_checkpoint(KVS_MAX_CHECKPOINTS - 1), KVS_MAX_WINDOW_BLOCKS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(known_answers),
		cmocka_unit_test(every_bit_and_word_position_counts),
		cmocka_unit_test(chain_property),
		cmocka_unit_test(tenants_and_models_separate),
		cmocka_unit_test(partial_block_and_max),
		cmocka_unit_test(checkpoint_schedule),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
