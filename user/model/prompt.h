/* SPDX-License-Identifier: MIT */
/*
 * Deterministic synthetic text: prompts for the load generator and tokens for
 * the backend simulator. The same seed always gives the same bytes, so a
 * client can check a response byte for byte and a trace's block id always
 * becomes the same block of text.
 */
#ifndef KVS_PROMPT_H
#define KVS_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* len bytes of lowercase words and spaces, a function of seed only. */
void kvs_text_fill(uint64_t seed, void *buf, size_t len);

/* Bytes of one generated token (the simulator sends one token per CHUNK). */
#define KVS_TOKEN_TEXT_LEN 4
/* The text of token idx of request req_id: what a backend streams and what
 * the client expects, byte for byte. */
void kvs_token_text(uint64_t req_id, uint32_t idx, uint8_t out[KVS_TOKEN_TEXT_LEN]);

uint64_t kvs_splitmix64(uint64_t *state);

/*
 * The end-of-sequence marker: " <eos:N>" at the very end of a prompt says
 * the model's answer is N tokens long, as a real model's end of sequence
 * would decide. The load generator appends it so that the request's
 * max_tokens can be what a client declares (never the true length, which a
 * gateway is never told); kvsplice-sim reads it and generates
 * min(max_tokens, N) tokens. Short, so it touches only the prompt's last
 * block in most cases; it is ordinary prompt bytes for hashing and caching.
 */
#define KVS_EOS_MARKER_MAX 16 /* bytes, terminating NUL included */
/* Writes the marker for n tokens to out; returns its length (at most 15). */
size_t kvs_eos_marker(uint32_t n, char out[KVS_EOS_MARKER_MAX]);
/* Whether the prompt's last bytes are a marker; if so, *n is its N. */
bool kvs_eos_parse(const uint8_t *prompt, size_t len, uint32_t *n);

#endif
