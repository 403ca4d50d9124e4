// SPDX-License-Identifier: MIT
/*
 * fake_openai: an OpenAI-compatible server that misbehaves on request, for
 * the adapter's fault tests. The prompt of a POST /v1/completions names
 * what it does ("mode:NAME" anywhere in the body):
 *   ok         three text events, the usage, [DONE]
 *   malformed  an event that is not JSON
 *   oversize   an event of 2 MiB
 *   cut        one text event, then half an event, then EOF
 *   stall      one text event, then silence until the client leaves
 *   errevent   one text event, then an error event
 *   http400    HTTP 400 with an OpenAI error body
 *   http500    HTTP 500 with a text body
 *   ctx        HTTP 400 "maximum context length" (vLLM's words)
 *   reset      the connection reset after the request
 *   e503       HTTP 503 with an empty body
 *   e400       HTTP 400 with an empty body
 *   json200    HTTP 200 with a JSON body, not a stream
 *   doneopen   a whole stream, [DONE], then the connection held open
 *   donechunked  a whole stream in chunks on a keep-alive connection,
 *              [DONE], then silence, the body's last chunk never sent,
 *              until the client leaves (counted in STALL_FILE.done)
 *   slow       as ok, 2 ms between events (transfers end at any moment)
 *   errflood   HTTP 500 whose text body never ends (until the client leaves)
 *   jsonflood  HTTP 200 application/json whose body never ends
 *   afterdone  as ok, then text events after [DONE] until the client leaves
 *   pings      one text event, then a keep-alive comment every 100 ms, no
 *              event, until the client leaves
 *   bigheader  a stream whose headers hold a line of 150 KB (libcurl
 *              takes 100 KB) after its Content-Type
 *   manyheaders  a stream with 400 KB of header lines of 1 KB (libcurl
 *              takes 300 KB in all) before its Content-Type
 *   slowjson   a whole JSON response (a request that asked for no stream)
 *              after 3 s of silence: a long generation
 *   holdjson   as llama.cpp answers a request that asked for no stream: it
 *              "generates" until HEALTH_FILE.release exists, whether its
 *              client has gone or not, then writes the whole JSON response
 *              (counted in STALL_FILE.held when it begins, and in
 *              STALL_FILE.held-done when it is over)
 * Every POST /v1/completions is counted in STALL_FILE.posts as it arrives.
 * GET /health answers 200 while HEALTH_FILE exists, else 503, or nothing
 * while HEALTH_FILE.stall-health exists (counted in STALL_FILE.health when
 * its client gives up: a busy server answering late); /metrics
 * serves vLLM-style gauges (running 2, waiting 1, KV 50%), or nothing
 * while HEALTH_FILE.stall-metrics exists (a server whose loop is stuck),
 * with process_start_time_seconds read from HEALTH_FILE.start while that
 * exists (a test stands a restart by writing another), and the counters
 * vllm:prompt_tokens_total and vllm:generation_tokens_total both at the
 * value HEALTH_FILE.tokens holds while that exists (a test stands the
 * tokens served by writing a higher one, a restart by writing a lower),
 * and once served, the value written to HEALTH_FILE.tokens-served (a test
 * knows a poll has read it); while HEALTH_FILE.tokens-more exists, the
 * counters have a second label set (another engine) at the value it holds
 * ("NaN" too), while HEALTH_FILE.tokens-type does, they are typed as it
 * says ("gauge"), or all three at once while HEALTH_FILE.counters holds
 * "TOKENS MORE TYPE" (MORE "-": none), and what was served is written to
 * HEALTH_FILE.counters-served as "TOKENS MORE TYPE"; while
 * HEALTH_FILE.kv-blocks exists, vllm:cache_config_info with block_size 16
 * and num_gpu_blocks the value it holds ("None" too); or, while
 * HEALTH_FILE.metrics-status holds
 * an HTTP status, that status and an empty body (llama-server's 501
 * without --metrics, a proxy's 502); /v1/models one model, "fake". Every stalled client is counted in
 * STALL_FILE (one line per stalled request that its client then left;
 * /metrics' in STALL_FILE.metrics), so a test can see that a cancelled
 * transfer really closed its connection.
 *
 * A prompt that names no mode gets DEFAULT_MODE (default ok).
 *
 *   fake_openai PORT_FILE HEALTH_FILE STALL_FILE [DEFAULT_MODE]
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "netutil.h"

static const char *health_file, *stall_file, *default_mode = "ok";

static void put(int fd, const char *s)
{
	kvs_write_all(fd, s, strlen(s));
}

static void respond(int fd, int status, const char *type, const char *body)
{
	char h[256];

	snprintf(h, sizeof(h),
		 "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n",
		 status, type, strlen(body));
	put(fd, h);
	put(fd, body);
}

static void stream_head(int fd)
{
	put(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n");
}

/* s as one chunk of a chunked body. */
static void chunk(int fd, const char *s)
{
	char h[32];

	snprintf(h, sizeof(h), "%zx\r\n", strlen(s));
	put(fd, h);
	put(fd, s);
	put(fd, "\r\n");
}

static const char text_event[] = "data: {\"choices\":[{\"text\":\"tok \",\"index\":0}]}\n\n";

/* A stalled client has left: a line in FILE SUFFIX. */
static void count_left(const char *file, const char *suffix)
{
	char path[512];
	FILE *f;

	if (!file)
		return;
	snprintf(path, sizeof(path), "%s%s", file, suffix);
	f = fopen(path, "a");
	if (f) {
		fputs("left\n", f);
		fclose(f);
	}
}

/* Bytes for ever, until the client leaves (a write fails). */
static void flood(int fd)
{
	char k[16384];

	memset(k, 'x', sizeof(k));
	while (!kvs_write_all(fd, k, sizeof(k)))
		;
}

/* Nothing, until the client leaves. */
static void stall_until_closed(int fd)
{
	char c;

	while (recv(fd, &c, 1, 0) > 0)
		;
}

/* A whole stream behind headers beyond libcurl's limits: one line of
 * 150 KB after the Content-Type (one_line), else 400 lines of 1 KB before
 * it. */
static void big_headers(int fd, bool one_line)
{
	char k[1024];
	int i;

	memset(k, 'x', sizeof(k) - 1);
	k[sizeof(k) - 1] = '\0';
	if (!one_line)
		memcpy(k, "X-Pad: ", 7);
	put(fd, one_line ? "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Big: " :
			   "HTTP/1.1 200 OK\r\n");
	for (i = 0; i < (one_line ? 150 : 400); i++) {
		put(fd, k);
		if (!one_line)
			put(fd, "\r\n");
	}
	put(fd, one_line ? "\r\nConnection: close\r\n\r\n" :
			   "Content-Type: text/event-stream\r\nConnection: close\r\n\r\n");
	put(fd, text_event);
	put(fd, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,"
		"\"completion_tokens\":1}}\n\ndata: [DONE]\n\n");
}

/* Whether HEALTH_FILE SUFFIX exists. */
static bool flag(const char *suffix)
{
	char path[512];

	snprintf(path, sizeof(path), "%s%s", health_file, suffix);
	return !access(path, F_OK);
}

static bool metrics_stalled(void)
{
	return flag(".stall-metrics");
}

static const char whole_json[] =
	"{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
	"\"text\":\"whole at last\",\"finish_reason\":\"length\"}],\"usage\":{"
	"\"prompt_tokens\":9,\"completion_tokens\":3,\"prompt_tokens_details\":"
	"{\"cached_tokens\":4}}}";

/* llama.cpp's way with a request that asked for no stream: generated to
 * the end whether its client is there or not (bounded at 60 s so that a
 * test that failed leaves nothing behind). */
static void hold_json(int fd)
{
	int i;

	count_left(stall_file, ".held");
	for (i = 0; i < 3000 && !flag(".release"); i++)
		usleep(20000);
	respond(fd, 200, "application/json", whole_json);
	count_left(stall_file, ".held-done");
}

/* The first line of HEALTH_FILE SUFFIX into buf; empty if none. */
static void read_line(const char *suffix, char *buf, size_t size)
{
	char path[512];
	FILE *f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "%s%s", health_file, suffix);
	f = fopen(path, "r");
	if (!f)
		return;
	if (!fgets(buf, (int)size, f))
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

/* text as HEALTH_FILE SUFFIX, whole (renamed into place). */
static void write_line(const char *suffix, const char *text)
{
	char path[512], tmp[520];
	FILE *f;

	snprintf(path, sizeof(path), "%s%s", health_file, suffix);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "%s\n", text);
	if (fclose(f) || rename(tmp, path))
		unlink(tmp);
}

/* /metrics: vLLM's gauges, and the process' start time and its counters
 * if the test set them. */
static void serve_metrics(int fd)
{
	char started[32], tokens[32], more[32], type[32], counters[512] = "", body[1280];
	char kv[32], capacity[160] = "", three[100];
	char status[16], extra[2][128] = { "", "" }, served[128];
	static const char *const names[2] = { "vllm:prompt_tokens_total",
					      "vllm:generation_tokens_total" };

	read_line(".metrics-status", status, sizeof(status));
	if (atoi(status) > 0) {
		respond(fd, atoi(status), "text/plain", "");
		return;
	}
	read_line(".start", started, sizeof(started));
	read_line(".tokens", tokens, sizeof(tokens));
	read_line(".tokens-more", more, sizeof(more));
	read_line(".tokens-type", type, sizeof(type));
	/* The three in one file, read in one go: written as three, a poll
	 * between two writes served a mix the test never set. */
	read_line(".counters", three, sizeof(three));
	if (three[0] && sscanf(three, "%31s %31s %31s", tokens, more, type) == 3 &&
	    !strcmp(more, "-"))
		more[0] = '\0';
	read_line(".kv-blocks", kv, sizeof(kv));
	if (kv[0])
		snprintf(capacity, sizeof(capacity),
			 "# TYPE vllm:cache_config_info gauge\n"
			 "vllm:cache_config_info{block_size=\"16\",engine=\"0\","
			 "num_gpu_blocks=\"%s\"} 1.0\n",
			 kv);
	if (!type[0])
		snprintf(type, sizeof(type), "counter");
	for (int i = 0; i < 2 && more[0]; i++)
		snprintf(extra[i], sizeof(extra[i]), "%s{model_name=\"fake\",engine=\"1\"} %s\n",
			 names[i], more);
	if (tokens[0])
		snprintf(counters, sizeof(counters),
			 "# TYPE %s %s\n%s{model_name=\"fake\"} %s\n%s"
			 "# TYPE %s %s\n%s{model_name=\"fake\"} %s\n%s",
			 names[0], type, names[0], tokens, extra[0], names[1], type, names[1],
			 tokens, extra[1]);
	snprintf(body, sizeof(body),
		 "# TYPE vllm:num_requests_running gauge\n"
		 "vllm:num_requests_running{model_name=\"fake\"} 2\n"
		 "vllm:num_requests_waiting{model_name=\"fake\"} 1\n"
		 "vllm:kv_cache_usage_perc{model_name=\"fake\"} 0.5\n"
		 "%s%s%s%s%s",
		 started[0] ? "process_start_time_seconds " : "", started, started[0] ? "\n" : "",
		 counters, capacity);
	respond(fd, 200, "text/plain", body);
	if (tokens[0]) {
		write_line(".tokens-served", tokens);
		snprintf(served, sizeof(served), "%s %s %s", tokens, more[0] ? more : "-", type);
		write_line(".counters-served", served);
	}
}

static void serve_completion(int fd, const char *req)
{
	const char *m = strstr(req, "mode:");
	char mode[16];
	int i;

	snprintf(mode, sizeof(mode), "%s", default_mode);
	if (m)
		sscanf(m + 5, "%15[a-z0-9]", mode);
	if (!strcmp(mode, "http400")) {
		respond(fd, 400, "application/json",
			"{\"error\":{\"message\":\"'n' must be 1\",\"code\":400}}");
	} else if (!strcmp(mode, "http500")) {
		respond(fd, 500, "text/plain", "Internal Server Error\n");
	} else if (!strcmp(mode, "ctx")) {
		respond(fd, 400, "application/json",
			"{\"object\":\"error\",\"message\":\"This model's maximum context length is "
			"4096 tokens.\",\"code\":400}");
	} else if (!strcmp(mode, "e503")) {
		respond(fd, 503, "text/plain", "");
	} else if (!strcmp(mode, "e400")) {
		respond(fd, 400, "text/plain", "");
	} else if (!strcmp(mode, "slowjson")) {
		sleep(3);
		respond(fd, 200, "application/json", whole_json);
	} else if (!strcmp(mode, "holdjson")) {
		hold_json(fd);
	} else if (!strcmp(mode, "json200")) {
		respond(fd, 200, "application/json", "{\"choices\":[{\"text\":\"all at once\"}]}");
	} else if (!strcmp(mode, "errflood") || !strcmp(mode, "jsonflood")) {
		put(fd,
		    strcmp(mode, "errflood") ?
			    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"x\":\"" :
			    "HTTP/1.1 500 X\r\nContent-Type: text/plain\r\n\r\nflooding: ");
		flood(fd);
	} else if (!strcmp(mode, "donechunked")) {
		put(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
			"Transfer-Encoding: chunked\r\n\r\n");
		for (i = 0; i < 3; i++)
			chunk(fd, text_event);
		chunk(fd, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,"
			  "\"completion_tokens\":3}}\n\ndata: [DONE]\n\n");
		stall_until_closed(fd); /* no "0\r\n\r\n" */
		count_left(stall_file, ".done");
	} else if (!strcmp(mode, "bigheader") || !strcmp(mode, "manyheaders")) {
		big_headers(fd, !strcmp(mode, "bigheader"));
	} else if (!strcmp(mode, "reset")) {
		struct linger lg = { 1, 0 };

		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	} else {
		stream_head(fd);
		put(fd, text_event);
		if (!strcmp(mode, "ok") || !strcmp(mode, "doneopen") || !strcmp(mode, "slow") ||
		    !strcmp(mode, "afterdone")) {
			int gap = strcmp(mode, "slow") ? 0 : 2000;
			char c;

			usleep(gap);
			put(fd, text_event);
			usleep(gap);
			put(fd, text_event);
			usleep(gap);
			put(fd, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,"
				"\"completion_tokens\":3,\"prompt_tokens_details\":"
				"{\"cached_tokens\":4}}}\n\ndata: [DONE]\n\n");
			if (!strcmp(mode, "doneopen")) /* until the client closes */
				while (recv(fd, &c, 1, 0) > 0)
					;
			while (!strcmp(mode, "afterdone") &&
			       !kvs_write_all(fd, text_event, strlen(text_event)))
				usleep(1000); /* events after the end, until it leaves */
		} else if (!strcmp(mode, "malformed")) {
			put(fd, "data: {\"choices\": [nope\n\n");
		} else if (!strcmp(mode, "oversize")) {
			put(fd, "data: \"");
			for (i = 0; i < 2048; i++) {
				char k[1024];

				memset(k, 'x', sizeof(k));
				if (kvs_write_all(fd, k, sizeof(k)))
					break;
			}
		} else if (!strcmp(mode, "pings")) {
			while (!kvs_write_all(fd, ": ping\n", 7))
				usleep(100000);
		} else if (!strcmp(mode, "cut")) {
			put(fd, "data: {\"choi");
		} else if (!strcmp(mode, "stall")) {
			/* Until the client closes: then it is counted. */
			stall_until_closed(fd);
			count_left(stall_file, "");
		} else if (!strcmp(mode, "errevent")) {
			put(fd, "data: {\"error\":{\"code\":500,\"message\":\"The model produced "
				"output that does not match\",\"type\":\"server_error\"}}\n\n");
		}
	}
}

static void serve(int fd)
{
	char req[65536];
	size_t n = 0;
	char *end;
	long clen = 0;

	for (;;) {
		ssize_t r = recv(fd, req + n, sizeof(req) - 1 - n, 0);

		if (r <= 0)
			return;
		n += (size_t)r;
		req[n] = '\0';
		end = strstr(req, "\r\n\r\n");
		if (!end)
			continue;
		if (strcasestr(req, "Content-Length:"))
			clen = atol(strcasestr(req, "Content-Length:") + 15);
		if ((size_t)(end + 4 - req) + (size_t)clen <= n || n == sizeof(req) - 1)
			break;
	}
	if (!strncmp(req, "GET /health", 11) && flag(".stall-health")) {
		stall_until_closed(fd);
		count_left(stall_file, ".health");
	} else if (!strncmp(req, "GET /health", 11))
		respond(fd, access(health_file, F_OK) ? 503 : 200, "application/json",
			access(health_file, F_OK) ? "{\"error\":{\"message\":\"Loading model\"}}" :
						    "{\"status\":\"ok\"}");
	else if (!strncmp(req, "GET /metrics", 12) && metrics_stalled()) {
		stall_until_closed(fd);
		count_left(stall_file, ".metrics");
	} else if (!strncmp(req, "GET /metrics", 12))
		serve_metrics(fd);
	else if (!strncmp(req, "GET /v1/models", 14))
		respond(fd, 200, "application/json", "{\"data\":[{\"id\":\"fake\"}]}");
	else if (!strncmp(req, "POST /v1/completions", 20)) {
		count_left(stall_file, ".posts");
		serve_completion(fd, req);
	} else
		respond(fd, 404, "text/plain", "not found\n");
}

int main(int argc, char **argv)
{
	struct kvs_addr addr;
	int lfd;

	if (argc != 4 && argc != 5) {
		fprintf(stderr,
			"usage: fake_openai PORT_FILE HEALTH_FILE STALL_FILE [DEFAULT_MODE]\n");
		return 2;
	}
	health_file = argv[2];
	stall_file = argv[3];
	if (argc == 5)
		default_mode = argv[4];
	signal(SIGCHLD, SIG_IGN); /* children reaped by the kernel */
	signal(SIGPIPE, SIG_IGN);
	if (kvs_parse_addr("127.0.0.1:0", &addr))
		return 1;
	lfd = kvs_listen(&addr, 128);
	if (lfd < 0)
		return 1;
	kvs_write_port_file(argv[1], kvs_local_port(lfd));
	for (;;) {
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		if (fork() == 0) {
			close(lfd);
			serve(fd);
			close(fd);
			_exit(0);
		}
		close(fd);
	}
}
