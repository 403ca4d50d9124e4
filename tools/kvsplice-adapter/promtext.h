/* SPDX-License-Identifier: MIT */
/*
 * Reading a value out of a Prometheus text exposition (what /metrics of
 * vLLM, SGLang and llama.cpp serves): "name{labels} value [timestamp]"
 * lines, '#' comments ("# TYPE name counter" says what a name is). Pure.
 */
#ifndef KVS_PROMTEXT_H
#define KVS_PROMTEXT_H

#include <stdbool.h>
#include <stddef.h>

/* What a text says of one name. */
enum kvs_prom_got {
	KVS_PROM_NONE = 0, /* no sample of it */
	KVS_PROM_OK,	   /* its samples, each a finite number */
	/* A sample whose value is NaN, +Inf, -Inf or no number, in one label
	 * set of several is enough: the sum of the others would read as a
	 * drop, and the next whole one as a jump. Unknown at this reading. */
	KVS_PROM_UNREADABLE,
	/* kvs_prom_counter: "# TYPE name gauge" (or any type but counter),
	 * a value that may go down in one process. */
	KVS_PROM_NOT_COUNTER,
};

/* The sum of name's samples over all its label sets (one per model or
 * engine), in *out when KVS_PROM_OK. */
enum kvs_prom_got kvs_prom_read(const char *text, size_t len, const char *name, double *out);

/* As kvs_prom_read, for a counter: the text types name as a counter or
 * not at all (in the 0.0.4 format "# TYPE x_total counter", in
 * OpenMetrics "# TYPE x counter" for the samples x_total), and a sample
 * below 0, which no counter has, makes it unreadable. */
enum kvs_prom_got kvs_prom_counter(const char *text, size_t len, const char *name, double *out);

/* kvs_prom_read's sum; false if none or unreadable (the caller keeps its
 * last figure). */
bool kvs_prom_sum(const char *text, size_t len, const char *name, double *out);

/* Their mean (a ratio per engine, such as KV cache use). */
bool kvs_prom_mean(const char *text, size_t len, const char *name, double *out);

/* The largest, over name's samples, of the product of two of their labels'
 * values read as numbers, in *out: vLLM's cache_config_info, num_gpu_blocks
 * x block_size, whose every sample (one per data-parallel engine) holds the
 * whole server's config, the engines' blocks summed by its front end; a sum
 * would count them once per engine. false if name has no sample, or one
 * whose labels lack either or say no finite number ("None": an engine not
 * sized yet), or that is broken. */
bool kvs_prom_label_product_max(const char *text, size_t len, const char *name, const char *a,
				const char *b, double *out);

/* Distinct values of a label kvs_prom_group_max_sum sums over, at most. */
#define KVS_PROM_GROUPS_MAX 256

/* The sum, over the values label takes among name's samples (those
 * without it are one more group), of each group's largest sample: SGLang's
 * max_total_num_tokens, one sample per scheduler process, each the pool of
 * its data-parallel rank (label dp_rank), which every tensor-parallel rank
 * of that replica says alike. false if name has no sample, a broken one,
 * or more than KVS_PROM_GROUPS_MAX groups. */
bool kvs_prom_group_max_sum(const char *text, size_t len, const char *name, const char *label,
			    double *out);

/* True if some sample's name starts with prefix ("vllm:"). */
bool kvs_prom_has_prefix(const char *text, size_t len, const char *prefix);

#endif
