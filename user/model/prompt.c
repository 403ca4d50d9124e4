// SPDX-License-Identifier: MIT
/* Deterministic synthetic text for prompts and generated tokens. */
#include "prompt.h"

#include <stdio.h>
#include <string.h>

#include "kvsplice/hash.h"

uint64_t kvs_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void kvs_text_fill(uint64_t seed, void *buf, size_t len)
{
	uint8_t *p = buf;
	uint64_t st = seed, r = 0;
	size_t i, word = 0, bits = 0;

	for (i = 0; i < len; i++) {
		if (bits < 5) {
			r = kvs_splitmix64(&st);
			bits = 64;
		}
		/* Words of 2-9 letters: readable in a dump, and every byte still
		 * depends on the seed. */
		if (word >= 2 && (word >= 9 || (r & 7) == 0)) {
			p[i] = ' ';
			word = 0;
		} else {
			p[i] = (uint8_t)('a' + (r & 31) % 26);
			word++;
		}
		r >>= 5;
		bits -= 5;
	}
}

void kvs_token_text(uint64_t req_id, uint32_t idx, uint8_t out[KVS_TOKEN_TEXT_LEN])
{
	uint64_t h = kvs_fmix64(req_id * KVS_P1 + idx + 1);
	int i;

	for (i = 0; i < KVS_TOKEN_TEXT_LEN - 1; i++) {
		out[i] = (uint8_t)('a' + (h & 0xff) % 26);
		h >>= 8;
	}
	out[KVS_TOKEN_TEXT_LEN - 1] = ' ';
}

size_t kvs_eos_marker(uint32_t n, char out[KVS_EOS_MARKER_MAX])
{
	return (size_t)snprintf(out, KVS_EOS_MARKER_MAX, " <eos:%u>", n);
}

bool kvs_eos_parse(const uint8_t *prompt, size_t len, uint32_t *n)
{
	uint64_t v = 0;
	size_t i, digits = 0;

	/* Backwards from the closing '>': digits, then "<eos:". */
	if (!len || prompt[len - 1] != '>')
		return false;
	for (i = len - 1; i > 0 && prompt[i - 1] >= '0' && prompt[i - 1] <= '9'; i--)
		digits++;
	if (!digits || digits > 10 || i < 5 || memcmp(prompt + i - 5, "<eos:", 5))
		return false;
	for (; digits; digits--, i++)
		v = v * 10 + (uint64_t)(prompt[i] - '0');
	if (v > UINT32_MAX)
		return false;
	*n = (uint32_t)v;
	return true;
}
