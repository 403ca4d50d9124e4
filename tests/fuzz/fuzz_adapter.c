// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for what an inference server sends kvsplice-adapter: the
 * input is split at points it chooses itself and fed to the SSE splitter,
 * each event parsed as the adapter parses it, and the whole input read as
 * an error body and as /metrics. Properties: no crash or sanitizer report,
 * no event or line above the limit is delivered, text lies within its event.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvcap.h"
#include "srvload.h"
#include "openai.h"
#include "promtext.h"
#include "sse.h"

#define LIMIT 4096

static int on_event(void *ctx, const char *event, const char *data, size_t len)
{
	struct oai_event ev;

	(void)ctx;
	if (len > LIMIT || strlen(event) >= 32)
		abort();
	if (!oai_parse_event(data, len, &ev) && ev.is_error &&
	    oai_error_code(ev.error_status, ev.error) <= 7)
		abort(); /* never a code that closes the KVS1 connection */
	oai_event_free(&ev);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvs_sse p;
	size_t off = 0, step;
	char msg[128];
	double v;

	kvs_sse_init(&p, LIMIT);
	/* The first byte picks the feed sizes: servers' writes land anyhow. */
	step = size ? (data[0] % 61) + 1 : 1;
	while (off < size) {
		size_t n = size - off < step ? size - off : step;

		if (kvs_sse_feed(&p, (const char *)data + off, n, on_event, NULL))
			break;
		off += n;
	}
	kvs_sse_free(&p);
	oai_error_message((const char *)data, size, msg, sizeof(msg));
	if (strlen(msg) >= sizeof(msg))
		abort();
	kvs_prom_sum((const char *)data, size, "vllm:num_requests_running", &v);
	kvs_prom_counter((const char *)data, size, "vllm:prompt_tokens_total", &v);
	kvs_prom_has_prefix((const char *)data, size, "llamacpp:");
	kvcap_tokens(OAI_VLLM, (const char *)data, size);
	kvcap_tokens(OAI_SGLANG, (const char *)data, size);
	{
		struct srvload l;

		srvload_read(OAI_SGLANG, (const char *)data, size, &l);
		srvload_read(OAI_VLLM, (const char *)data, size, &l);
	}
	return 0;
}
