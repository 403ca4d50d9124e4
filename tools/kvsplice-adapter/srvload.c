// SPDX-License-Identifier: MIT
#include "srvload.h"

#include <string.h>

#include "promtext.h"

static uint32_t u32(double v)
{
	return v > 0 && v < 4e9 ? (uint32_t)(v + 0.5) : 0;
}

/*
 * Requests: vLLM's one sample per engine (labels model_name and engine),
 * summed; llama.cpp's one. SGLang's one per scheduler process that logs
 * its stats, labelled tp_rank, pp_rank and dp_rank (with data-parallel
 * ranks), each its own replica's count, and with priority scheduling the
 * total under priority="" beside one sample per priority
 * (python/sglang/srt/observability/metrics_collector.py, 44cedc2b): the
 * largest of each data-parallel rank's samples is its count (tensor-
 * parallel ranks repeat it under --enable-metrics-for-all-schedulers, and
 * no priority's share exceeds the total), and the replicas' add up.
 * Summed whole, a server with priority scheduling read twice its
 * requests, one of tensor-parallel degree 4 with every scheduler's
 * metrics four times.
 */
static bool requests(enum oai_kind k, const char *t, size_t n, const char *name, double *v)
{
	if (k == OAI_SGLANG)
		return kvs_prom_group_max_sum(t, n, name, "dp_rank", v);
	return kvs_prom_sum(t, n, name, v);
}

void srvload_read(enum oai_kind k, const char *t, size_t n, struct srvload *out)
{
	static const char *const names[][4] = {
		/* running, waiting, KV use (0..1), its older name */
		[OAI_VLLM] = { "vllm:num_requests_running", "vllm:num_requests_waiting",
			       "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc" },
		[OAI_SGLANG] = { "sglang:num_running_reqs", "sglang:num_queue_reqs",
				 "sglang:token_usage", NULL },
		[OAI_LLAMA_CPP] = { "llamacpp:requests_processing", "llamacpp:requests_deferred",
				    NULL, NULL },
	};
	double v;

	memset(out, 0, sizeof(*out));
	if (k != OAI_VLLM && k != OAI_SGLANG && k != OAI_LLAMA_CPP)
		return;
	if ((out->has_running = requests(k, t, n, names[k][0], &v)))
		out->running = u32(v);
	if ((out->has_waiting = requests(k, t, n, names[k][1], &v)))
		out->waiting = u32(v);
	/* A fraction per engine (data-parallel ranks): their mean. vLLM's is
	 * one sample per engine, labels model_name and engine
	 * (vllm/v1/metrics/loggers.py, PrometheusStatLogger.record, 005a810b:
	 * gpu_cache_usage_perc the same figure under its old name); SGLang's
	 * one per scheduler that logs stats, the attn_tp_rank 0 ones unless
	 * --enable-metrics-for-all-schedulers, each its own pool's share (the
	 * replicas' pools alike), and none before the first batch
	 * (python/sglang/srt/observability/metrics_collector.py, 44cedc2b). */
	if ((names[k][2] && kvs_prom_mean(t, n, names[k][2], &v)) ||
	    (names[k][3] && kvs_prom_mean(t, n, names[k][3], &v))) {
		out->has_kv = true;
		out->kv_permille = u32(v * 1000);
	}
}
