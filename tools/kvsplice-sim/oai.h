/* SPDX-License-Identifier: MIT */
/*
 * What kvsplice-sim answers a request whose payload is an OpenAI body
 * (KVS1 flag JSON, from kvsplice-http): the shapes an OpenAI-compatible
 * server streams or returns, with the simulator's tokens as content, so
 * that the front and the gateway can be measured against a fast backend
 * with no inference server. The sim does not read the body: its model
 * charges the payload's bytes as the prompt, as for a plain prompt.
 */
#ifndef KVS_SIM_OAI_H
#define KVS_SIM_OAI_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"

struct sim_oai_usage {
	uint32_t prompt_tokens, cached_tokens, completion_tokens;
	bool length; /* stopped at max_tokens: finish_reason "length", else "stop" */
};

/* One streamed token: "data: {chunk}\n\n". 0 or -ENOMEM/-ENOBUFS. */
int sim_oai_token(struct kvs_buf *b, uint64_t req_id, bool chat, const uint8_t *tok, size_t len);
/* The stream's end: the chunk with finish_reason and usage, then
 * "data: [DONE]\n\n". */
int sim_oai_last(struct kvs_buf *b, uint64_t req_id, bool chat, const struct sim_oai_usage *u);
/* A whole response (no stream), its text the request's n tokens. */
int sim_oai_whole(struct kvs_buf *b, uint64_t req_id, bool chat, uint32_t n,
		  const struct sim_oai_usage *u);

#endif
