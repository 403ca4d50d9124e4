// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for what an OpenAI client sends kvsplice-http: the input
 * is a request body for either endpoint (its first byte picks which).
 * Properties: no crash or sanitizer report; an accepted body's canonical
 * form is a JSON object equal to the input's (the same members, the same
 * values: the server gets what the client meant), it starts with the
 * messages or the prompt, its hint ends inside it, and the canonical form
 * of the canonical form is itself (one form, whatever the input).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "canon.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[320], param[64];
	struct canon_req r, again;
	enum canon_endpoint ep;
	json_t *in, *out;

	if (!size)
		return 0;
	ep = data[0] & 1 ? CANON_COMPLETIONS : CANON_CHAT;
	data++;
	size--;
	if (canon_request(ep, (const char *)data, size, &r, err, sizeof(err), param, sizeof(param)))
		return 0;
	if (strncmp(r.body, ep == CANON_CHAT ? "{\"messages\":[" : "{\"prompt\":",
		    ep == CANON_CHAT ? 13 : 10) ||
	    r.prefix_len > r.len)
		abort();
	/* (a byte order mark before the JSON is skipped, as canon_request
	 * skips it; jansson refuses it) */
	if (size >= 3 && !memcmp(data, "\xef\xbb\xbf", 3)) {
		data += 3;
		size -= 3;
	}
	in = json_loadb((const char *)data, size, JSON_ALLOW_NUL, NULL);
	out = json_loadb(r.body, r.len, JSON_ALLOW_NUL, NULL);
	if (!in || !out || !json_equal(in, out))
		abort();
	if (canon_request(ep, r.body, r.len, &again, err, sizeof(err), param, sizeof(param)) ||
	    again.len != r.len || memcmp(again.body, r.body, r.len) ||
	    again.prefix_len != r.prefix_len || again.flags != r.flags)
		abort();
	json_decref(in);
	json_decref(out);
	canon_free(&r);
	canon_free(&again);
	return 0;
}
