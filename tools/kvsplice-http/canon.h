/* SPDX-License-Identifier: MIT */
/*
 * An OpenAI API request body in the form kvsplice-http sends through KVS1
 * (docs/PROTOCOL.md, "OpenAI bodies"): the messages (or the prompt) first,
 * each message's keys in a fixed order, everything compact, the other
 * parameters after them sorted by name. Two requests that share a system
 * prompt and a conversation so far then share a byte prefix whatever JSON
 * their clients wrote, and the gateway's prefix hash finds it. Every
 * parameter is kept: the server gets the request the client meant. Pure:
 * jansson, no I/O.
 */
#ifndef KVS_HTTP_CANON_H
#define KVS_HTTP_CANON_H

#include <stddef.h>
#include <stdint.h>

enum canon_endpoint {
	CANON_CHAT,	   /* /v1/chat/completions: "messages" */
	CANON_COMPLETIONS, /* /v1/completions: "prompt" */
};

struct canon_req {
	char *body; /* the canonical body, NUL-terminated; free() it */
	size_t len;
	uint16_t flags;	     /* KVS_F_JSON, KVS_F_CHAT, KVS_F_STREAM */
	uint32_t prefix_len; /* bytes up to the end of the first message
			      * after the leading system (or developer)
			      * ones, if any: what the turns of a
			      * conversation share; 0 for a completion */
	uint32_t max_tokens; /* max_completion_tokens or max_tokens, 0 = none */
	uint32_t model_id;   /* canon_model_id(model), 0 = no model */
	char model[256];     /* "" = none */
};

/*
 * Parses and rearranges a body. 0, or -EINVAL with a message in err (and
 * the offending parameter's name in param, or "") for a body the API would
 * refuse with 400: not JSON, not an object, no messages/prompt, or one of
 * the wrong type. -ENOMEM when out of memory.
 */
int canon_request(enum canon_endpoint ep, const char *body, size_t len, struct canon_req *out,
		  char *err, size_t errlen, char *param, size_t paramlen);
void canon_free(struct canon_req *r);

/* A stable 32-bit id for a model name, never 0 (KVS1's model_id: requests
 * for different models never share routes). */
uint32_t canon_model_id(const char *model);

#endif
