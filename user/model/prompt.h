/* SPDX-License-Identifier: MIT */
/*
 * Deterministic synthetic text: prompts for the load generator and tokens for
 * the backend simulator. The same seed always gives the same bytes, so a
 * client can check a response byte for byte and a trace's block id always
 * becomes the same block of text.
 */
#ifndef KVS_PROMPT_H
#define KVS_PROMPT_H

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

#endif
