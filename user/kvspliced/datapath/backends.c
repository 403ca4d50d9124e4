// SPDX-License-Identifier: MIT
/* Each backend's record in the mmapped backends map: the controller's
 * fields set in place, the counters read, and the userspace path's share
 * of the counts (the kernel counts its own). */
#include <bpf/bpf.h>
#include <stdio.h>
#include <string.h>

#include "datapath.h"
#include "datapath/dp_int.h"
#include "kvsplice/hash.h"

void kvs_dp_set_backend(struct kvs_datapath *dp, uint32_t b, uint32_t state, uint32_t pool_size,
			uint32_t max_outstanding)
{
	struct kvs_backend *be = &dp->backends[b];

	/* Pool and limit before state: the kernel trusts them once it is UP. */
	__atomic_store_n(&be->pool_size, pool_size, __ATOMIC_RELAXED);
	__atomic_store_n(&be->max_outstanding, max_outstanding, __ATOMIC_RELAXED);
	__atomic_store_n(&be->state, state, __ATOMIC_RELEASE);
}

void kvs_dp_set_backend_addr(struct kvs_datapath *dp, uint32_t b, const struct kvs_endpoint *a)
{
	dp->backends[b].addr = *a;
}

void kvs_dp_set_report(struct kvs_datapath *dp, uint32_t b, const struct kvs_be_report *r)
{
	dp->backends[b].report = *r;
}

void kvs_dp_set_place_seed(struct kvs_datapath *dp, uint32_t b, uint64_t seed)
{
	__atomic_store_n(&dp->backends[b].place_seed, seed, __ATOMIC_RELAXED);
}

void kvs_dp_set_reason(struct kvs_datapath *dp, uint32_t b, const char *why)
{
	/* The kernel never reads it; a reader may see it half written. */
	snprintf(dp->backends[b].reason, sizeof(dp->backends[b].reason), "%s", why);
}

void kvs_dp_clear_backend(struct kvs_datapath *dp, uint32_t b)
{
	struct kvs_backend *be = &dp->backends[b];
	uint32_t gen = __atomic_load_n(&be->route_gen, __ATOMIC_ACQUIRE);

	__atomic_store_n(&be->state, KVS_BE_ABSENT, __ATOMIC_RELEASE);
	memset(be, 0, sizeof(*be));
	__atomic_store_n(&be->route_gen, gen + 1, __ATOMIC_RELEASE);
	/* A late END of the backend gone, counted meanwhile, may survive the
	 * clearing: one request in the next one's histogram. */
	kvs_dp_clear_ttft(dp, b);
}

void kvs_dp_clear_ttft(struct kvs_datapath *dp, uint32_t b)
{
	memset(&dp->ttft[b], 0, sizeof(dp->ttft[b]));
}

uint64_t kvs_dp_outstanding(const struct kvs_datapath *dp, uint32_t b)
{
	return __atomic_load_n(&dp->backends[b].outstanding, __ATOMIC_RELAXED);
}

uint64_t kvs_dp_outstanding_work(const struct kvs_datapath *dp, uint32_t b)
{
	return __atomic_load_n(&dp->backends[b].outstanding_work, __ATOMIC_RELAXED);
}

void kvs_dp_charged(const struct kvs_datapath *dp, uint32_t b, uint64_t *tokens, uint64_t *requests)
{
	*tokens = __atomic_load_n(&dp->backends[b].charged_tokens, __ATOMIC_RELAXED);
	*requests = __atomic_load_n(&dp->backends[b].req_frames, __ATOMIC_RELAXED);
}

void kvs_dp_set_work_limit(struct kvs_datapath *dp, uint32_t b, uint64_t limit)
{
	__atomic_store_n(&dp->backends[b].work_limit, limit, __ATOMIC_RELAXED);
}

void kvs_dp_set_hot(struct kvs_datapath *dp, uint32_t b, const struct kvs_hot_fleet *f)
{
	__atomic_store_n(&dp->backends[b].hot.at, f->at, __ATOMIC_RELAXED);
	__atomic_store_n(&dp->backends[b].hot.base, f->base, __ATOMIC_RELAXED);
	__atomic_store_n(&dp->backends[b].hot.prev, f->prev, __ATOMIC_RELAXED);
}

void kvs_dp_end_counters(const struct kvs_datapath *dp, uint32_t b, uint64_t *predicted,
			 uint64_t *mispredicted, uint64_t *unexpected)
{
	*predicted = __atomic_load_n(&dp->backends[b].predicted_cached, __ATOMIC_RELAXED);
	*mispredicted = __atomic_load_n(&dp->backends[b].mispredicted, __ATOMIC_RELAXED);
	*unexpected = __atomic_load_n(&dp->backends[b].unexpected_cached, __ATOMIC_RELAXED);
}

void kvs_dp_set_index_blocks(struct kvs_datapath *dp, uint32_t b, uint64_t blocks)
{
	__atomic_store_n(&dp->backends[b].index_blocks, blocks, __ATOMIC_RELAXED);
}

/* Never below zero: a stray END must not wrap a count and wedge the backend
 * as saturated for ever (as release_work() in the kernel). */
static void sub_floor(__u64 *v, uint64_t n)
{
	__u64 cur = __atomic_load_n(v, __ATOMIC_RELAXED);

	while (!__atomic_compare_exchange_n(v, &cur, cur > n ? cur - n : 0, false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

void kvs_dp_user_sent(struct kvs_datapath *dp, uint32_t b, uint64_t bytes, uint64_t work)
{
	struct kvs_backend *be = &dp->backends[b];

	__atomic_fetch_add(&be->outstanding, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->outstanding_work, work, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->req_frames, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->req_bytes, bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->charged_tokens, work, __ATOMIC_RELAXED);
}

void kvs_dp_user_response(struct kvs_datapath *dp, uint32_t b, uint64_t bytes, bool ends,
			  uint64_t release)
{
	struct kvs_backend *be = &dp->backends[b];

	__atomic_fetch_add(&be->resp_frames, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->resp_bytes, bytes, __ATOMIC_RELAXED);
	if (!ends)
		return;
	__atomic_fetch_add(&be->ends, 1, __ATOMIC_RELAXED);
	sub_floor(&be->outstanding, 1);
	sub_floor(&be->outstanding_work, release);
}

void kvs_dp_user_end_report(struct kvs_datapath *dp, uint32_t b, const struct kvs_end_info *e,
			    uint64_t predicted, uint64_t window_tokens)
{
	struct kvs_backend *be = &dp->backends[b];
	struct kvs_ttft *t = &dp->ttft[b];
	uint64_t prompt = e->prompt_tokens, cached = e->cached_tokens, output = e->output_tokens;
	uint64_t surprise = kvs_unexpected_cached(predicted, cached, window_tokens);
	uint64_t us = (uint64_t)e->queue_us + e->prefill_us;

	if (us) { /* as the kernel's count_ttft (bpf/datapath/response.bpf.h) */
		__atomic_fetch_add(&t->count, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&t->queue_us, e->queue_us, __ATOMIC_RELAXED);
		__atomic_fetch_add(&t->prefill_us, e->prefill_us, __ATOMIC_RELAXED);
		__atomic_fetch_add(&t->bucket[kvs_ttft_bucket(us)], 1, __ATOMIC_RELAXED);
	}
	__atomic_fetch_add(&be->output_tokens, output, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->prompt_tokens, prompt, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->cached_tokens, cached, __ATOMIC_RELAXED);
	__atomic_fetch_add(&be->predicted_cached, predicted, __ATOMIC_RELAXED);
	if (predicted > cached + KVS_BLOCK_TOKENS)
		__atomic_fetch_add(&be->mispredicted, predicted - cached - KVS_BLOCK_TOKENS,
				   __ATOMIC_RELAXED);
	if (surprise)
		__atomic_fetch_add(&be->unexpected_cached, surprise, __ATOMIC_RELAXED);
}

void kvs_dp_user_release(struct kvs_datapath *dp, uint32_t b, uint64_t work)
{
	sub_floor(&dp->backends[b].outstanding_work, work);
}

void kvs_dp_output_counters(const struct kvs_datapath *dp, uint32_t b, uint64_t *output,
			    uint64_t *ends)
{
	const struct kvs_backend *be = &dp->backends[b];

	*output = __atomic_load_n(&be->output_tokens, __ATOMIC_RELAXED);
	*ends = __atomic_load_n(&be->ends, __ATOMIC_RELAXED);
}

void kvs_dp_set_expect_output(struct kvs_datapath *dp, uint32_t b, uint64_t v)
{
	__atomic_store_n(&dp->backends[b].expect_output, v, __ATOMIC_RELAXED);
}

int kvs_dp_gen_current(const struct kvs_datapath *dp, uint32_t b, uint32_t gen)
{
	return b < KVS_MAX_BACKENDS &&
	       gen == __atomic_load_n(&dp->backends[b].route_gen, __ATOMIC_ACQUIRE);
}
