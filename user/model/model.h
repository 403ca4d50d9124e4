/* SPDX-License-Identifier: MIT */
/*
 * The backend timing model (docs/EVALUATION.md, "The fleet in virtual
 * time": the step model of its default scenario), fitted to public operator
 * profiles of Llama-3.1-70B on 8xH100 with tensor parallelism 8:
 *
 *   step_ms = base + per_token * T_step
 *           + prefill_attn * sum over prefill chunks of T_c * (ctx_before + T_c / 2)
 *           + decode_ctx * sum over decoding sequences of ctx
 *
 * Pure: shared by kvsplice-sim and the discrete-event simulator.
 */
#ifndef KVS_MODEL_H
#define KVS_MODEL_H

#include <stdint.h>

struct kvs_model_params {
	double base_ms;		/* fixed cost of a step */
	double per_token_ms;	/* per token processed in the step */
	double prefill_attn_ms; /* per token x context token of prefill attention */
	double decode_ctx_ms;	/* per context token of each decoding sequence */
	uint32_t step_tokens;	/* chunked-prefill token budget per step */
	uint32_t kv_blocks;	/* KV cache capacity in 16-token blocks */
};

#define KVS_MODEL_BASE_MS 10.0
#define KVS_MODEL_PER_TOKEN_MS 0.042
#define KVS_MODEL_PREFILL_ATTN_MS 0.82e-6
#define KVS_MODEL_DECODE_CTX_MS 16e-6
#define KVS_MODEL_STEP_TOKENS 8192
/* ~1.3 M tokens of KV cache per instance. */
#define KVS_MODEL_KV_BLOCKS 81250 /* = KVS_POLICY_INDEX_BLOCKS, the gateway's default */

void kvs_model_defaults(struct kvs_model_params *p);

/* A step that processes t_step tokens; attn = sum of T_c * (ctx_before +
 * T_c / 2) over its prefill chunks; ctx = sum of contexts of its decoding
 * sequences. */
double kvs_model_step_ms(const struct kvs_model_params *p, uint32_t t_step, double attn,
			 double ctx);

/* Prefill of `uncached` tokens after `cached` ones, alone on the instance:
 * the sum of its chunked-prefill steps. */
double kvs_model_prefill_ms(const struct kvs_model_params *p, uint32_t cached, uint32_t uncached);

/* One decode step of a single sequence whose context is ctx tokens. */
double kvs_model_decode_step_ms(const struct kvs_model_params *p, uint32_t ctx);

#endif
