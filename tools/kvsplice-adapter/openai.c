// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kvsplice/proto.h"
#include "openai.h"

const char *oai_kind_name(enum oai_kind k)
{
	static const char *const names[] = {
		[OAI_AUTO] = "auto",	 [OAI_LLAMA_CPP] = "llama.cpp", [OAI_VLLM] = "vllm",
		[OAI_SGLANG] = "sglang", [OAI_OTHER] = "openai",
	};

	return k <= OAI_OTHER ? names[k] : "unknown";
}

/* The request's cache_salt (KVS1 header: the gateway wrote it for a bound
 * tenant) as the server's own cache salt, where it has one: vLLM keeps
 * prefixes of different salts apart in its cache. Set over any the client
 * put in its body, which the gateway could not check. Where none is set
 * (salt 0: a tenant bound to 0, or an unbound client; or a server not
 * known to be vLLM), a body salt in this form goes: it would name a bound
 * tenant's domain. */
static void set_salt(json_t *o, enum oai_kind kind, uint64_t salt)
{
	const char *own = json_string_value(json_object_get(o, "cache_salt"));
	char s[32];

	if (kind != OAI_VLLM || !salt) {
		if (own && !strncmp(own, "kvs-", 4))
			json_object_del(o, "cache_salt");
		return;
	}
	snprintf(s, sizeof(s), "kvs-%016llx", (unsigned long long)salt);
	json_object_set_new(o, "cache_salt", json_string(s));
}

char *oai_completion_body(const char *model, const void *prompt, size_t len, uint32_t max_tokens,
			  enum oai_kind kind, uint64_t salt, json_t *extra)
{
	json_t *o = json_object(), *p = json_stringn(prompt, len), *so = json_object();
	char *s = NULL;

	if (!o || !p || !so)
		goto out;
	/* The prompt first: servers read it whatever the order, and a dump of
	 * the body then starts with what routing hashed. */
	json_object_set_new(o, "prompt", p);
	p = NULL;
	if (model)
		json_object_set_new(o, "model", json_string(model));
	if (max_tokens)
		json_object_set_new(o, "max_tokens", json_integer(max_tokens));
	json_object_set_new(o, "stream", json_true());
	json_object_set_new(so, "include_usage", json_true());
	json_object_set_new(o, "stream_options", so);
	so = NULL;
	/* llama.cpp reuses a slot's cached prefix only when asked (it is the
	 * default in recent builds; saying it costs nothing). */
	if (kind == OAI_LLAMA_CPP)
		json_object_set_new(o, "cache_prompt", json_true());
	set_salt(o, kind, salt);
	if (json_is_object(extra) && json_object_update_missing(o, extra))
		goto out;
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
out:
	json_decref(p);
	json_decref(so);
	json_decref(o);
	return s;
}

char *oai_client_body(const void *payload, size_t len, bool stream, enum oai_kind kind,
		      uint64_t salt, json_t *extra, bool *added_usage, char *err, size_t errlen)
{
	json_t *o = json_loadb(payload, len, JSON_ALLOW_NUL, NULL), *so;
	char *s = NULL;

	*added_usage = false;
	if (!json_is_object(o)) {
		snprintf(err, errlen, "kvsplice-adapter: the request body is not a JSON object");
		json_decref(o);
		return NULL;
	}
	if (stream) {
		so = json_object_get(o, "stream_options");
		if (!json_is_object(so)) {
			so = json_object();
			if (!so || json_object_set_new(o, "stream_options", so))
				goto out;
		}
		if (!json_is_true(json_object_get(so, "include_usage"))) {
			*added_usage = true;
			json_object_set_new(so, "include_usage", json_true());
		}
	}
	if (kind == OAI_LLAMA_CPP && !json_object_get(o, "cache_prompt"))
		json_object_set_new(o, "cache_prompt", json_true());
	set_salt(o, kind, salt);
	if (json_is_object(extra) && json_object_update_missing(o, extra))
		goto out;
	/* In the order the front wrote: the messages or prompt first. */
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
out:
	if (!s)
		snprintf(err, errlen, "kvsplice-adapter: out of memory");
	json_decref(o);
	return s;
}

bool oai_usage_only(const struct oai_event *ev)
{
	json_t *c = json_object_get(ev->root, "choices");

	return ev->has_usage && (!c || (json_is_array(c) && !json_array_size(c)));
}

static uint32_t u32_of(json_t *v)
{
	json_int_t i;

	if (json_is_integer(v)) {
		i = json_integer_value(v);
		return i < 0 ? 0 : i > UINT32_MAX ? UINT32_MAX : (uint32_t)i;
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);

		return d > 0 && d < 4294967295.0 ? (uint32_t)d : 0;
	}
	return 0;
}

/* A printable copy: control bytes become '?', so a message can go in a log
 * line or an ERROR frame as it is. */
static void copy_printable(char *out, size_t outlen, const char *s, size_t n)
{
	size_t i;

	if (!outlen)
		return;
	if (n > outlen - 1)
		n = outlen - 1;
	for (i = 0; i < n; i++)
		out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	out[n] = '\0';
}

/* {"error": {"message": M, "code": C}} (OpenAI, vLLM, llama.cpp) or
 * {"error": "M", "message": ...} or {"object": "error", "message": M, ...}
 * (vLLM's older form): the message and the code. */
static bool error_of(json_t *root, char *out, size_t outlen, long *status)
{
	json_t *e = json_object_get(root, "error"), *m = NULL, *c = NULL;
	const char *obj = json_string_value(json_object_get(root, "object"));

	if (json_is_object(e)) {
		m = json_object_get(e, "message");
		c = json_object_get(e, "code");
	} else if (json_is_string(e)) {
		m = json_object_get(root, "message");
		if (!json_is_string(m))
			m = e;
		c = json_object_get(root, "code");
	} else if (obj && !strcmp(obj, "error")) {
		m = json_object_get(root, "message");
		c = json_object_get(root, "code");
	} else {
		return false;
	}
	if (json_is_string(m))
		copy_printable(out, outlen, json_string_value(m), json_string_length(m));
	else
		copy_printable(out, outlen, "error without a message", 23);
	*status = json_is_integer(c) ? (long)json_integer_value(c) : 0;
	return true;
}

int oai_parse_event(const char *data, size_t len, struct oai_event *ev)
{
	json_t *choices, *c0, *t, *u, *d, *tm;

	memset(ev, 0, sizeof(*ev));
	if (len == 6 && !memcmp(data, "[DONE]", 6)) {
		ev->done = true;
		return 0;
	}
	if (len == 4 && !memcmp(data, "null", 4)) {
		ev->separator = true;
		return 0;
	}
	/* A NUL is a character a model may generate (\u0000 in JSON). */
	ev->root = json_loadb(data, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
	if (!json_is_object(ev->root))
		return -EINVAL;
	if (error_of(ev->root, ev->error, sizeof(ev->error), &ev->error_status)) {
		ev->is_error = true;
		return 0;
	}
	choices = json_object_get(ev->root, "choices");
	c0 = json_is_array(choices) ? json_array_get(choices, 0) : NULL;
	if (json_is_object(c0)) {
		t = json_object_get(c0, "text");
		if (!json_is_string(t)) /* a chat stream's delta */
			t = json_object_get(json_object_get(c0, "delta"), "content");
		if (json_is_string(t)) {
			ev->text = json_string_value(t);
			ev->text_len = json_string_length(t);
		}
	}
	u = json_object_get(ev->root, "usage");
	if (json_is_object(u)) {
		ev->has_usage = true;
		ev->prompt_tokens = u32_of(json_object_get(u, "prompt_tokens"));
		ev->completion_tokens = u32_of(json_object_get(u, "completion_tokens"));
		d = json_object_get(u, "prompt_tokens_details");
		if (json_is_object(d) && json_is_number(json_object_get(d, "cached_tokens"))) {
			ev->has_cached = true;
			ev->cached_tokens = u32_of(json_object_get(d, "cached_tokens"));
		}
	}
	tm = json_object_get(ev->root, "timings");
	if (json_is_object(tm)) {
		ev->has_timings = true;
		ev->prompt_ms = json_number_value(json_object_get(tm, "prompt_ms"));
		ev->predicted_ms = json_number_value(json_object_get(tm, "predicted_ms"));
		ev->cache_n = u32_of(json_object_get(tm, "cache_n"));
		if (!(ev->prompt_ms >= 0 && ev->prompt_ms < 1e9))
			ev->prompt_ms = 0;
		if (!(ev->predicted_ms >= 0 && ev->predicted_ms < 1e9))
			ev->predicted_ms = 0;
	}
	return 0;
}

void oai_event_free(struct oai_event *ev)
{
	json_decref(ev->root);
	ev->root = NULL;
}

void oai_error_message(const char *body, size_t len, char *out, size_t outlen)
{
	json_t *root = json_loadb(body, len, 0, NULL);
	long status;

	if (json_is_object(root) && error_of(root, out, outlen, &status)) {
		json_decref(root);
		return;
	}
	json_decref(root);
	while (len && isspace((unsigned char)body[len - 1]))
		len--;
	if (!len) {
		copy_printable(out, outlen, "(empty body)", 12);
		return;
	}
	copy_printable(out, outlen, body, len);
}

/* Case-insensitive substring search in a NUL-terminated message. */
static bool mentions(const char *s, const char *word)
{
	size_t n = strlen(word);

	for (; *s; s++)
		if (!strncasecmp(s, word, n))
			return true;
	return false;
}

int oai_error_code(long http_status, const char *message)
{
	/* vLLM: "This model's maximum context length is N tokens"; llama.cpp:
	 * "the request exceeds the available context size"
	 * (exceed_context_size_error); SGLang: "... is longer than the model's
	 * context length". */
	if (mentions(message, "context length") || mentions(message, "context size") ||
	    mentions(message, "context_size") || mentions(message, "context window"))
		return KVS_E_TOO_LONG;
	if (http_status == 429 || http_status == 503)
		return KVS_E_BUSY;
	if (http_status == 408 || http_status == 504)
		return KVS_E_TIMEOUT;
	if (http_status >= 400 && http_status < 500)
		return KVS_E_REJECTED;
	return KVS_E_INTERNAL;
}
