// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench http: streamed /v1/completions requests straight to an
 * inference server (vLLM, SGLang, llama.cpp), one after another over one
 * keep-alive connection, each timed from the request to its first piece of
 * text (TTFT) and to the end of the stream. The baseline for what
 * kvsplice-adapter adds: `live --connect ADAPTER` with the same prompt and
 * max tokens measures the same through KVS1 (scripts/bench-real.sh).
 */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "fileio.h"
#include "netutil.h"
#include "opts.h"
#include "sse.h"
#include "stats.h"

#define PROG "kvsplice-bench http"

struct http_opts {
	const char *url, *prompt_file, *extra;
	uint32_t requests, max_tokens;
	int json;
};

static const struct http_opts defaults = { .requests = 100, .max_tokens = 16 };

#define O struct http_opts
static const struct kvs_opt rows[] = {
	{ "url", 'u', KVS_OPT_STR(O, url), .arg = "URL",
	  .help = "the server, http://HOST:PORT (required)" },
	{ "prompt-file", 0, KVS_OPT_STR(O, prompt_file), .arg = "FILE",
	  .help = "the prompt of every request (required)" },
	{ "requests", 'n', KVS_OPT_U32(O, requests, 1, 10000000), .arg = "N",
	  .help = "requests, one after another (default {default})" },
	{ "max-tokens", 'm', KVS_OPT_U32(O, max_tokens, 1, 1000000), .arg = "M",
	  .help = "max_tokens of each (default {default})" },
	{ "extra-body", 0, KVS_OPT_STR(O, extra), .arg = "JSON",
	  .help = "keys added to every body (as the adapter's)" },
	{ "json", 0, KVS_OPT_FLAG(O, json), .help = "JSON output" },
	KVS_OPT_ROW_HELP,
};
#undef O

static const struct kvs_optset optset = {
	.prog = PROG,
	KVS_OPT_ROWS(rows),
	.defaults = &defaults,
	.usage = "Usage: kvsplice-bench http --url http://HOST:PORT --prompt-file FILE [options]\n"
		 "\n"
		 "Streamed POST /v1/completions requests straight to an OpenAI-compatible\n"
		 "server, one after another over one keep-alive connection: time to the\n"
		 "first piece of text (TTFT) and to the end of the stream, P50/P90/mean.\n"
		 "\n"
		 "Options:\n",
	.footer = "",
	.help_col = 27,
	.help_on_error = true,
};

/* One request's stream as it comes. */
struct stream {
	struct kvs_sse sse;
	uint64_t t_first;
	uint32_t output_tokens, cached_tokens, prompt_tokens;
	int failed;
};

static int on_event(void *ctx, const char *event, const char *data, size_t len)
{
	struct stream *s = ctx;
	json_t *root, *c0, *u;
	const char *text;

	if (len == 6 && !memcmp(data, "[DONE]", 6))
		return 0;
	root = json_loadb(data, len, 0, NULL);
	if (!json_is_object(root) || json_object_get(root, "error")) {
		s->failed = 1;
		json_decref(root);
		return 1;
	}
	c0 = json_array_get(json_object_get(root, "choices"), 0);
	text = json_string_value(json_object_get(c0, "text"));
	if (text && *text && !s->t_first)
		s->t_first = kvs_now_ns();
	u = json_object_get(root, "usage");
	if (json_is_object(u)) {
		s->output_tokens =
			(uint32_t)json_integer_value(json_object_get(u, "completion_tokens"));
		s->prompt_tokens =
			(uint32_t)json_integer_value(json_object_get(u, "prompt_tokens"));
		s->cached_tokens = (uint32_t)json_integer_value(json_object_get(
			json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
	}
	json_decref(root);
	return 0;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ctx)
{
	struct stream *s = ctx;

	return kvs_sse_feed(&s->sse, p, size * nmemb, on_event, s) ? 0 : size * nmemb;
}

/* The body, or NULL after a message. */
static char *make_body(const struct http_opts *o)
{
	json_t *b = json_object(), *so = json_object(), *extra = NULL;
	char *prompt, *s = NULL;
	size_t len = 0;

	prompt = kvs_read_file(o->prompt_file, 0, &len);
	if (!prompt) {
		fprintf(stderr, PROG ": --prompt-file %s: %s\n", o->prompt_file, strerror(errno));
		goto out;
	}
	if (o->extra) {
		extra = json_loads(o->extra, 0, NULL);
		if (!json_is_object(extra)) {
			fprintf(stderr, PROG ": --extra-body: not a JSON object\n");
			goto out;
		}
	}
	json_object_set_new(b, "prompt", json_stringn(prompt, len));
	json_object_set_new(b, "max_tokens", json_integer(o->max_tokens));
	json_object_set_new(b, "stream", json_true());
	json_object_set_new(so, "include_usage", json_true());
	json_object_set(b, "stream_options", so);
	if (!json_is_string(json_object_get(b, "prompt"))) {
		fprintf(stderr, PROG ": the prompt is not UTF-8 text\n");
		goto out;
	}
	if (extra)
		json_object_update_missing(b, extra);
	s = json_dumps(b, JSON_COMPACT | JSON_PRESERVE_ORDER);
out:
	free(prompt);
	json_decref(extra);
	json_decref(so);
	json_decref(b);
	return s;
}

int bench_http(int argc, char **argv)
{
	struct http_opts o = defaults;
	double *ttft = NULL, *e2e = NULL, f[6];
	struct curl_slist *hdrs = NULL;
	uint64_t out_tok = 0, prompt_tok = 0, cached_tok = 0, t_run;
	uint32_t ok = 0, failed = 0, retries = 0, i;
	char url[600], *body = NULL;
	CURL *h = NULL;
	int r, rc = 1;

	r = kvs_opts_argv(&optset, stderr, argc, argv, &o);
	if (r)
		return r > 0 ? 0 : 2;
	if (!o.url || !o.prompt_file) {
		fprintf(stderr, PROG ": --url and --prompt-file are required\n");
		return 2;
	}
	body = make_body(&o);
	if (!body)
		return 2;
	snprintf(url, sizeof(url), "%s/v1/completions", o.url);
	ttft = calloc(o.requests, sizeof(*ttft));
	e2e = calloc(o.requests, sizeof(*e2e));
	h = curl_easy_init();
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (!ttft || !e2e || !h || !hdrs)
		goto out;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	t_run = kvs_now_ns();
	for (i = 0; i < o.requests; i++) {
		struct stream s = { 0 };
		uint64_t t0 = kvs_now_ns();
		long status = 0;
		CURLcode res;

		kvs_sse_init(&s.sse, 1 << 20);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
		res = curl_easy_perform(h);
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		if (!status && (res == CURLE_SEND_ERROR || res == CURLE_GOT_NOTHING ||
				res == CURLE_RECV_ERROR)) {
			/* The kept-alive connection was closed under us (llama.cpp
			 * closes after every stream): once more on a new one, as
			 * kvsplice-adapter does. */
			retries++;
			curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
			res = curl_easy_perform(h);
			curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 0L);
			curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		}
		kvs_sse_free(&s.sse);
		if (res != CURLE_OK || status != 200 || s.failed || !s.t_first) {
			if (!failed++)
				fprintf(stderr, PROG ": request %u failed: %s, HTTP %ld\n", i,
					curl_easy_strerror(res), status);
			continue;
		}
		ttft[ok] = (double)(s.t_first - t0) / 1e6;
		e2e[ok] = (double)(kvs_now_ns() - t0) / 1e6;
		out_tok += s.output_tokens;
		prompt_tok += s.prompt_tokens;
		cached_tok += s.cached_tokens;
		ok++;
	}
	t_run = kvs_now_ns() - t_run;
	/* One set of figures, printed either way (kvs_percentile sorts). */
	f[0] = kvs_percentile(ttft, ok, 50);
	f[1] = kvs_percentile(ttft, ok, 90);
	f[2] = kvs_mean(ttft, ok);
	f[3] = kvs_percentile(e2e, ok, 50);
	f[4] = kvs_percentile(e2e, ok, 90);
	f[5] = kvs_mean(e2e, ok);
	if (o.json)
		printf("{\"requests\":%u,\"ok\":%u,\"failed\":%u,\"retries\":%u,\"wall_s\":%.3f,"
		       "\"ttft_p50_ms\":%.3f,\"ttft_p90_ms\":%.3f,\"ttft_mean_ms\":%.3f,"
		       "\"e2e_p50_ms\":%.3f,\"e2e_p90_ms\":%.3f,\"e2e_mean_ms\":%.3f,"
		       "\"output_tokens\":%llu,\"prompt_tokens\":%llu,\"cached_tokens\":%llu}\n",
		       o.requests, ok, failed, retries, (double)t_run / 1e9, f[0], f[1], f[2], f[3],
		       f[4], f[5], (unsigned long long)out_tok, (unsigned long long)prompt_tok,
		       (unsigned long long)cached_tok);
	else
		printf("requests %u ok %u failed %u (retried %u) in %.2f s\n"
		       "TTFT ms  P50 %.2f  P90 %.2f  mean %.2f\n"
		       "e2e ms   P50 %.2f  P90 %.2f  mean %.2f\n"
		       "tokens   prompt %llu cached %llu output %llu\n",
		       o.requests, ok, failed, retries, (double)t_run / 1e9, f[0], f[1], f[2], f[3],
		       f[4], f[5], (unsigned long long)prompt_tok, (unsigned long long)cached_tok,
		       (unsigned long long)out_tok);
	rc = failed ? 1 : 0;
out:
	curl_slist_free_all(hdrs);
	if (h)
		curl_easy_cleanup(h);
	free(ttft);
	free(e2e);
	free(body);
	return rc;
}
