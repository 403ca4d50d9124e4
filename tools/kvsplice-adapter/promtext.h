/* SPDX-License-Identifier: MIT */
/*
 * Reading a value out of a Prometheus text exposition (what /metrics of
 * vLLM, SGLang and llama.cpp serves): "name{labels} value [timestamp]"
 * lines, '#' comments. Pure.
 */
#ifndef KVS_PROMTEXT_H
#define KVS_PROMTEXT_H

#include <stdbool.h>
#include <stddef.h>

/* The sum of name's samples over all its label sets (one per model or
 * engine), in *out. false if text has no sample of name. */
bool kvs_prom_sum(const char *text, size_t len, const char *name, double *out);

/* Their mean (a ratio per engine, such as KV cache use). */
bool kvs_prom_mean(const char *text, size_t len, const char *name, double *out);

/* True if some sample's name starts with prefix ("vllm:"). */
bool kvs_prom_has_prefix(const char *text, size_t len, const char *prefix);

#endif
