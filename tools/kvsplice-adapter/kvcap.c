// SPDX-License-Identifier: MIT
#include "kvcap.h"
#include "promtext.h"

/* vLLM's cache_config_info labels (blocks x block size, the data-parallel
 * engines' together, in each engine's sample), SGLang's
 * max_total_num_tokens (its largest label set: the tensor-parallel ranks
 * of one pool may each say it; separate data-parallel pools are then
 * under-said, which the gateway's corrections grow back). */
uint64_t kvcap_tokens(enum oai_kind k, const char *text, size_t len)
{
	double v = 0;
	bool said =
		(k == OAI_VLLM && kvs_prom_label_product_max(text, len, "vllm:cache_config_info",
							     "num_gpu_blocks", "block_size", &v)) ||
		(k == OAI_SGLANG && kvs_prom_max(text, len, "sglang:max_total_num_tokens", &v));

	return said && v > 0 && v < 1e15 ? (uint64_t)v : 0;
}
