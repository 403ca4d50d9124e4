/* SPDX-License-Identifier: MIT */
/*
 * The OpenAI-compatible completions API as vLLM, SGLang and llama.cpp's
 * llama-server serve it: the request body the adapter sends, the stream
 * events it reads back, the error bodies and what KVS1 code each maps to.
 * JSON through jansson; no I/O here.
 */
#ifndef KVS_OPENAI_H
#define KVS_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Which server: what the body may carry and where its load is read. */
enum oai_kind {
	OAI_AUTO = 0, /* found out from /metrics and /slots */
	OAI_LLAMA_CPP,
	OAI_VLLM,
	OAI_SGLANG,
	OAI_OTHER, /* an OpenAI-compatible server with none of the above */
};

const char *oai_kind_name(enum oai_kind k);

/*
 * The body of a streamed /v1/completions request for a plain-text prompt:
 * model (omitted when NULL), prompt, max_tokens (omitted when 0), stream,
 * stream_options.include_usage, for llama.cpp cache_prompt, for vLLM the
 * salt (the KVS1 header's cache_salt, when not 0) as cache_salt, then every key
 * of extra (a JSON object, or NULL) that is not one of those. NULL when the
 * prompt is not valid UTF-8 (JSON cannot carry it) or on no memory. Free
 * with free().
 */
char *oai_completion_body(const char *model, const void *prompt, size_t len, uint32_t max_tokens,
			  enum oai_kind kind, uint64_t salt, json_t *extra);

/*
 * The body of a request a client wrote (KVS1 flag JSON: an OpenAI body from
 * kvsplice-http), as the server gets it: every key the client set kept; for
 * a stream, stream_options.include_usage added when the client did not ask
 * for it (*added_usage then true: the usage-only event it brings is not the
 * client's, and is not passed on), for the END's figures; for llama.cpp
 * cache_prompt when absent; for vLLM the salt as cache_salt (over the
 * client's own: the gateway binds tenants' salts, not bodies; with no salt
 * to set, a client's own "kvs-..." one removed); then every
 * key of extra the body lacks. NULL
 * with a message in err when the payload is not a JSON object. Free with
 * free().
 */
char *oai_client_body(const void *payload, size_t len, bool stream, enum oai_kind kind,
		      uint64_t salt, json_t *extra, bool *added_usage, char *err, size_t errlen);

/* One stream event ("data: ..."), parsed. */
struct oai_event {
	bool done;	  /* "[DONE]" */
	bool separator;	  /* "null": llama.cpp's mark between the streams of a
			   * prompt array's prompts (its own usage each) */
	const char *text; /* choices[0].text (or delta.content); in root */
	size_t text_len;
	bool has_usage; /* usage: */
	uint32_t prompt_tokens, completion_tokens;
	bool has_cached; /* usage.prompt_tokens_details.cached_tokens */
	uint32_t cached_tokens;
	bool has_timings; /* llama.cpp's timings: */
	double prompt_ms, predicted_ms;
	uint32_t cache_n;  /* prompt tokens taken from the slot's cache */
	bool is_error;	   /* an error object instead of a chunk */
	char error[256];   /* its message */
	long error_status; /* its numeric code (HTTP status), 0 if none */
	json_t *root;
};

/* True for the event include_usage adds: usage, and no choices. */
bool oai_usage_only(const struct oai_event *ev);

/* 0, or -EINVAL for data that is not a JSON object (or [DONE] or null);
 * free the event with oai_event_free either way. */
int oai_parse_event(const char *data, size_t len, struct oai_event *ev);
void oai_event_free(struct oai_event *ev);

/* The message of an error body ({"error": {"message": ...}} or
 * {"error": "...", "message": ...} or plain text), printable, into out. */
void oai_error_message(const char *body, size_t len, char *out, size_t outlen);

/*
 * The KVS1 code for a server's refusal: HTTP status (0 for an error event in
 * the stream) and its message. A context overflow is too_long, 429/503 busy,
 * 408/504 timeout, another 4xx rejected, the rest internal. Never 1-7: those
 * say the KVS1 connection itself is broken.
 */
int oai_error_code(long http_status, const char *message);

#endif
