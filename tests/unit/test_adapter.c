// SPDX-License-Identifier: MIT
/*
 * kvsplice-adapter's parsers: the SSE splitter (line ends, fields, events
 * across feeds, limits), the OpenAI events and bodies of vLLM, SGLang and
 * llama.cpp (as they send them), error mapping, /metrics reading, and the
 * server's restarts (life.c: when the instance PONGs say changes).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "instance.h"
#include "kvcap.h"
#include "srvload.h"
#include "kvsplice/proto.h"
#include "life.h"
#include "openai.h"
#include "promtext.h"
#include "sse.h"

struct seen {
	int n;
	char event[8][32];
	char data[8][128];
	int stop_at; /* return 1 from the n-th event (1-based), 0: never */
};

static int collect(void *ctx, const char *event, const char *data, size_t len)
{
	struct seen *s = ctx;

	assert_int_equal(strlen(data), len);
	if (s->n < 8) {
		snprintf(s->event[s->n], sizeof(s->event[0]), "%s", event);
		snprintf(s->data[s->n], sizeof(s->data[0]), "%s", data);
	}
	s->n++;
	return s->stop_at && s->n == s->stop_at;
}

static void sse_all(const char *in, size_t step, struct seen *s, size_t max)
{
	struct kvs_sse p;
	size_t i, n = strlen(in);

	kvs_sse_init(&p, max);
	for (i = 0; i < n; i += step)
		assert_int_equal(kvs_sse_feed(&p, in + i, n - i < step ? n - i : step, collect, s),
				 0);
	kvs_sse_free(&p);
}

static void test_sse_line_ends(void **state)
{
	static const char *const ins[] = {
		"data: a\n\ndata: b\n\n",
		"data: a\r\n\r\ndata: b\r\n\r\n",
		"data: a\r\rdata: b\r\r",
		": keep-alive\ndata:a\n\nid: 3\ndata:b\n\n",
	};
	size_t i, step;

	for (i = 0; i < sizeof(ins) / sizeof(ins[0]); i++)
		for (step = 1; step <= strlen(ins[i]); step++) {
			struct seen s = { 0 };

			sse_all(ins[i], step, &s, 1024);
			assert_int_equal(s.n, 2);
			assert_string_equal(s.data[0], "a");
			assert_string_equal(s.data[1], "b");
			assert_string_equal(s.event[0], "message");
		}
}

static void test_sse_fields(void **state)
{
	struct seen s;

	/* An event with empty data is not dispatched (the spec); two empty
	 * data lines make one LF. */
	s = (struct seen){ 0 };
	sse_all("data:\n\ndata\n\ndata:\ndata:\n\n", 3, &s, 1024);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.data[0], "\n");
	s = (struct seen){ 0 };
	/* Data lines join with LF; event names the event, once. */
	sse_all("event: error\ndata: {\"x\":\ndata: 1}\n\ndata:  two spaces\n\n", 7, &s, 1024);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.event[0], "error");
	assert_string_equal(s.data[0], "{\"x\":\n1}");
	assert_string_equal(s.event[1], "message");
	assert_string_equal(s.data[1], " two spaces");
}

static void test_sse_cut_and_limits(void **state)
{
	struct kvs_sse p;
	struct seen s = { 0 };
	char big[200];

	/* An event cut off mid-way is not dispatched, and is pending. */
	kvs_sse_init(&p, 64);
	assert_int_equal(kvs_sse_feed(&p, "data: whole\n\ndata: cut", 22, collect, &s), 0);
	assert_int_equal(s.n, 1);
	assert_true(kvs_sse_pending(&p));
	/* A line above the limit is refused, whether it comes whole or in
	 * pieces, and so is an event of many small lines. */
	memset(big, 'x', sizeof(big));
	assert_int_equal(kvs_sse_feed(&p, big, sizeof(big), collect, &s), -E2BIG);
	kvs_sse_free(&p);
	kvs_sse_init(&p, 64);
	memcpy(big, "data: ", 6);
	big[100] = '\n';
	assert_int_equal(kvs_sse_feed(&p, big, 101, collect, &s), -E2BIG);
	kvs_sse_free(&p);
	kvs_sse_init(&p, 64);
	for (int i = 0; i < 20; i++) {
		int r = kvs_sse_feed(&p, "data: 12345\n", 12, collect, &s);

		if (r) {
			assert_int_equal(r, -E2BIG);
			assert_true(i >= 9);
			break;
		}
		assert_true(i < 11);
	}
	kvs_sse_free(&p);
	/* The callback's answer stops the feed. */
	kvs_sse_init(&p, 64);
	s = (struct seen){ .stop_at = 1 };
	assert_int_equal(kvs_sse_feed(&p, "data: 1\n\ndata: 2\n\n", 18, collect, &s), 1);
	assert_int_equal(s.n, 1);
	kvs_sse_free(&p);
}

/* A chunk and the final usage chunk of llama.cpp's /v1/completions stream. */
static void test_event_llama(void **state)
{
	static const char chunk[] =
		"{\"choices\":[{\"text\":\" Tat\",\"index\":0,\"logprobs\":null,\"finish_reason\":null}],"
		"\"created\":1,\"model\":\"m\",\"object\":\"text_completion\",\"id\":\"c\"}";
	static const char last[] =
		"{\"choices\":[],\"created\":1,\"model\":\"m\",\"object\":\"text_completion\","
		"\"usage\":{\"completion_tokens\":8,\"prompt_tokens\":1321,\"total_tokens\":1329,"
		"\"prompt_tokens_details\":{\"cached_tokens\":1320}},\"timings\":{\"cache_n\":1320,"
		"\"prompt_n\":1,\"prompt_ms\":1.5,\"predicted_n\":8,\"predicted_ms\":7.25}}";
	struct oai_event ev;

	assert_int_equal(oai_parse_event(chunk, strlen(chunk), &ev), 0);
	assert_int_equal(ev.text_len, 4);
	assert_memory_equal(ev.text, " Tat", 4);
	assert_false(ev.has_usage);
	oai_event_free(&ev);
	assert_int_equal(oai_parse_event(last, strlen(last), &ev), 0);
	assert_int_equal(ev.text_len, 0);
	assert_true(ev.has_usage && ev.has_cached && ev.has_timings);
	assert_int_equal(ev.prompt_tokens, 1321);
	assert_int_equal(ev.completion_tokens, 8);
	assert_int_equal(ev.cached_tokens, 1320);
	assert_int_equal(ev.cache_n, 1320);
	assert_true(ev.prompt_ms == 1.5 && ev.predicted_ms == 7.25);
	oai_event_free(&ev);
	/* A generated NUL (\u0000) is text like any other. */
	assert_int_equal(oai_parse_event("{\"choices\":[{\"text\":\"a\\u0000b\"}]}", 33, &ev), 0);
	assert_int_equal(ev.text_len, 3);
	assert_memory_equal(ev.text, "a\0b", 3);
	oai_event_free(&ev);
	assert_int_equal(oai_parse_event("[DONE]", 6, &ev), 0);
	assert_true(ev.done);
	oai_event_free(&ev);
	/* What llama.cpp writes between a prompt array's streams: no text,
	 * no usage, and not malformed. */
	assert_int_equal(oai_parse_event("null", 4, &ev), 0);
	assert_true(ev.separator && !ev.done && !ev.has_usage && !ev.is_error);
	assert_int_equal(ev.text_len, 0);
	oai_event_free(&ev);
	assert_int_equal(oai_parse_event("nul", 3, &ev), -EINVAL);
	oai_event_free(&ev);
}

/* vLLM: usage with prompt_tokens_details null when the server was started
 * without --enable-prompt-tokens-details; a chat delta. */
static void test_event_vllm(void **state)
{
	static const char usage[] =
		"{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[],\"usage\":"
		"{\"prompt_tokens\":12,\"total_tokens\":14,\"completion_tokens\":2,"
		"\"prompt_tokens_details\":null}}";
	static const char delta[] = "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}";
	struct oai_event ev;

	assert_int_equal(oai_parse_event(usage, strlen(usage), &ev), 0);
	assert_true(ev.has_usage);
	assert_false(ev.has_cached);
	assert_int_equal(ev.prompt_tokens, 12);
	oai_event_free(&ev);
	assert_int_equal(oai_parse_event(delta, strlen(delta), &ev), 0);
	assert_int_equal(ev.text_len, 2);
	oai_event_free(&ev);
}

static void test_event_errors(void **state)
{
	static const char oai[] = "{\"error\":{\"message\":\"bad\\nthing\",\"code\":400}}";
	static const char old[] = "{\"object\":\"error\",\"message\":\"busy\",\"code\":503}";
	static const char *const bad[] = { "", "{", "[1]", "\"s\"", "{\"a\":1,\"a\":2}", "nul" };
	struct oai_event ev;
	size_t i;

	assert_int_equal(oai_parse_event(oai, strlen(oai), &ev), 0);
	assert_true(ev.is_error);
	assert_string_equal(ev.error, "bad?thing"); /* no control bytes in a message */
	assert_int_equal(ev.error_status, 400);
	oai_event_free(&ev);
	assert_int_equal(oai_parse_event(old, strlen(old), &ev), 0);
	assert_true(ev.is_error);
	assert_int_equal(ev.error_status, 503);
	oai_event_free(&ev);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(oai_parse_event(bad[i], strlen(bad[i]), &ev), -EINVAL);
		oai_event_free(&ev);
	}
}

static void test_error_mapping(void **state)
{
	char m[64];

	assert_int_equal(oai_error_code(400, "This model's maximum context length is 4096 tokens"),
			 KVS_E_TOO_LONG);
	assert_int_equal(oai_error_code(400, "the request exceeds the available context size"),
			 KVS_E_TOO_LONG);
	assert_int_equal(oai_error_code(400, "'temperature' must be positive"), KVS_E_REJECTED);
	assert_int_equal(oai_error_code(404, "model not found"), KVS_E_REJECTED);
	assert_int_equal(oai_error_code(429, "slow down"), KVS_E_BUSY);
	assert_int_equal(oai_error_code(503, "Loading model"), KVS_E_BUSY);
	assert_int_equal(oai_error_code(504, "x"), KVS_E_TIMEOUT);
	assert_int_equal(oai_error_code(500, "x"), KVS_E_INTERNAL);
	assert_int_equal(oai_error_code(0, "The model produced output that does not match"),
			 KVS_E_INTERNAL);
	oai_error_message("{\"error\":{\"message\":\"no\"}}", 26, m, sizeof(m));
	assert_string_equal(m, "no");
	oai_error_message("Internal Server Error\r\n", 23, m, sizeof(m));
	assert_string_equal(m, "Internal Server Error");
	oai_error_message("", 0, m, sizeof(m));
	assert_string_equal(m, "(empty body)");
	oai_error_message("\x01\x02long", 6, m, 4);
	assert_string_equal(m, "??l");
}

static void test_body(void **state)
{
	json_t *extra = json_loads("{\"temperature\":0,\"prompt\":\"not this\"}", 0, NULL);
	char *b;

	b = oai_completion_body("m", "hi \"there\"", 10, 16, OAI_LLAMA_CPP, 0, extra);
	assert_non_null(b);
	/* The prompt leads; the adapter's keys win over extra's. */
	assert_string_equal(b, "{\"prompt\":\"hi \\\"there\\\"\",\"model\":\"m\",\"max_tokens\":16,"
			       "\"stream\":true,\"stream_options\":{\"include_usage\":true},"
			       "\"cache_prompt\":true,\"temperature\":0}");
	free(b);
	b = oai_completion_body(NULL, "x", 1, 0, OAI_VLLM, 0, NULL);
	assert_string_equal(b, "{\"prompt\":\"x\",\"stream\":true,\"stream_options\":"
			       "{\"include_usage\":true}}");
	free(b);
	/* JSON carries text only. */
	assert_null(oai_completion_body(NULL, "\xff\xfe", 2, 1, OAI_VLLM, 0, NULL));
	json_decref(extra);
}

static void test_metrics(void **state)
{
	static const char vllm[] =
		"# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
		"# TYPE vllm:num_requests_running gauge\n"
		"vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n"
		"vllm:num_requests_running{engine=\"1\",model_name=\"a}b \\\"q\\\"\"} 2.0\n"
		"vllm:num_requests_waiting{model_name=\"m\"} 7\n"
		"vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25 1700000000\n"
		"vllm:num_requests_running_total 99\n"
		"broken{ 1\n";
	static const char crlf[] = "x 3\r\ny{a=\"1\"} 0.5\r\ny{a=\"2\"} 0.25\r\n";
	static const char llama[] = "# TYPE llamacpp:prompt_tokens_total counter\n"
				    "llamacpp:prompt_tokens_total 1.23457e+06\n";
	double v;

	assert_true(kvs_prom_sum(vllm, strlen(vllm), "vllm:num_requests_running", &v));
	assert_true(v == 5.0);
	assert_true(kvs_prom_sum(vllm, strlen(vllm), "vllm:num_requests_waiting", &v));
	assert_true(v == 7.0);
	assert_true(kvs_prom_sum(vllm, strlen(vllm), "vllm:kv_cache_usage_perc", &v));
	assert_true(v == 0.25);
	assert_false(kvs_prom_sum(vllm, strlen(vllm), "llamacpp:requests_processing", &v));
	assert_false(kvs_prom_sum(vllm, strlen(vllm), "broken", &v));
	assert_true(kvs_prom_has_prefix(vllm, strlen(vllm), "vllm:"));
	assert_false(kvs_prom_has_prefix(vllm, strlen(vllm), "sglang:"));
	assert_true(kvs_prom_sum("llamacpp:requests_processing 1", 30,
				 "llamacpp:requests_processing", &v));
	assert_true(v == 1.0);
	assert_false(kvs_prom_sum("x NaN\n", 6, "x", &v));
	/* llama.cpp writes its counters with six significant digits */
	assert_true(kvs_prom_sum(llama, strlen(llama), "llamacpp:prompt_tokens_total", &v));
	assert_true(v == 1234570.0);
	/* Through a proxy that writes CRLF; a ratio per engine is averaged. */
	assert_true(kvs_prom_sum(crlf, strlen(crlf), "x", &v));
	assert_true(v == 3.0);
	assert_true(kvs_prom_mean(crlf, strlen(crlf), "y", &v));
	assert_true(v == 0.375);
}

/* A counter is read as one only when the text types it as a counter, or
 * not at all: an old SGLang served prompt_tokens_total as a gauge, which
 * may go down in one process, and its drop read as a restart. */
static void test_metrics_typed(void **state)
{
	static const char before[] =
		"# HELP sglang:prompt_tokens_total Number of prefill tokens processed.\n"
		"# TYPE sglang:prompt_tokens_total gauge\n"
		"sglang:prompt_tokens_total{name=\"m\"} 1200\n";
	static const char after[] = /* the gauge dropped: no restart */
		"# TYPE sglang:prompt_tokens_total gauge\n"
		"sglang:prompt_tokens_total{name=\"m\"} 300\n";
	static const char *const counters[] = {
		"x_total 5\n",					  /* untyped */
		"# TYPE x_total counter\nx_total 5\n",		  /* 0.0.4 */
		"# TYPE x counter\nx_total 5\nx_created 1.7e9\n", /* OpenMetrics */
		"# TYPE  x_total  untyped\nx_total 5\n",
		"# TYPE x_total_more gauge\n# TYPE x_tot gauge\n#TYPO x_total gauge\nx_total 5\n",
	};
	static const char *const others[] = {
		"# TYPE x gauge\nx_total 5\n", "# TYPE x_total histogram\nx_total 5\n",
		"x_total 5\r\n# TYPE x_total gauge\r\n", /* wherever the line is */
	};
	double v = -1;

	(void)state;
	assert_int_equal(kvs_prom_counter(before, strlen(before), "sglang:prompt_tokens_total", &v),
			 KVS_PROM_NOT_COUNTER);
	assert_int_equal(kvs_prom_counter(after, strlen(after), "sglang:prompt_tokens_total", &v),
			 KVS_PROM_NOT_COUNTER);
	assert_true(v == -1);
	/* as a gauge, it reads */
	assert_int_equal(kvs_prom_read(after, strlen(after), "sglang:prompt_tokens_total", &v),
			 KVS_PROM_OK);
	assert_true(v == 300);
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
		v = -1;
		assert_int_equal(kvs_prom_counter(counters[i], strlen(counters[i]), "x_total", &v),
				 KVS_PROM_OK);
		assert_true(v == 5);
	}
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		assert_int_equal(kvs_prom_counter(others[i], strlen(others[i]), "x_total", &v),
				 KVS_PROM_NOT_COUNTER);
	assert_int_equal(kvs_prom_counter("# TYPE x_total counter\n", 23, "x_total", &v),
			 KVS_PROM_NONE);
}

/* A sample that is no finite number, in one label set of several, makes
 * the whole family unknown at that reading. Before, that line was skipped
 * and the others summed: 1000 where the last reading had 1500, a counter
 * gone back (a restart), and a jump when the sample read again; a load
 * figure of one engine of two. */
static void test_metrics_unreadable(void **state)
{
	static const char *const bad[] = {
		"NaN",
		"+Inf",
		"-Inf",
		"nan",
		"inf",
		"1e400",
		"12abc",
		"",
		"1.5.5",
		"0x",
		"123456789012345678901234567890123456789012345678901234567890123456789",
	};
	char text[512];
	double v = -1;
	int n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		n = snprintf(text, sizeof(text),
			     "# TYPE vllm:prompt_tokens_total counter\n"
			     "vllm:prompt_tokens_total{engine=\"0\"} 1000\n"
			     "vllm:prompt_tokens_total{engine=\"1\"} %s\n",
			     bad[i]);
		assert_int_equal(kvs_prom_counter(text, (size_t)n, "vllm:prompt_tokens_total", &v),
				 KVS_PROM_UNREADABLE);
		assert_int_equal(kvs_prom_read(text, (size_t)n, "vllm:prompt_tokens_total", &v),
				 KVS_PROM_UNREADABLE);
		assert_false(kvs_prom_sum(text, (size_t)n, "vllm:prompt_tokens_total", &v));
		assert_false(kvs_prom_mean(text, (size_t)n, "vllm:prompt_tokens_total", &v));
		assert_true(v == -1);
	}
	/* labels that never close */
	n = snprintf(text, sizeof(text), "x{a=\"1\"} 3\nx{a=\"2\" 4\n");
	assert_int_equal(kvs_prom_read(text, (size_t)n, "x", &v), KVS_PROM_UNREADABLE);
	/* below 0: a gauge may be, a counter may not */
	n = snprintf(text, sizeof(text), "x{a=\"1\"} 3\nx{a=\"2\"} -1\n");
	assert_int_equal(kvs_prom_read(text, (size_t)n, "x", &v), KVS_PROM_OK);
	assert_true(v == 2);
	assert_int_equal(kvs_prom_counter(text, (size_t)n, "x", &v), KVS_PROM_UNREADABLE);
	/* each a number, their sum past a double's */
	n = snprintf(text, sizeof(text), "x{a=\"1\"} 1e308\nx{a=\"2\"} 1e308\n");
	assert_int_equal(kvs_prom_counter(text, (size_t)n, "x", &v), KVS_PROM_UNREADABLE);
	/* a ratio per engine: not the mean of the others */
	n = snprintf(text, sizeof(text), "y{a=\"1\"} 0.5\ny{a=\"2\"} NaN\n");
	assert_false(kvs_prom_mean(text, (size_t)n, "y", &v));
	/* a timestamp after the value, and a long label set, still read */
	n = snprintf(text, sizeof(text), "x{a=\"%070d\"} 3 1700000000000\n", 1);
	assert_int_equal(kvs_prom_counter(text, (size_t)n, "x", &v), KVS_PROM_OK);
	assert_true(v == 3);
}

/* A capacity in labels: vLLM's cache_config_info, one sample per engine,
 * each the server's whole cache config: its front end sums the data-
 * parallel engines' blocks into it (vllm/v1/engine/utils.py) and every
 * engine's label set repeats that sum, so the samples' largest, not their
 * sum (two engines of 27,153 blocks: 54,306 said twice). Whatever the
 * labels' order and escapes in others; an engine not yet sized ("None"),
 * a label missing or a value that is no number say nothing. */
static void test_metrics_capacity(void **state)
{
	static const char two[] =
		"# TYPE vllm:cache_config_info gauge\n"
		"vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",engine=\"0\","
		"num_gpu_blocks=\"54306\",prefix=\"a\\\"},b\"} 1.0\n"
		"vllm:cache_config_info{engine=\"1\", num_gpu_blocks=\"54306\",block_size=\"16\"} 1.0\n"
		"vllm:cache_config_info_other{num_gpu_blocks=\"5\",block_size=\"5\"} 1\n";
	static const char none[] =
		"vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"None\"} 1.0\n";
	static const char lacks[] = "vllm:cache_config_info{block_size=\"16\"} 1.0\n";
	static const char escaped[] =
		"vllm:cache_config_info{block_size=\"1\\6\",num_gpu_blocks=\"10\"} 1.0\n";
	double v;

	assert_true(kvs_prom_label_product_max(two, strlen(two), "vllm:cache_config_info",
					       "num_gpu_blocks", "block_size", &v));
	assert_true(v == 54306.0 * 16);
	assert_false(kvs_prom_label_product_max(none, strlen(none), "vllm:cache_config_info",
						"num_gpu_blocks", "block_size", &v));
	assert_false(kvs_prom_label_product_max(lacks, strlen(lacks), "vllm:cache_config_info",
						"num_gpu_blocks", "block_size", &v));
	assert_false(kvs_prom_label_product_max(escaped, strlen(escaped), "vllm:cache_config_info",
						"num_gpu_blocks", "block_size", &v));
	assert_false(kvs_prom_label_product_max(two, strlen(two), "vllm:absent", "num_gpu_blocks",
						"block_size", &v));
	assert_false(kvs_prom_label_product_max("vllm:cache_config_info{block_size=\"16\"", 38,
						"vllm:cache_config_info", "block_size",
						"block_size", &v));
	/* SGLang's pool size, said by every rank of a tensor-parallel server */
	assert_true(kvs_prom_group_max_sum("sglang:max_total_num_tokens{tp_rank=\"0\"} 161721.0\n"
					   "sglang:max_total_num_tokens{tp_rank=\"1\"} 161721.0\n",
					   100, "sglang:max_total_num_tokens", "dp_rank", &v));
	assert_true(v == 161721.0);
}

/* Groups by a label: each group's largest, summed; the samples without the
 * label one group more; a broken sample, or too many groups, say nothing. */
static void test_metrics_group_max_sum(void **state)
{
	char text[KVS_PROM_GROUPS_MAX * 24 + 64];
	size_t n = 0;
	double v;

#define GMS(t) kvs_prom_group_max_sum(t, strlen(t), "x", "g", &v)

	assert_true(GMS("x{g=\"a\",r=\"0\"} 3\nx{r=\"1\",g=\"a\"} 5\n"
			"x{g=\"b\"} 7\nx 1\nx{r=\"2\"} 2\nx_other{g=\"c\"} 9\n"));
	assert_true(v == 5 + 7 + 2);
	/* a value with an escaped quote is one group, not its prefix's */
	assert_true(GMS("x{g=\"a\\\"b\"} 1\nx{g=\"a\\\"b\"} 4\nx{g=\"a\"} 2\n"));
	assert_true(v == 4 + 2);
	assert_false(GMS("x{g=\"a\"} 1\nx{g=\"b\"} NaN\n"));
	assert_false(GMS("x{g=\"a\"} 1\nx{g=\"b} 2\n"));
	assert_false(GMS("y 1\n"));
	for (unsigned i = 0; i <= KVS_PROM_GROUPS_MAX; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "x{g=\"%u\"} 1\n", i);
	assert_false(kvs_prom_group_max_sum(text, n, "x", "g", &v));
	assert_true(kvs_prom_group_max_sum(text, n - strlen("x{g=\"256\"} 1\n"), "x", "g", &v));
	assert_true(v == KVS_PROM_GROUPS_MAX);
#undef GMS
}

/* What the adapter tells the gateway of a server's KV cache, from its
 * /metrics as each server writes it (kvcap.c names the upstream source).
 * SGLang: one sample per scheduler, the pool of its data-parallel rank,
 * which that rank's tensor-parallel schedulers all say: the sum over
 * dp_rank of each one's figure (before 2026-12-03, one rank's pool). */
static void test_server_capacity(void **state)
{
#define SGL(tp, dp, v)                                                                             \
	"sglang:max_total_num_tokens{dp_rank=\"" dp "\",engine_type=\"unified\",model_name="       \
	"\"m\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"" tp "\"} " v "\n"
	static const char sgl_tp2[] =
		"# HELP sglang:max_total_num_tokens Maximum total number of tokens in the KV cache pool.\n"
		"# TYPE sglang:max_total_num_tokens gauge\n"
		"sglang:max_total_num_tokens{engine_type=\"unified\",model_name=\"m\","
		"pp_rank=\"0\",tp_rank=\"0\"} 161721.0\n"
		"sglang:max_total_num_tokens{engine_type=\"unified\",model_name=\"m\","
		"pp_rank=\"0\",tp_rank=\"1\"} 161721.0\n";
	/* --dp 2 --tp 2: two replicas, each of two ranks */
	static const char sgl_dp2_tp2[] = SGL("0", "0", "161721.0") SGL("1", "0", "161721.0")
		SGL("0", "1", "161700.0") SGL("1", "1", "161700.0");
	/* --dp 4 --tp 4 --enable-dp-attention, the attn_tp_rank 0 schedulers only */
	static const char sgl_dpa4[] = SGL("0", "0", "500000.0") SGL("1", "1", "500000.0")
		SGL("2", "2", "500000.0") SGL("3", "3", "500000.0");
	static const char sgl_broken[] = SGL("0", "0", "161721.0") SGL("0", "1", "NaN");
	static const char vllm_dp2[] =
		"vllm:cache_config_info{block_size=\"16\",engine=\"0\",num_gpu_blocks=\"54306\"} 1.0\n"
		"vllm:cache_config_info{block_size=\"16\",engine=\"1\",num_gpu_blocks=\"54306\"} 1.0\n"
		"vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n";
	static const char vllm_unsized[] =
		"vllm:cache_config_info{block_size=\"16\",engine=\"0\",num_gpu_blocks=\"None\"} 1.0\n";
#undef SGL

	assert_int_equal(kvcap_tokens(OAI_SGLANG, sgl_tp2, strlen(sgl_tp2)), 161721);
	assert_int_equal(kvcap_tokens(OAI_SGLANG, sgl_dp2_tp2, strlen(sgl_dp2_tp2)), 323421);
	assert_int_equal(kvcap_tokens(OAI_SGLANG, sgl_dpa4, strlen(sgl_dpa4)), 2000000);
	assert_int_equal(kvcap_tokens(OAI_SGLANG, sgl_broken, strlen(sgl_broken)), 0);
	assert_int_equal(kvcap_tokens(OAI_VLLM, vllm_dp2, strlen(vllm_dp2)), 54306 * 16);
	assert_int_equal(kvcap_tokens(OAI_VLLM, vllm_unsized, strlen(vllm_unsized)), 0);
	/* the other kinds' names are not read */
	assert_int_equal(kvcap_tokens(OAI_VLLM, sgl_tp2, strlen(sgl_tp2)), 0);
	assert_int_equal(kvcap_tokens(OAI_SGLANG, vllm_dp2, strlen(vllm_dp2)), 0);
	assert_int_equal(kvcap_tokens(OAI_LLAMA_CPP, sgl_tp2, strlen(sgl_tp2)), 0);
}

static void test_server_load(void **state)
{
#define SGL(name, dp, tp, prio, v)                                                                 \
	"sglang:" name "{dp_rank=\"" dp "\",engine_type=\"unified\",model_name=\"m\","             \
	"pp_rank=\"0\",priority=\"" prio "\",tp_rank=\"" tp "\"} " v "\n"
	/* --dp 2 --tp 2 --enable-metrics-for-all-schedulers
	 * --enable-priority-scheduling: each rank repeats its replica's
	 * counts, the total under priority="" beside each priority's */
	static const char sgl[] = SGL("num_running_reqs", "0", "0", "", "10") SGL(
		"num_running_reqs", "0", "0", "0", "6") SGL("num_running_reqs", "0", "0", "1", "4")
		SGL("num_running_reqs", "0", "1", "", "10") SGL("num_running_reqs", "1", "0", "",
								"3")
			SGL("num_running_reqs", "1", "1", "", "3") SGL("num_queue_reqs", "0", "0",
								       "", "5")
				SGL("num_queue_reqs", "0", "1", "", "5") SGL("num_queue_reqs", "1",
									     "0", "", "0")
					SGL("num_queue_reqs", "1", "1", "", "0")
						SGL("token_usage", "0", "0", "", "0.5")
							SGL("token_usage", "1", "0", "", "0.25");
	/* one scheduler, no data-parallel ranks: as it says */
	static const char sgl1[] =
		"sglang:num_running_reqs{engine_type=\"unified\",model_name=\"m\",tp_rank=\"0\"} 7\n"
		"sglang:num_queue_reqs{engine_type=\"unified\",model_name=\"m\",tp_rank=\"0\"} 2\n";
	static const char vllm[] = "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 4\n"
				   "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 5\n"
				   "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 1\n"
				   "vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 0\n"
				   "vllm:gpu_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.2\n"
				   "vllm:gpu_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.4\n";
#undef SGL
	struct srvload l;

	(void)state;
	srvload_read(OAI_SGLANG, sgl, strlen(sgl), &l);
	assert_true(l.has_running && l.has_waiting && l.has_kv);
	assert_int_equal(l.running, 13); /* 10 + 3, not 36 */
	assert_int_equal(l.waiting, 5);
	assert_int_equal(l.kv_permille, 375);
	srvload_read(OAI_SGLANG, sgl1, strlen(sgl1), &l);
	assert_int_equal(l.running, 7);
	assert_int_equal(l.waiting, 2);
	assert_false(l.has_kv);
	srvload_read(OAI_VLLM, vllm, strlen(vllm), &l);
	assert_int_equal(l.running, 9); /* the engines' sum */
	assert_int_equal(l.waiting, 1);
	assert_int_equal(l.kv_permille, 300); /* the old name, their mean */
	/* another kind's names say nothing */
	srvload_read(OAI_LLAMA_CPP, vllm, strlen(vllm), &l);
	assert_false(l.has_running || l.has_waiting || l.has_kv);
	srvload_read(OAI_OTHER, vllm, strlen(vllm), &l);
	assert_false(l.has_running);
}

/* Readings, as state.c makes them: how the server answered; when ready,
 * whether /metrics answered, its start time (0: none) and counters. */
#define NO LIFE_NO_COUNT

static enum life_verdict as(struct server_life *l, enum life_seen how)
{
	struct life_reading r = { .seen = how };

	assert_true(how != LIFE_READY);
	return life_seen(l, &r);
}

static enum life_verdict ready(struct server_life *l, double started, double in, double out)
{
	struct life_reading r = {
		.seen = LIFE_READY, .metrics = true, .started = started, .count = { in, out }
	};

	return life_seen(l, &r);
}

/* Ready, its /metrics unanswered (timed out). */
static enum life_verdict ready_unknown(struct server_life *l)
{
	struct life_reading r = { .seen = LIFE_READY, .count = { NO, NO } };

	return life_seen(l, &r);
}

/* Ready, its /metrics answered, but some of it did not read (a NaN in
 * one label set of a counter: promtext.h): those given as none. */
static enum life_verdict ready_unread(struct server_life *l, double started, double in, double out)
{
	struct life_reading r = { .seen = LIFE_READY,
				  .metrics = true,
				  .unread = true,
				  .started = started,
				  .count = { in, out } };

	return life_seen(l, &r);
}

/* Without a start time or counters: down (refused, or answered unhealthy)
 * after ready, then ready again, is a restart; no answer (a timeout) is
 * not, nor down before the first ready (a server still starting), nor
 * ready twice. */
static void test_life_down_up(void **state)
{
	struct server_life l;

	(void)state;
	life_init(&l, 5);
	assert_int_equal(l.instance, 5);
	assert_false(as(&l, LIFE_DOWN)); /* loading at the adapter's start */
	assert_false(ready(&l, 0, NO, NO));
	assert_false(ready(&l, 0, NO, NO));
	assert_false(as(&l, LIFE_SILENT)); /* hung, or busy: its cache stays */
	assert_false(ready(&l, 0, NO, NO));
	assert_false(as(&l, LIFE_DOWN));
	assert_false(as(&l, LIFE_SILENT));
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready(&l, 0, NO, NO), LIFE_DOWN_UP); /* back: a new life */
	assert_false(ready(&l, 0, NO, NO));
}

/* With process_start_time_seconds (a Prometheus process metric): the
 * process says. A restart between two polls, never seen down, is one; a
 * health check that failed and passed again in the same process is not. */
static void test_life_start_time(void **state)
{
	struct server_life l;

	(void)state;
	life_init(&l, 5);
	assert_false(ready(&l, 1000.5, NO, NO));
	assert_false(ready(&l, 1000.5, NO, NO));
	assert_int_equal(ready(&l, 2000.25, NO, NO), LIFE_NEW_START); /* between two polls */
	assert_false(as(&l, LIFE_DOWN));
	assert_false(ready(&l, 2000.25, NO, NO)); /* the same process */
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready(&l, 3000, NO, NO), LIFE_NEW_START); /* down, and another */
	/* a reading without the metric: the down and up decide */
	assert_false(ready(&l, 0, NO, NO));
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready(&l, 0, NO, NO), LIFE_DOWN_UP);
}

/* Once the process says its start time, a ready reading whose /metrics
 * gave no answer says nothing of a down before it: the next reading with
 * a start time decides, once. Before, a check that failed and passed in
 * the same process with /metrics slow at that poll was a restart, and a
 * real restart so read was counted again when the new start time came. */
static void test_life_start_unknown(void **state)
{
	struct server_life l;

	(void)state;
	life_init(&l, 5);
	assert_false(ready_unknown(&l)); /* starting */
	assert_false(ready(&l, 1000.5, NO, NO));
	assert_false(ready_unknown(&l));
	assert_false(as(&l, LIFE_DOWN));
	assert_false(ready_unknown(&l));	 /* back, /metrics slow */
	assert_false(ready(&l, 1000.5, NO, NO)); /* the same process */
	assert_false(as(&l, LIFE_DOWN));
	assert_false(ready_unknown(&l));
	assert_false(ready_unknown(&l));
	assert_int_equal(ready(&l, 2000.25, NO, NO), LIFE_NEW_START); /* another: one restart */
	assert_false(ready(&l, 2000.25, NO, NO));
	/* never said: a reading without /metrics is one without the metric */
	life_init(&l, 5);
	assert_false(ready_unknown(&l));
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready_unknown(&l), LIFE_DOWN_UP);
}

/* Counters (llama.cpp's tokens in and out) only grow in one process: one
 * lower than the last reading's is another process, though no poll saw
 * it down (a restart quicker than --poll-ms). Before, unseen. */
static void test_life_counter_back(void **state)
{
	struct server_life l;

	(void)state;
	life_init(&l, 5);
	assert_false(ready(&l, 0, 1200, 300));
	assert_false(ready(&l, 0, 1200, 300)); /* idle: the same */
	assert_false(ready(&l, 0, 1.23457e+06, 300));
	assert_int_equal(ready(&l, 0, 857, 12), LIFE_COUNT_BACK); /* between two polls */
	assert_false(ready(&l, 0, 900, 20));
	/* one counter back is enough, the other grown or not */
	assert_int_equal(ready(&l, 0, 950, 3), LIFE_COUNT_BACK);
	/* down, then back with lower counters: a restart, said by them */
	assert_false(ready(&l, 0, 2000, 500));
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready(&l, 0, 0, 0), LIFE_COUNT_BACK);
	/* a server whose start time this reading lacks: its counters say */
	life_init(&l, 5);
	assert_false(ready(&l, 1000.5, 400, 40));
	assert_int_equal(ready(&l, 0, 10, 1), LIFE_COUNT_BACK);
}

/* A health check that failed under load (a 503, a proxy's 502) and passed
 * again, its counters not lower: the same process, as a start time that
 * did not change says. Before, a restart: routes withdrawn for nothing. */
static void test_life_counter_blip(void **state)
{
	struct server_life l;

	(void)state;
	life_init(&l, 5);
	assert_false(ready(&l, 0, 0, 0)); /* read from its start */
	assert_false(ready(&l, 0, 1200, 300));
	assert_true(life_said(&l));
	assert_false(as(&l, LIFE_DOWN));
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready(&l, 0, 1500, 340), LIFE_SAME); /* grown */
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready(&l, 0, 1500, 340), LIFE_SAME); /* idle */
	/* and the start time, when there is one, comes first: the same one
	 * is the same process whatever a counter says, another is another */
	life_init(&l, 5);
	assert_false(ready(&l, 1000.5, 1200, 300));
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready(&l, 1000.5, 5, 1), LIFE_SAME);
	assert_int_equal(ready(&l, 2000.25, 6000, 900), LIFE_NEW_START);
}

/* A ready reading whose /metrics did not answer says nothing of the
 * counters: a down before it waits for the next reading that has them,
 * which decides once. A counter missing from a reading that answered is
 * not compared, and its last value stays for the next that has it. */
static void test_life_counter_unknown(void **state)
{
	struct server_life l;

	(void)state;
	life_init(&l, 5);
	assert_false(ready(&l, 0, 0, 0));
	assert_false(ready(&l, 0, 1200, 300));
	assert_false(as(&l, LIFE_DOWN));
	assert_false(ready_unknown(&l)); /* back, /metrics slow */
	assert_false(ready_unknown(&l));
	assert_int_equal(ready(&l, 0, 1300, 310), LIFE_SAME); /* the same process */
	assert_false(as(&l, LIFE_DOWN));
	assert_false(ready_unknown(&l));
	assert_int_equal(ready(&l, 0, 2, 1), LIFE_COUNT_BACK); /* another: one restart */
	assert_false(ready(&l, 0, 2, 1));
	/* missing */
	life_init(&l, 5);
	assert_false(ready(&l, 0, 1200, 300));
	assert_false(ready(&l, 0, NO, 310));
	assert_false(ready(&l, 0, NO, NO));
	assert_int_equal(ready(&l, 0, 900, NO), LIFE_COUNT_BACK); /* below 1200 */
	/* none to compare after a down: the down and up decide */
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready(&l, 0, NO, NO), LIFE_DOWN_UP);
}

/* What did not read says nothing: not compared, its last value kept for
 * the next reading, and a reading in which nothing else decides is as
 * one whose /metrics gave no answer (a down before it waits). What did
 * read still decides. */
static void test_life_unread(void **state)
{
	struct server_life l;

	(void)state;
	life_init(&l, 5);
	assert_false(ready(&l, 0, 0, 0));
	assert_false(ready(&l, 0, 1500, 300));
	assert_true(life_said(&l));
	/* one counter unreadable, the other grown: the same process */
	assert_false(ready_unread(&l, 0, NO, 310));
	/* both, after a down: waits for a reading that says */
	assert_false(as(&l, LIFE_DOWN));
	assert_false(ready_unread(&l, 0, NO, NO));
	assert_false(ready_unread(&l, 0, NO, NO));
	assert_int_equal(ready(&l, 0, 1600, 320), LIFE_SAME); /* compared to 1500 */
	assert_false(as(&l, LIFE_DOWN));
	assert_false(ready_unread(&l, 0, NO, NO));
	assert_int_equal(ready(&l, 0, 1000, 320), LIFE_COUNT_BACK); /* one restart */
	/* the one that read went back: a restart still */
	assert_false(ready(&l, 0, 1200, 400));
	assert_int_equal(ready_unread(&l, 0, NO, 2), LIFE_COUNT_BACK);
	/* the start time read decides */
	life_init(&l, 5);
	assert_false(ready(&l, 1000.5, 10, 10));
	assert_int_equal(ready_unread(&l, 2000.5, NO, NO), LIFE_NEW_START);
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready_unread(&l, 2000.5, NO, NO), LIFE_SAME);
	/* nothing said yet in this life: a down and up decides, as with no
	 * answer */
	life_init(&l, 5);
	assert_false(ready(&l, 0, 7, 8));
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready_unread(&l, 0, NO, NO), LIFE_DOWN_UP);
}

/* A counter at 0 says nothing: it cannot go lower, and the old process
 * may have served its first tokens after that reading. A server that
 * served nothing, restarted and served nothing again is not seen by its
 * counters (no cache worth a route was lost); seen down, it is taken as
 * restarted, as without counters. Once above 0, they say. */
static void test_life_counter_zero(void **state)
{
	struct server_life l;

	(void)state;
	life_init(&l, 5);
	assert_false(ready(&l, 0, 0, 0));
	assert_false(life_said(&l));
	assert_false(ready(&l, 0, 0, 0)); /* restarted or not: nothing lost */
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready(&l, 0, 0, 0), LIFE_DOWN_UP);
	assert_false(ready(&l, 0, 7, 0));
	assert_true(life_said(&l));
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready(&l, 0, 9, 0), LIFE_SAME); /* before: a restart */
	assert_int_equal(ready(&l, 0, 0, 0), LIFE_COUNT_BACK);
	assert_false(life_said(&l)); /* the new process, at 0 */
}

/* A counter tells the same process from another only once it has grown
 * in this life: a process starts with its counters at 0 (llama.cpp, vLLM)
 * or at the tokens of the request it sends itself before it says ready
 * (SGLang's warmup: a few in, 8 out), and one that restarts before serving
 * more shows the same again. Seen down and back at those, it is taken as
 * restarted, as a counter at 0 is. Before, any counter above 0 decided:
 * SGLang restarted before a request of its finished was the same process,
 * and the routes to its lost cache stayed. */
static void test_life_counter_first(void **state)
{
	struct server_life l;

	(void)state;
	life_init(&l, 5);
	assert_false(ready(&l, 0, 7, 8)); /* SGLang, its warmup done */
	assert_false(life_said(&l));
	assert_false(ready(&l, 0, 7, 8));
	assert_false(as(&l, LIFE_DOWN)); /* died under its first requests */
	assert_int_equal(ready(&l, 0, 7, 8), LIFE_DOWN_UP);
	/* grown since: the counters say, and a blip is no restart */
	assert_false(ready(&l, 0, 900, 120));
	assert_true(life_said(&l));
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready(&l, 0, 950, 130), LIFE_SAME);
	/* lower than the last reading is a restart, grown or not */
	assert_int_equal(ready(&l, 0, 7, 8), LIFE_COUNT_BACK);
	assert_false(life_said(&l));
	assert_int_equal(ready(&l, 0, 3, 8), LIFE_COUNT_BACK);
	/* The adapter started after its server had served: what it first read
	 * is where this life starts. A down and up while /metrics does not
	 * answer decides, and the next life is not judged against the
	 * counters of the last: one restart, not two. */
	life_init(&l, 5);
	assert_false(ready(&l, 0, 5000, 900));
	assert_false(as(&l, LIFE_DOWN));
	assert_int_equal(ready_unknown(&l), LIFE_DOWN_UP);
	assert_int_equal(ready(&l, 0, 0, 0), LIFE_SAME);
	assert_false(ready(&l, 0, 40, 8));
	assert_true(life_said(&l));
}

/* A new instance is never 0 (which says nothing) nor the one it replaces. */
static void test_new_instance(void **state)
{
	(void)state;
	for (int i = 0; i < 1000; i++) {
		uint32_t v = kvs_new_instance((uint32_t)i);

		assert_int_not_equal(v, 0);
		assert_int_not_equal(v, (uint32_t)i);
	}
}

/* A client's own body (KVS1 flag JSON): kept, include_usage added for a
 * stream only when the client did not ask, cache_prompt for llama.cpp. */
static void test_client_body(void **state)
{
	static const char chat[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
				   "\"model\":\"m\",\"stream\":true,\"temperature\":0}";
	static const char asked[] = "{\"prompt\":\"x\",\"stream\":true,"
				    "\"stream_options\":{\"include_usage\":true}}";
	json_t *extra = json_pack("{s:s,s:i}", "grammar", "g", "temperature", 1);
	char err[128], *b;
	bool added;

	(void)state;
	b = oai_client_body(chat, strlen(chat), true, OAI_VLLM, 0, extra, &added, err, sizeof(err));
	assert_non_null(b);
	assert_true(added);
	/* the client's keys first and kept (its temperature, not extra's) */
	assert_string_equal(b, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
			       "\"model\":\"m\",\"stream\":true,\"temperature\":0,"
			       "\"stream_options\":{\"include_usage\":true},\"grammar\":\"g\"}");
	free(b);
	b = oai_client_body(asked, strlen(asked), true, OAI_LLAMA_CPP, 0, NULL, &added, err,
			    sizeof(err));
	assert_non_null(b);
	assert_false(added);
	assert_non_null(strstr(b, "\"cache_prompt\":true"));
	free(b);
	/* no stream: nothing added */
	b = oai_client_body("{\"prompt\":\"x\"}", 14, false, OAI_VLLM, 0, NULL, &added, err,
			    sizeof(err));
	assert_string_equal(b, "{\"prompt\":\"x\"}");
	assert_false(added);
	free(b);
	assert_null(oai_client_body("[1]", 3, false, OAI_VLLM, 0, NULL, &added, err, sizeof(err)));
	assert_non_null(strstr(err, "not a JSON object"));
	assert_null(
		oai_client_body("{\"a\":", 5, true, OAI_VLLM, 0, NULL, &added, err, sizeof(err)));
	json_decref(extra);
}

/* A tenant's salt (the KVS1 header's, written by the gateway) becomes
 * vLLM's cache_salt, over the client's own; other servers have none. */
static void test_salt(void **state)
{
	static const char own[] = "{\"prompt\":\"x\",\"cache_salt\":\"someone else\"}";
	char err[128], *b;
	bool added;

	(void)state;
	b = oai_client_body(own, strlen(own), false, OAI_VLLM, 0x2a, NULL, &added, err,
			    sizeof(err));
	assert_string_equal(b, "{\"prompt\":\"x\",\"cache_salt\":\"kvs-000000000000002a\"}");
	free(b);
	/* no salt (no tenant): the client's body as it was */
	b = oai_client_body(own, strlen(own), false, OAI_VLLM, 0, NULL, &added, err, sizeof(err));
	assert_string_equal(b, own);
	free(b);
	b = oai_client_body(own, strlen(own), false, OAI_LLAMA_CPP, 0x2a, NULL, &added, err,
			    sizeof(err));
	assert_null(strstr(b, "kvs-"));
	free(b);
	b = oai_completion_body(NULL, "x", 1, 0, OAI_VLLM, 7, NULL);
	assert_non_null(strstr(b, "\"cache_salt\":\"kvs-0000000000000007\""));
	free(b);
}

/* A salt in the adapter's own form names a bound tenant's domain in vLLM's
 * cache: a client whose header salt is 0 (a tenant bound to salt 0, or an
 * unbound client) must not reach it by writing it into its body, nor any
 * client when the server's kind is not known to take one. */
static void test_salt_forged(void **state)
{
	static const char forged[] = "{\"prompt\":\"x\",\"cache_salt\":\"kvs-0000000000005a17\"}";
	char err[128], *b;
	bool added;

	(void)state;
	b = oai_client_body(forged, strlen(forged), false, OAI_VLLM, 0, NULL, &added, err,
			    sizeof(err));
	assert_string_equal(b, "{\"prompt\":\"x\"}");
	free(b);
	b = oai_client_body(forged, strlen(forged), false, OAI_OTHER, 0x2a, NULL, &added, err,
			    sizeof(err));
	assert_string_equal(b, "{\"prompt\":\"x\"}");
	free(b);
}

/* The event include_usage adds is told from a content chunk. */
static void test_usage_only(void **state)
{
	static const char *const yes[] = {
		"{\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}",
		"{\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}",
	};
	static const char *const no[] = {
		"{\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":3}}",
		"{\"choices\":[]}",
	};
	struct oai_event ev;
	size_t i;

	(void)state;
	for (i = 0; i < 2; i++) {
		assert_int_equal(oai_parse_event(yes[i], strlen(yes[i]), &ev), 0);
		assert_true(oai_usage_only(&ev));
		oai_event_free(&ev);
		assert_int_equal(oai_parse_event(no[i], strlen(no[i]), &ev), 0);
		assert_false(oai_usage_only(&ev));
		oai_event_free(&ev);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sse_line_ends),
		cmocka_unit_test(test_sse_fields),
		cmocka_unit_test(test_sse_cut_and_limits),
		cmocka_unit_test(test_event_llama),
		cmocka_unit_test(test_event_vllm),
		cmocka_unit_test(test_event_errors),
		cmocka_unit_test(test_error_mapping),
		cmocka_unit_test(test_body),
		cmocka_unit_test(test_client_body),
		cmocka_unit_test(test_salt),
		cmocka_unit_test(test_salt_forged),
		cmocka_unit_test(test_usage_only),
		cmocka_unit_test(test_metrics),
		cmocka_unit_test(test_metrics_typed),
		cmocka_unit_test(test_metrics_unreadable),
		cmocka_unit_test(test_metrics_capacity),
		cmocka_unit_test(test_metrics_group_max_sum),
		cmocka_unit_test(test_server_capacity),
		cmocka_unit_test(test_server_load),
		cmocka_unit_test(test_life_down_up),
		cmocka_unit_test(test_life_start_time),
		cmocka_unit_test(test_life_start_unknown),
		cmocka_unit_test(test_life_counter_back),
		cmocka_unit_test(test_life_counter_blip),
		cmocka_unit_test(test_life_counter_unknown),
		cmocka_unit_test(test_life_counter_zero),
		cmocka_unit_test(test_life_unread),
		cmocka_unit_test(test_life_counter_first),
		cmocka_unit_test(test_new_instance),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
