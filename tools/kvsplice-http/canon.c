// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "buf.h"
#include "canon.h"
#include "chash.h"
#include "kvsplice/proto.h"

/* Nested values: compact, NULs kept (\u0000), object keys in the client's
 * order: in a JSON Schema (response_format, a tool's parameters) the order
 * of properties is the order a constrained model writes them in. */
#define DUMP_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY)

uint32_t canon_model_id(const char *model)
{
	uint64_t h = kvs_str_hash(model);
	uint32_t id = (uint32_t)(h ^ (h >> 32));

	return id ? id : 1;
}

static int put_value(struct kvs_buf *b, json_t *v)
{
	char *s = json_dumps(v, DUMP_FLAGS);
	int r;

	if (!s)
		return -ENOMEM;
	r = kvs_buf_append(b, s, strlen(s));
	free(s);
	return r;
}

/* ,"key":value (or without the comma for the first member). */
static int put_member(struct kvs_buf *b, bool first, const char *key, json_t *v)
{
	json_t *k = json_string(key);
	int r = -ENOMEM;

	if (!k)
		return r;
	if ((first || !(r = kvs_buf_append(b, ",", 1))) && !(r = put_value(b, k)) &&
	    !(r = kvs_buf_append(b, ":", 1)))
		r = put_value(b, v);
	json_decref(k);
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The members of o not named in skip (NULL-terminated), sorted by key. */
static int put_rest(struct kvs_buf *b, json_t *o, const char *const *skip, bool first)
{
	size_t n = json_object_size(o), k = 0, i;
	const char **keys = calloc(n ? n : 1, sizeof(*keys));
	const char *key;
	json_t *v;
	int r = 0;

	if (!keys)
		return -ENOMEM;
	json_object_foreach(o, key, v)
	{
		const char *const *s;

		for (s = skip; *s && strcmp(*s, key); s++)
			;
		if (!*s)
			keys[k++] = key;
	}
	qsort(keys, k, sizeof(*keys), cmp_str);
	for (i = 0; i < k && !r; i++, first = false)
		r = put_member(b, first, keys[i], json_object_get(o, keys[i]));
	free(keys);
	return r;
}

/* A content part ({"type":"text","text":...}, an image_url, ...): type
 * first, the rest sorted; a part's keys carry no order. */
static int put_part(struct kvs_buf *b, json_t *p)
{
	static const char *const fixed[] = { "type", NULL };
	json_t *type = json_object_get(p, "type");
	int r;

	if (!json_is_object(p))
		return put_value(b, p);
	if ((r = kvs_buf_append(b, "{", 1)) || (type && (r = put_member(b, true, "type", type))) ||
	    (r = put_rest(b, p, fixed, !type)))
		return r;
	return kvs_buf_append(b, "}", 1);
}

/* A message's content: a string, or an array of parts (each canonical). */
static int put_content(struct kvs_buf *b, json_t *c)
{
	size_t i;
	json_t *p;
	int r;

	if (!json_is_array(c))
		return put_value(b, c);
	if ((r = kvs_buf_append(b, "[", 1)))
		return r;
	json_array_foreach(c, i, p)
	{
		if ((i && (r = kvs_buf_append(b, ",", 1))) || (r = put_part(b, p)))
			return r;
	}
	return kvs_buf_append(b, "]", 1);
}

/* {"role":..,"content":..,the rest sorted}: the same bytes for the same
 * message whatever order its client wrote. */
static int put_message(struct kvs_buf *b, json_t *m)
{
	static const char *const fixed[] = { "role", "content", NULL };
	json_t *content = json_object_get(m, "content");
	int r;

	if ((r = kvs_buf_append(b, "{", 1)) ||
	    (r = put_member(b, true, "role", json_object_get(m, "role"))))
		return r;
	if (content &&
	    ((r = kvs_buf_append(b, ",\"content\":", 11)) || (r = put_content(b, content))))
		return r;
	if ((r = put_rest(b, m, fixed, false)))
		return r;
	return kvs_buf_append(b, "}", 1);
}

static bool is_system(json_t *m)
{
	const char *role = json_string_value(json_object_get(m, "role"));

	return role && (!strcmp(role, "system") || !strcmp(role, "developer"));
}

static int bad(char *err, size_t errlen, char *param, size_t paramlen, const char *name,
	       const char *msg)
{
	snprintf(err, errlen, "%s", msg);
	snprintf(param, paramlen, "%s", name);
	return -EINVAL;
}

/* Checks the messages: a non-empty array of objects with a string role. */
static int check_messages(json_t *msgs, char *err, size_t errlen, char *param, size_t paramlen)
{
	size_t i;
	json_t *m;

	if (!msgs)
		return bad(err, errlen, param, paramlen, "messages",
			   "'messages' is a required property");
	if (!json_is_array(msgs) || !json_array_size(msgs))
		return bad(err, errlen, param, paramlen, "messages",
			   "'messages' must be a non-empty array");
	json_array_foreach(msgs, i, m)
	{
		if (!json_is_object(m) || !json_is_string(json_object_get(m, "role"))) {
			snprintf(param, paramlen, "messages[%zu]", i);
			snprintf(err, errlen,
				 "messages[%zu] must be an object with a string 'role'", i);
			return -EINVAL;
		}
	}
	return 0;
}

static int check_prompt(json_t *p, char *err, size_t errlen, char *param, size_t paramlen)
{
	if (!p)
		return bad(err, errlen, param, paramlen, "prompt",
			   "'prompt' is a required property");
	if (!json_is_string(p) && !json_is_array(p))
		return bad(err, errlen, param, paramlen, "prompt",
			   "'prompt' must be a string or an array");
	return 0;
}

static uint32_t declared_max_tokens(json_t *o)
{
	json_t *v = json_object_get(o, "max_completion_tokens");
	json_int_t n;

	if (!json_is_integer(v))
		v = json_object_get(o, "max_tokens");
	if (!json_is_integer(v))
		return 0;
	n = json_integer_value(v);
	return n <= 0 ? 0 : n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

int canon_request(enum canon_endpoint ep, const char *body, size_t len, struct canon_req *out,
		  char *err, size_t errlen, char *param, size_t paramlen)
{
	static const char *const chat_fixed[] = { "messages", NULL };
	static const char *const cmpl_fixed[] = { "prompt", NULL };
	json_error_t je;
	json_t *o, *lead, *stream, *model, *m;
	struct kvs_buf b;
	size_t i;
	int r;

	memset(out, 0, sizeof(*out));
	param[0] = '\0';
	/* A UTF-8 byte order mark, which RFC 8259 lets a parser ignore and
	 * llama-server does: jansson refuses it. */
	if (len >= 3 && !memcmp(body, "\xef\xbb\xbf", 3)) {
		body += 3;
		len -= 3;
	}
	o = json_loadb(body, len, JSON_ALLOW_NUL, &je);
	if (!o) {
		/* jansson keeps integers as int64: a larger one (a seed past
		 * 2^63) is valid JSON it cannot carry exactly, and vLLM would
		 * refuse it too (its seed is bounded to int64) */
		if (je.position && strstr(je.text, "too big integer"))
			snprintf(
				err, errlen,
				"an integer in the body is outside the signed 64-bit range (at line "
				"%d, column %d): kvsplice-http carries integers exactly, up to "
				"9223372036854775807",
				je.line, je.column);
		else
			snprintf(err, errlen,
				 "the body is not valid JSON: %s (at line %d, column %d)", je.text,
				 je.line, je.column);
		return -EINVAL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		snprintf(err, errlen, "the body must be a JSON object");
		return -EINVAL;
	}
	lead = json_object_get(o, ep == CANON_CHAT ? "messages" : "prompt");
	r = ep == CANON_CHAT ? check_messages(lead, err, errlen, param, paramlen) :
			       check_prompt(lead, err, errlen, param, paramlen);
	stream = json_object_get(o, "stream");
	if (!r && stream && !json_is_boolean(stream) && !json_is_null(stream))
		r = bad(err, errlen, param, paramlen, "stream", "'stream' must be a boolean");
	model = json_object_get(o, "model");
	if (!r && model && !json_is_string(model))
		r = bad(err, errlen, param, paramlen, "model", "'model' must be a string");
	if (r) {
		json_decref(o);
		return r;
	}

	kvs_buf_init(&b, 0);
	if (ep == CANON_CHAT) {
		size_t nlead = 0; /* leading system messages */

		r = kvs_buf_append(&b, "{\"messages\":[", 13);
		json_array_foreach(lead, i, m)
		{
			if (r || (i && (r = kvs_buf_append(&b, ",", 1))) ||
			    (r = put_message(&b, m)))
				break;
			/* The hint: the leading system messages and the first
			 * message after them, which every later turn of the
			 * conversation repeats. The kernel follows a hint's route
			 * however small a part of the prompt it is: with the
			 * system messages alone, every conversation sharing them
			 * went where they were (20 of 48 later turns moved, with
			 * their history); with no hint, a turn 2 whose match
			 * with turn 1 was too small a part of it was placed
			 * anew. */
			if (i == nlead) {
				nlead += is_system(m);
				out->prefix_len = (uint32_t)b.len;
			}
		}
		if (!r)
			r = kvs_buf_append(&b, "]", 1);
		if (!r)
			r = put_rest(&b, o, chat_fixed, false);
	} else {
		r = kvs_buf_append(&b, "{", 1);
		if (!r)
			r = put_member(&b, true, "prompt", lead);
		if (!r)
			r = put_rest(&b, o, cmpl_fixed, false);
	}
	if (!r)
		r = kvs_buf_append(&b, "}", 2); /* and the NUL */
	if (r) {
		kvs_buf_free(&b);
		json_decref(o);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	out->len = b.len - 1;
	out->body = (char *)kvs_buf_head(&b); /* off is 0: nothing was consumed */
	out->flags = KVS_F_JSON | (ep == CANON_CHAT ? KVS_F_CHAT : 0) |
		     (json_is_true(stream) ? KVS_F_STREAM : 0);
	out->max_tokens = declared_max_tokens(o);
	if (json_is_string(model)) {
		snprintf(out->model, sizeof(out->model), "%s", json_string_value(model));
		out->model_id = canon_model_id(json_string_value(model));
	}
	json_decref(o);
	return 0;
}

void canon_free(struct canon_req *r)
{
	free(r->body);
	r->body = NULL;
}
