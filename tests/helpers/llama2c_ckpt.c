// SPDX-License-Identifier: MIT
/*
 * A llama2.c checkpoint with random weights, for a real inference server on
 * a machine with no model hub: llama.cpp's llama-convert-llama2c-to-ggml
 * turns it into a GGUF (with a vocabulary copied from a vocab GGUF of the
 * same size), which llama-server serves. The text it generates is
 * meaningless; its tokenizer, prefix cache and usage reports are real.
 *
 *   llama2c_ckpt OUT [--dim D] [--hidden H] [--layers L] [--heads N]
 *                    [--vocab V] [--seq-len S] [--seed X]
 *
 * The format is llama2.c's legacy one: seven int32 (dim, hidden_dim,
 * n_layers, n_heads, n_kv_heads, vocab_size > 0 for a classifier shared
 * with the embedding, seq_len), then float32 arrays: token embedding,
 * attention RMS norms, wq, wk, wv, wo, FFN RMS norms, w1, w2, w3, the final
 * RMS norm, and seq_len x head_size floats of RoPE tables the converter
 * skips. Deterministic for a seed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

struct cfg {
	int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

static uint64_t rng_state;

/* splitmix64: uniform in [-scale, scale]. */
static float rnd(float scale)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (float)(((double)(z >> 11) / (double)(1ull << 53)) * 2.0 - 1.0) * scale;
}

/* n floats: random in [-scale, scale], or all `fill` when scale is 0. */
static int put(FILE *f, uint64_t n, float scale, float fill)
{
	float buf[4096];

	while (n) {
		size_t k = n < 4096 ? (size_t)n : 4096;

		for (size_t i = 0; i < k; i++)
			buf[i] = scale > 0 ? rnd(scale) : fill;
		if (fwrite(buf, sizeof(float), k, f) != k)
			return -1;
		n -= k;
	}
	return 0;
}

static int write_ckpt(FILE *f, const struct cfg *c)
{
	uint64_t d = (uint64_t)c->dim, h = (uint64_t)c->hidden_dim, l = (uint64_t)c->n_layers;
	uint64_t head = d / (uint64_t)c->n_heads, kv = head * (uint64_t)c->n_kv_heads;
	float w = 0.5f / (float)c->dim; /* small: activations stay finite */
	/* In the file's order: n floats, random in [-scale, scale] or fill. */
	const struct {
		uint64_t n;
		float scale, fill;
	} part[] = {
		{ (uint64_t)c->vocab_size * d, 0.02f, 0 }, /* token embedding */
		{ l * d, 0, 1.0f },			   /* attention RMS norms */
		{ l * d * d, w, 0 },			   /* wq */
		{ l * d * kv, w, 0 },			   /* wk */
		{ l * d * kv, w, 0 },			   /* wv */
		{ l * d * d, w, 0 },			   /* wo */
		{ l * d, 0, 1.0f },			   /* FFN RMS norms */
		{ l * h * d, w, 0 },			   /* w1 */
		{ l * d * h, w, 0 },			   /* w2 */
		{ l * h * d, w, 0 },			   /* w3 */
		{ d, 0, 1.0f },				   /* final RMS norm */
		{ (uint64_t)c->seq_len * head, 0, 0 },	   /* RoPE tables (skipped) */
	};

	if (fwrite(c, sizeof(*c), 1, f) != 1)
		return -1;
	for (size_t i = 0; i < sizeof(part) / sizeof(part[0]); i++)
		if (put(f, part[i].n, part[i].scale, part[i].fill))
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct cfg c = { .dim = 64,
			 .hidden_dim = 172,
			 .n_layers = 2,
			 .n_heads = 4,
			 .n_kv_heads = 4,
			 .vocab_size = 32000,
			 .seq_len = 2048 };
	uint32_t v, seed = 1;
	FILE *f;
	int i;

	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: llama2c_ckpt OUT [--dim D] [--hidden H] [--layers L] "
				"[--heads N] [--vocab V] [--seq-len S] [--seed X]\n");
		return 2;
	}
	for (i = 2; i + 1 < argc; i += 2) {
		const struct {
			const char *flag;
			int32_t *dst;
		} opt[] = { { "--dim", &c.dim },	  { "--hidden", &c.hidden_dim },
			    { "--layers", &c.n_layers },  { "--heads", &c.n_heads },
			    { "--vocab", &c.vocab_size }, { "--seq-len", &c.seq_len } };
		int32_t *dst = NULL;

		if (!strcmp(argv[i], "--seed")) {
			if (kvs_arg_u32(stderr, "llama2c_ckpt", "--seed", argv[i + 1], 0,
					UINT32_MAX, &seed))
				return 2;
			continue;
		}
		for (size_t k = 0; k < sizeof(opt) / sizeof(opt[0]); k++)
			if (!strcmp(argv[i], opt[k].flag))
				dst = opt[k].dst;
		if (!dst) {
			fprintf(stderr, "llama2c_ckpt: unknown option %s\n", argv[i]);
			return 2;
		}
		if (kvs_arg_u32(stderr, "llama2c_ckpt", argv[i], argv[i + 1], 1, 1u << 20, &v))
			return 2;
		*dst = (int32_t)v;
	}
	if (i != argc || c.dim % c.n_heads) {
		fprintf(stderr,
			"llama2c_ckpt: options come in pairs; --dim a multiple of --heads\n");
		return 2;
	}
	c.n_kv_heads = c.n_heads;
	rng_state = seed;
	f = fopen(argv[1], "wb");
	if (!f || write_ckpt(f, &c) || fclose(f)) {
		fprintf(stderr, "llama2c_ckpt: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	return 0;
}
