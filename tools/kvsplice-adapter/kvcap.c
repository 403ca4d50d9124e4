// SPDX-License-Identifier: MIT
#include "kvcap.h"
#include "promtext.h"

/*
 * How each server says it, read in its source (2026-12-03):
 *
 * vLLM: vllm:cache_config_info, an info gauge (1) whose labels are the
 * front end's CacheConfig (num_gpu_blocks, block_size, ...) plus engine,
 * one sample per data-parallel engine the front end serves, every one
 * from the same CacheConfig (vllm/v1/metrics/loggers.py,
 * PrometheusStatLogger.log_metrics_info, vllm-project/vllm 005a810b).
 * That CacheConfig's num_gpu_blocks is the engines' sum: the front end
 * adds each engine's on its READY handshake (vllm/v1/engine/utils.py,
 * wait_for_engine_startup; later MPClient._apply_ready_response in
 * vllm/v1/engine/core_client.py). So the samples' largest, not their
 * sum, which would count the whole once per engine. An engine not sized
 * yet says num_gpu_blocks="None": nothing.
 *
 * SGLang: sglang:max_total_num_tokens, a gauge (multiprocess "mostrecent")
 * set by the scheduler processes, one per tensor-, pipeline- and expert-
 * parallel rank of each data-parallel rank, labelled model_name,
 * engine_type, tp_rank, pp_rank (moe_ep_rank, priority="" and
 * --extra-metric-labels in newer ones) and dp_rank when there are
 * data-parallel ranks; its value is that scheduler's own pool, the one
 * its replica's tensor-parallel ranks share and all say alike
 * (python/sglang/srt/metrics/collector.py, sgl-project/sglang 00ae9c15;
 * python/sglang/srt/observability/metrics_collector.py 44cedc2b, where
 * scheduler_metrics_mixin.py's init_metrics makes the labels and
 * log_prefill_stats sets it on the attn_tp_rank 0 schedulers only, after
 * the first prefill; newer ones set it at start-up on every scheduler,
 * SchedulerMetricsCollector.emit_constants). Data-parallel replicas,
 * DP attention's included, have pools of their own: the sum over dp_rank
 * of each one's largest. (Before SGLang passed dp_rank to DP attention's
 * schedulers their samples lack it and read as one pool: under-said, and
 * the gateway's corrections grow the index back.)
 */
uint64_t kvcap_tokens(enum oai_kind k, const char *text, size_t len)
{
	double v = 0;
	bool said =
		(k == OAI_VLLM && kvs_prom_label_product_max(text, len, "vllm:cache_config_info",
							     "num_gpu_blocks", "block_size", &v)) ||
		(k == OAI_SGLANG &&
		 kvs_prom_group_max_sum(text, len, "sglang:max_total_num_tokens", "dp_rank", &v));

	return said && v > 0 && v < 1e15 ? (uint64_t)v : 0;
}
