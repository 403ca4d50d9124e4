/* SPDX-License-Identifier: MIT */
/*
 * The server's KV capacity in tokens, as its /metrics says it: what
 * kvsplice-adapter tells the gateway in its PONGs (KV_BLOCKS,
 * docs/PROTOCOL.md) unless --kv-tokens says it instead. Pure: state.c
 * feeds it each poll's /metrics.
 */
#ifndef KVS_KVCAP_H
#define KVS_KVCAP_H

#include <stddef.h>
#include <stdint.h>

#include "openai.h"

/* Tokens, or 0 where the text says none (llama.cpp, another server, a
 * vLLM engine not sized yet, a broken sample). */
uint64_t kvcap_tokens(enum oai_kind k, const char *text, size_t len);

#endif
