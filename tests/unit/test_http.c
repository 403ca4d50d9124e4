// SPDX-License-Identifier: MIT
/*
 * kvsplice-http's pure parts: the canonical body (the same bytes whatever
 * JSON a client wrote, a conversation's turns sharing a byte prefix, every
 * parameter kept, the KVS1 fields taken from it, bad bodies refused),
 * OpenAI errors for KVS1 ones, and the whole responses written to a
 * connection the front closes itself.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "canon.h"
#include "kvsplice/proto.h"
#include "oaierr.h"

static char err[320], param[64];

static struct canon_req canon_ok(enum canon_endpoint ep, const char *body)
{
	struct canon_req r;

	assert_int_equal(canon_request(ep, body, strlen(body), &r, err, sizeof(err), param,
				       sizeof(param)),
			 0);
	assert_int_equal(strlen(r.body), r.len);
	return r;
}

/* A UTF-8 byte order mark before the JSON is ignored, as llama-server
 * ignores it (jansson alone refuses it). */
static void test_bom(void **state)
{
	struct canon_req a = canon_ok(CANON_CHAT, "\xef\xbb\xbf{\"messages\":[{\"role\":\"user\","
						  "\"content\":\"hi\"}]}");
	struct canon_req b =
		canon_ok(CANON_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");

	(void)state;
	assert_string_equal(a.body, b.body);
	canon_free(&a);
	canon_free(&b);
}

/* Key order, whitespace and escapes of the client's JSON do not matter. */
static void test_same_bytes(void **state)
{
	struct canon_req a = canon_ok(CANON_CHAT,
				      "{\"model\":\"m\",\"messages\":[{\"role\":\"system\","
				      "\"content\":\"Be brief. caf\\u00e9\"},{\"content\":\"hi\","
				      "\"role\":\"user\",\"name\":\"bob\"}],\"temperature\":0}");
	struct canon_req b = canon_ok(CANON_CHAT,
				      "{ \"temperature\" : 0, \"messages\" : [ { \"content\" : "
				      "\"Be brief. caf\xc3\xa9\", \"role\" : \"system\" }, { "
				      "\"name\":\"bob\", \"role\": \"user\", \"content\": \"hi\" } "
				      "], \"model\": \"m\" }");

	(void)state;
	assert_string_equal(a.body, b.body);
	/* messages first, role then content then the rest; then the other
	 * parameters sorted */
	assert_string_equal(a.body, "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief. "
				    "caf\xc3\xa9\"},{\"role\":\"user\",\"content\":\"hi\","
				    "\"name\":\"bob\"}],\"model\":\"m\",\"temperature\":0}");
	canon_free(&a);
	canon_free(&b);
}

/* Turn 2 of a conversation starts with turn 1's messages, byte for byte:
 * the gateway's prefix hash finds turn 1's server. The hint (prefix_len)
 * ends after the first message after the system message. */
static void test_turns_share_prefix(void **state)
{
	struct canon_req t1 = canon_ok(CANON_CHAT,
				       "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},"
				       "{\"role\":\"user\",\"content\":\"Q1\"}],\"stream\":true,"
				       "\"max_tokens\":50}");
	struct canon_req t2 = canon_ok(
		CANON_CHAT, "{\"max_completion_tokens\":70,\"stream\":false,\"messages\":["
			    "{\"content\":\"S\",\"role\":\"system\"},{\"role\":\"user\","
			    "\"content\":\"Q1\"},{\"role\":\"assistant\",\"content\":\"A1\"},"
			    "{\"role\":\"user\",\"content\":\"Q2\"}]}");
	const char *turn1 = "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":"
			    "\"user\",\"content\":\"Q1\"}";

	(void)state;
	assert_memory_equal(t1.body, turn1, strlen(turn1));
	assert_memory_equal(t2.body, turn1, strlen(turn1));
	assert_int_equal(t1.prefix_len, strlen(turn1));
	assert_int_equal(t2.prefix_len, strlen(turn1));
	assert_int_equal(t1.flags, KVS_F_JSON | KVS_F_CHAT | KVS_F_STREAM);
	assert_int_equal(t2.flags, KVS_F_JSON | KVS_F_CHAT);
	assert_int_equal(t1.max_tokens, 50);
	assert_int_equal(t2.max_tokens, 70); /* max_completion_tokens wins */
	assert_int_equal(t1.model_id, 0);
	canon_free(&t1);
	canon_free(&t2);
}

/* Completions: the prompt first (string or array), no hint; the hint runs
 * over both system messages and the message after them, and without one
 * over the first message; model_id is stable and never 0. */
static void test_completion_and_model(void **state)
{
	struct canon_req c = canon_ok(
		CANON_COMPLETIONS, "{\"stream\":true,\"model\":\"llama\",\"prompt\":[\"a\",\"b\"],"
				   "\"logprobs\":2,\"stop\":[\"\\n\"]}");
	struct canon_req d = canon_ok(
		CANON_CHAT, "{\"messages\":[{\"role\":\"system\",\"content\":\"A\"},{\"role\":"
			    "\"developer\",\"content\":\"B\"},{\"role\":\"user\",\"content\":"
			    "[{\"type\":\"text\",\"text\":\"x\"}]}],\"model\":\"llama\"}");
	const char *two = "{\"messages\":[{\"role\":\"system\",\"content\":\"A\"},{\"role\":"
			  "\"developer\",\"content\":\"B\"},{\"role\":\"user\",\"content\":"
			  "[{\"type\":\"text\",\"text\":\"x\"}]}";

	(void)state;
	assert_string_equal(c.body, "{\"prompt\":[\"a\",\"b\"],\"logprobs\":2,\"model\":\"llama\","
				    "\"stop\":[\"\\n\"],\"stream\":true}");
	assert_int_equal(c.prefix_len, 0);
	assert_int_equal(c.flags, KVS_F_JSON | KVS_F_STREAM);
	assert_string_equal(c.model, "llama");
	assert_int_equal(c.model_id, canon_model_id("llama"));
	assert_int_equal(d.model_id, c.model_id);
	assert_int_not_equal(canon_model_id("llama"), canon_model_id("llama2"));
	assert_int_not_equal(canon_model_id(""), 0);
	assert_int_equal(d.prefix_len, strlen(two));
	canon_free(&c);
	/* No system message: the first message, which later turns repeat. */
	c = canon_ok(CANON_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"Q1\"},"
				 "{\"role\":\"assistant\",\"content\":\"A1\"},{\"role\":"
				 "\"user\",\"content\":\"Q2\"}]}");
	assert_int_equal(c.prefix_len,
			 strlen("{\"messages\":[{\"role\":\"user\",\"content\":\"Q1\"}"));
	/* a content part: type first, the rest sorted */
	assert_non_null(strstr(d.body, "\"content\":[{\"type\":\"text\",\"text\":\"x\"}]"));
	canon_free(&c);
	canon_free(&d);
}

/* Inside a parameter, the client's order stays: a JSON Schema's
 * properties are the order a constrained model writes them in. Content
 * parts are put in one order whatever the client's. */
static void test_nested_order(void **state)
{
	struct canon_req a = canon_ok(
		CANON_CHAT,
		"{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{"
		"\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"}}}}},"
		"\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"x\",\"type\":\"text\"},"
		"{\"image_url\":{\"url\":\"u\",\"detail\":\"low\"},\"type\":\"image_url\"}]}]}");

	(void)state;
	assert_non_null(strstr(a.body, "\"properties\":{\"name\":{\"type\":\"string\"},\"age\":"));
	assert_non_null(strstr(a.body,
			       "[{\"type\":\"text\",\"text\":\"x\"},{\"type\":\"image_url\","
			       "\"image_url\":{\"url\":\"u\",\"detail\":\"low\"}}]"));
	canon_free(&a);
}

static void bad(enum canon_endpoint ep, const char *body, const char *want_param,
		const char *want_msg)
{
	struct canon_req r;

	assert_int_equal(canon_request(ep, body, strlen(body), &r, err, sizeof(err), param,
				       sizeof(param)),
			 -EINVAL);
	assert_string_equal(param, want_param);
	if (!strstr(err, want_msg))
		fail_msg("'%s' does not say '%s'", err, want_msg);
	assert_null(r.body);
}

static void test_refused(void **state)
{
	(void)state;
	bad(CANON_CHAT, "{\"messages\":", "", "not valid JSON");
	/* valid JSON, but past what jansson holds: said as such, not "not valid" */
	bad(CANON_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"seed\":18446744073709551615}", "",
	    "outside the signed 64-bit range (at line 1, column");
	bad(CANON_CHAT, "[1,2]", "", "must be a JSON object");
	bad(CANON_CHAT, "{\"model\":\"m\"}", "messages", "required");
	bad(CANON_CHAT, "{\"messages\":[]}", "messages", "non-empty array");
	bad(CANON_CHAT, "{\"messages\":\"hi\"}", "messages", "non-empty array");
	bad(CANON_CHAT, "{\"messages\":[{\"role\":\"user\"},{\"content\":\"x\"}]}", "messages[1]",
	    "string 'role'");
	bad(CANON_COMPLETIONS, "{\"messages\":[{\"role\":\"user\"}]}", "prompt", "required");
	bad(CANON_COMPLETIONS, "{\"prompt\":7}", "prompt", "string or an array");
	bad(CANON_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"stream\":\"yes\"}", "stream",
	    "boolean");
	bad(CANON_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"model\":3}", "model", "string");
}

static void test_errors(void **state)
{
	struct oai_err e;
	json_t *j;
	char *s;

	(void)state;
	e = oai_err_of_kvs(KVS_E_BUSY, "x");
	assert_int_equal(e.status, 429);
	assert_int_equal(oai_err_of_kvs(KVS_E_NO_BACKEND, "x").status, 503);
	assert_int_equal(oai_err_of_kvs(KVS_E_BACKEND_GONE, "x").status, 502);
	assert_int_equal(oai_err_of_kvs(KVS_E_TIMEOUT, "x").status, 504);
	e = oai_err_of_kvs(KVS_E_TOO_LONG, "x");
	assert_int_equal(e.status, 400);
	assert_string_equal(e.code, "context_length_exceeded");
	/* the server's own 4xx, from the adapter's message */
	assert_int_equal(oai_err_of_kvs(KVS_E_REJECTED, "inference server: HTTP 422: bad").status,
			 422);
	assert_int_equal(oai_err_of_kvs(KVS_E_REJECTED, "no status here").status, 400);
	assert_int_equal(oai_err_of_kvs(KVS_E_REJECTED, "inference server: HTTP 500: x").status,
			 400);
	assert_int_equal(oai_err_of_kvs(KVS_E_INTERNAL, "x").status, 500);
	assert_int_equal(oai_err_of_kvs(KVS_E_BAD_MAGIC, "x").status, 500);

	s = oai_err_body("quote \" here", "invalid_request_error", "messages", NULL);
	j = json_loads(s, 0, NULL);
	assert_non_null(j);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(j, "error"), "message")),
		"quote \" here");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(j, "error"), "param")),
		"messages");
	assert_true(json_is_null(json_object_get(json_object_get(j, "error"), "code")));
	json_decref(j);
	free(s);
}

/* A connection refused at --max-connections or cut at --request-timeout
 * gets a response a client can read on its own: a status line, the body's
 * exact length, a close; or nothing, if it does not fit. */
static void test_raw_response(void **state)
{
	char buf[512], *body;
	json_t *j;
	int n;

	(void)state;
	n = oai_err_response(buf, sizeof(buf), 408, "Request Timeout", "too \"slow\"",
			     "invalid_request_error", "request_timeout");
	assert_true(n > 0);
	assert_int_equal((size_t)n, strlen(buf));
	assert_memory_equal(buf, "HTTP/1.1 408 Request Timeout\r\n", 30);
	assert_non_null(strstr(buf, "\r\nConnection: close\r\n"));
	body = strstr(buf, "\r\n\r\n");
	assert_non_null(body);
	body += 4;
	assert_non_null(strstr(buf, "Content-Length: "));
	assert_int_equal(strtoul(strstr(buf, "Content-Length: ") + 16, NULL, 10), strlen(body));
	j = json_loads(body, 0, NULL);
	assert_non_null(j);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(j, "error"), "message")),
		"too \"slow\"");
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
			    "request_timeout");
	json_decref(j);

	assert_int_equal(oai_err_response(buf, 64, 503, "Service Unavailable", "x", "server_error",
					  NULL),
			 -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_bytes),
		cmocka_unit_test(test_bom),
		cmocka_unit_test(test_turns_share_prefix),
		cmocka_unit_test(test_completion_and_model),
		cmocka_unit_test(test_nested_order),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_raw_response),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
