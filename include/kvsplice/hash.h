/* SPDX-License-Identifier: MIT */
/*
 * The prefix hash: one header-only implementation compiled by clang for BPF
 * and by gcc for userspace, so the kernel, the controller and the backend
 * simulator agree bit for bit (tests/integration/test_hash_kernel.sh proves
 * it on the live kernel path).
 *
 * The prompt is cut into KVS_BLOCK_BYTES blocks (16 tokens of ~4 bytes, the
 * block size of vLLM's prefix cache). The hash of block i covers blocks
 * 0..i: h[i] = block_hash(h[i-1], block i), h[-1] = seed(model, salt). So
 * equal hash means equal prefix, for the same model and tenant. A trailing
 * partial block is not hashed: a prefix cache only reuses full blocks.
 */
#ifndef KVSPLICE_HASH_H
#define KVSPLICE_HASH_H

#include <linux/types.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kvsplice's prefix hash reads little-endian words; port kvs_load64 first"
#endif

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* The block loop must be unrolled for the BPF verifier and is hot in
 * userspace; each compiler is told so in its own words. */
#ifdef __clang__
#define KVS_UNROLL _Pragma("clang loop unroll(full)")
#else
#define KVS_UNROLL _Pragma("GCC unroll 8")
#endif

#define KVS_BYTES_PER_TOKEN 4
#define KVS_BLOCK_TOKENS 16
#define KVS_BLOCK_BYTES (KVS_BLOCK_TOKENS * KVS_BYTES_PER_TOKEN)
/* Blocks the verdict reads with one bpf_skb_load_bytes (bpf/datapath/
 * route.bpf.h, hash_batch); tests/helpers/hash_check.c tries the lengths
 * either side of a batch. */
#define KVS_HASH_BATCH 16

/* Prompt tokens the gateway assumes for a prompt of len bytes (rounded up):
 * the kernel charges and the controller decides by the same count. */
static __always_inline __u32 kvs_prompt_tokens(__u64 len)
{
	return (__u32)((len + KVS_BYTES_PER_TOKEN - 1) / KVS_BYTES_PER_TOKEN);
}

/* The kernel hashes at most this many blocks of a prompt (64 KiB, ~16k
 * tokens); the configured window may be smaller. */
#define KVS_MAX_WINDOW_BLOCKS 1024
/* Checkpoints within the maximum window (see kvs_is_checkpoint). */
#define KVS_MAX_CHECKPOINTS 16

#define KVS_P1 0x9E3779B185EBCA87ULL
#define KVS_P2 0xC2B2AE3D27D4EB4FULL
#define KVS_P3 0x165667B19E3779F9ULL
#define KVS_P4 0x85EBCA77C2B2AE63ULL
#define KVS_P5 0x27D4EB2F165667C5ULL

static __always_inline __u64 kvs_rotl64(__u64 x, int r)
{
	return (x << r) | (x >> (64 - r));
}

/* Final avalanche (the xxh64 one): every input bit affects every output bit. */
static __always_inline __u64 kvs_fmix64(__u64 h)
{
	h ^= h >> 33;
	h *= KVS_P2;
	h ^= h >> 29;
	h *= KVS_P3;
	h ^= h >> 32;
	return h;
}

/* 0 means "no hash" in the route map and in the controller's tables. */
static __always_inline __u64 kvs_nonzero(__u64 h)
{
	return h ? h : 1;
}

/* The chain's starting value: prompts with a different model or salt never
 * produce the same hashes, so they never share routes or cache entries. */
static __always_inline __u64 kvs_seed(__u32 model_id, __u64 cache_salt)
{
	return kvs_fmix64(cache_salt ^ kvs_rotl64((__u64)model_id * KVS_P1 + KVS_P4, 23));
}

static __always_inline __u64 kvs_load64(const unsigned char *p)
{
	__u64 w;

	__builtin_memcpy(&w, p, sizeof(w));
	return w;
}

/*
 * Which hash this is. Version 2 digests each block on its own (four
 * independent lanes), so only a short combining step is serial and a CPU
 * works on the next blocks meanwhile; version 1's single chain through
 * every word took the controller's whole slow-path budget (docs/
 * EVALUATION.md, "Slow path"). The values differ between versions: routes
 * learned under one never match the other (a take-over compares the
 * versions and flushes the routes).
 */
#define KVS_HASH_VERSION 2

/* One xxh64 round: a lane takes in one 8-byte word. */
static __always_inline __u64 kvs_round(__u64 acc, __u64 w)
{
	return kvs_rotl64(acc + w * KVS_P2, 31) * KVS_P1;
}

/*
 * Block i's own digest, independent of the blocks before it: four lanes of
 * two words each (word j to lane j % 4), merged with distinct rotations so
 * that moving a word to another lane or position changes the digest. Of
 * its words as 8-byte loads read them, for a caller whose bytes are 8-byte
 * aligned: the BPF verdict reads a batch of blocks into __u64s (a memcpy
 * from bytes of unknown alignment compiles to eight byte loads a word).
 */
static __always_inline __u64 kvs_block_digest_words(const __u64 *w)
{
	__u64 v0 = KVS_P1 + KVS_P2, v1 = KVS_P2, v2 = 0, v3 = 0 - KVS_P1;
	int i;

	KVS_UNROLL
	for (i = 0; i < KVS_BLOCK_BYTES / 32; i++) {
		v0 = kvs_round(v0, w[4 * i]);
		v1 = kvs_round(v1, w[4 * i + 1]);
		v2 = kvs_round(v2, w[4 * i + 2]);
		v3 = kvs_round(v3, w[4 * i + 3]);
	}
	return kvs_rotl64(v0, 1) + kvs_rotl64(v1, 7) + kvs_rotl64(v2, 12) + kvs_rotl64(v3, 18);
}

/* The same of a block's bytes, at any alignment. */
static __always_inline __u64 kvs_block_digest(const unsigned char *blk)
{
	__u64 w[KVS_BLOCK_BYTES / 8];
	int i;

	KVS_UNROLL
	for (i = 0; i < KVS_BLOCK_BYTES / 8; i++)
		w[i] = kvs_load64(blk + 8 * i);
	return kvs_block_digest_words(w);
}

/* h[i] from h[i-1] and the KVS_BLOCK_BYTES bytes of block i: the serial
 * step is an xor and the avalanche (a bijection, so distinct h[i-1] with
 * the same block never meet). */
static __always_inline __u64 kvs_block_hash(__u64 prev, const unsigned char *blk)
{
	return kvs_nonzero(kvs_fmix64(prev ^ kvs_block_digest(blk)));
}

/* kvs_block_hash of a block's words (kvs_block_digest_words). */
static __always_inline __u64 kvs_block_hash_words(__u64 prev, const __u64 *w)
{
	return kvs_nonzero(kvs_fmix64(prev ^ kvs_block_digest_words(w)));
}

/* Route-map key for a client's explicit cache key (docs/PROTOCOL.md,
 * "Prefix hashes": key(k)). */
static __always_inline __u64 kvs_key_hash(__u64 seed, __u64 cache_key)
{
	return kvs_nonzero(kvs_fmix64(seed ^ kvs_fmix64(cache_key + KVS_P3)));
}

/*
 * Block counts at which the kernel looks a prompt up in the route map, j =
 * 0..KVS_MAX_CHECKPOINTS-1: 4, 8, 16, 32 blocks, then every 64 blocks up to
 * 512, then every 128 up to 1024. Dense where templates and system prompts
 * end, sparse deeper, so lookups stay bounded while the matched depth stays
 * within 64-128 blocks (1-2k tokens) of the real shared prefix.
 */
static __always_inline __u32 kvs_checkpoint(__u32 j)
{
	if (j < 4)
		return 4u << j;
	if (j < 12)
		return 64 * (j - 3);
	return 512 + 128 * (j - 11);
}

/* The first checkpoint deeper than d blocks (kvs_checkpoint, without a
 * loop; past the last, every 128 blocks on, as a wider window's would be). */
static __always_inline __u32 kvs_checkpoint_after(__u32 d)
{
	if (d < 32)
		return d < 4 ? 4 : d < 8 ? 8 : d < 16 ? 16 : 32;
	if (d < 512)
		return (d / 64 + 1) * 64;
	return 512 + ((d - 512) / 128 + 1) * 128;
}

/*
 * Of the cached tokens a backend reported at a request's END, those the
 * gateway could not have expected: pred tokens were expected (a route's
 * depth, or the index's match), and the backend may hold more up to the
 * next checkpoint without the kernel knowing (a route names the deepest
 * checkpoint a prompt matched, and a conversation's next turn extends its
 * last prompt between two); what it holds beyond that, within the window
 * the prediction covers (window_tokens), is a surprise. A request placed
 * as new that finds its prefix cached counts almost whole: its backend
 * holds what the gateway's index forgot (the index is too small).
 */
static __always_inline __u64 kvs_unexpected_cached(__u64 pred, __u64 cached, __u64 window_tokens)
{
	/* pred errs low by under a block (the charge rounds up) */
	__u64 d = (pred + KVS_BLOCK_TOKENS - 1) / KVS_BLOCK_TOKENS;
	__u64 bound = (__u64)kvs_checkpoint_after((__u32)d) * KVS_BLOCK_TOKENS;

	if (cached > window_tokens)
		cached = window_tokens;
	return cached > bound ? cached - bound : 0;
}

/*
 * The controller's index of what each backend holds keeps one entry per
 * KVS_INDEX_GROUP blocks (64 tokens): the hash of each group's last block,
 * which stands for the whole prefix up to it. The depths the kernel routes
 * at, the checkpoints and a client's prefix-length hint, are whole groups,
 * so every route names an entry of the index, which withdraws the route
 * when it evicts the entry.
 */
#define KVS_INDEX_GROUP 4

/* A client's prefix-length hint (bytes) as the depth, in blocks, the
 * kernel looks it up at and the controller routes it at. */
static __always_inline __u32 kvs_hint_blocks(__u32 prefix_len)
{
	return prefix_len / KVS_BLOCK_BYTES / KVS_INDEX_GROUP * KVS_INDEX_GROUP;
}

#ifndef __bpf__
#include <stddef.h>
#include <stdint.h>

/*
 * Userspace: hash every full block of prompt[0..len) into out[0..n), where
 * n = min(len / KVS_BLOCK_BYTES, max). Returns n.
 */
static inline size_t kvs_prefix_hashes(uint64_t seed, const void *prompt, size_t len, uint64_t *out,
				       size_t max)
{
	const unsigned char *p = (const unsigned char *)prompt;
	size_t n = len / KVS_BLOCK_BYTES, i;
	uint64_t h = seed;

	if (n > max)
		n = max;
	for (i = 0; i < n; i++) {
		h = kvs_block_hash(h, p + i * KVS_BLOCK_BYTES);
		out[i] = h;
	}
	return n;
}
#endif

#endif /* KVSPLICE_HASH_H */
