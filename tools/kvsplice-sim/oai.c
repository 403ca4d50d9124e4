// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "oai.h"
#include "prompt.h"

static int put(struct kvs_buf *b, const char *s)
{
	return kvs_buf_append(b, s, strlen(s));
}

static int head(struct kvs_buf *b, uint64_t req_id, bool chat, bool chunk)
{
	char h[160];

	snprintf(h, sizeof(h),
		 "{\"id\":\"%s-sim-%llu\",\"object\":\"%s\",\"created\":0,"
		 "\"model\":\"kvsplice-sim\",\"choices\":[",
		 chat ? "chatcmpl" : "cmpl", (unsigned long long)req_id,
		 chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
	return put(b, h);
}

static int usage(struct kvs_buf *b, const struct sim_oai_usage *u)
{
	char s[200];

	snprintf(s, sizeof(s),
		 ",\"usage\":{\"prompt_tokens\":%u,\"completion_tokens\":%u,\"total_tokens\":%u,"
		 "\"prompt_tokens_details\":{\"cached_tokens\":%u}}",
		 u->prompt_tokens, u->completion_tokens, u->prompt_tokens + u->completion_tokens,
		 u->cached_tokens);
	return put(b, s);
}

int sim_oai_token(struct kvs_buf *b, uint64_t req_id, bool chat, const uint8_t *tok, size_t len)
{
	int r = put(b, "data: ") || head(b, req_id, chat, true) ||
		put(b,
		    chat ? "{\"index\":0,\"delta\":{\"content\":\"" : "{\"index\":0,\"text\":\"") ||
		kvs_buf_append(b, tok, len) ||
		put(b, chat ? "\"},\"finish_reason\":null}]}\n\n" :
			      "\",\"finish_reason\":null}]}\n\n");

	return r ? -ENOBUFS : 0;
}

int sim_oai_last(struct kvs_buf *b, uint64_t req_id, bool chat, const struct sim_oai_usage *u)
{
	const char *why = u->length ? "length" : "stop";
	char c[96];
	int r;

	snprintf(c, sizeof(c), "{\"index\":0,%s\"finish_reason\":\"%s\"}]",
		 chat ? "\"delta\":{}," : "\"text\":\"\",", why);
	r = put(b, "data: ") || head(b, req_id, chat, true) || put(b, c) || usage(b, u) ||
	    put(b, "}\n\ndata: [DONE]\n\n");
	return r ? -ENOBUFS : 0;
}

int sim_oai_whole(struct kvs_buf *b, uint64_t req_id, bool chat, uint32_t n,
		  const struct sim_oai_usage *u)
{
	uint8_t tok[KVS_TOKEN_TEXT_LEN];
	char c[96];
	uint32_t i;
	int r;

	r = head(b, req_id, chat, false) ||
	    put(b, chat ? "{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"" :
			  "{\"index\":0,\"text\":\"");
	for (i = 0; i < n && !r; i++) {
		kvs_token_text(req_id, i, tok);
		r = kvs_buf_append(b, tok, sizeof(tok));
	}
	snprintf(c, sizeof(c), "\"%s,\"finish_reason\":\"%s\"}]", chat ? "}" : "",
		 u->length ? "length" : "stop");
	r = r || put(b, c) || usage(b, u) || put(b, "}");
	return r ? -ENOBUFS : 0;
}
