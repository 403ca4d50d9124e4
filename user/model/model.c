// SPDX-License-Identifier: MIT
/* The backend timing model: the time of one engine step. */
#include "model.h"

#include "kvsplice/hash.h"

void kvs_model_defaults(struct kvs_model_params *p)
{
	p->base_ms = KVS_MODEL_BASE_MS;
	p->per_token_ms = KVS_MODEL_PER_TOKEN_MS;
	p->prefill_attn_ms = KVS_MODEL_PREFILL_ATTN_MS;
	p->decode_ctx_ms = KVS_MODEL_DECODE_CTX_MS;
	p->step_tokens = KVS_MODEL_STEP_TOKENS;
	p->kv_blocks = KVS_MODEL_KV_BLOCKS;
}

double kvs_model_step_ms(const struct kvs_model_params *p, uint32_t t_step, double attn, double ctx)
{
	return p->base_ms + p->per_token_ms * t_step + p->prefill_attn_ms * attn +
	       p->decode_ctx_ms * ctx;
}

double kvs_model_prefill_ms(const struct kvs_model_params *p, uint32_t cached, uint32_t uncached)
{
	uint32_t budget = p->step_tokens ? p->step_tokens : KVS_MODEL_STEP_TOKENS;
	double ms = 0;

	while (uncached) {
		uint32_t t = uncached < budget ? uncached : budget;

		ms += kvs_model_step_ms(p, t, (double)t * ((double)cached + t / 2.0), 0);
		cached += t;
		uncached -= t;
	}
	return ms;
}

double kvs_model_decode_step_ms(const struct kvs_model_params *p, uint32_t ctx)
{
	return kvs_model_step_ms(p, 1, 0, ctx);
}
