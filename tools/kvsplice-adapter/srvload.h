/* SPDX-License-Identifier: MIT */
/*
 * The load a server's /metrics says: requests running and waiting, and how
 * full its KV cache is. What kvsplice-adapter tells the gateway in its
 * PONGs (kvsplicectl backends shows them). Pure: state.c feeds it each
 * poll's /metrics.
 */
#ifndef KVS_SRVLOAD_H
#define KVS_SRVLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "openai.h"

struct srvload {
	bool has_running, has_waiting, has_kv; /* said by the text */
	uint32_t running, waiting;
	uint32_t kv_permille; /* of the KV cache in use */
};

/* What text says of k's load; nothing for another kind (llama.cpp's
 * /slots is read elsewhere). */
void srvload_read(enum oai_kind k, const char *text, size_t len, struct srvload *out);

#endif
