// SPDX-License-Identifier: MIT
/*
 * kvsplice-adapter: puts an inference server with an OpenAI-compatible API
 * (vLLM, SGLang, llama.cpp's llama-server) behind the kvsplice gateway. It
 * speaks KVS1 to gateways and HTTP to one server, normally on the server's
 * host: the kernel splices KVS1 frames between sockets, and HTTP begins
 * here (docs/ARCHITECTURE.md, "Real servers").
 *
 * This file: the options, startup and the loop, which waits on the KVS1
 * sockets and libcurl's together (curl_multi_poll with extra descriptors).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapter.h"
#include "args.h"
#include "instance.h"
#include "log.h"
#include "netutil.h"
#include "opts.h"

#define PROG "kvsplice-adapter"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static const struct adapter_config defaults = {
	.listen = "127.0.0.1:0",
	.id = UINT32_MAX,
	.kind = OAI_AUTO,
	.max_payload = KVS_DEFAULT_MAX_PAYLOAD,
	.max_conns = 64,
	.poll_ms = 500,
	.stall_s = 120,
	.connect_ms = 2000,
	.level = KVS_LOG_INFO,
};

#define S struct adapter_config
static const struct kvs_opt rows[] = {
	{ "listen", 'l', KVS_OPT_STR(S, listen), .arg = "ADDR:PORT",
	  .help = "where gateways connect, KVS1 (default\n"
		  "{default}: a free port, see --port-file)" },
	{ "server", 's', KVS_OPT_STR(S, server), .arg = "URL",
	  .help = "the inference server, http://HOST:PORT\n"
		  "(required)" },
	{ "id", 0, KVS_OPT_U32(S, id, 0, UINT32_MAX - 1), .arg = "N",
	  .help = "backend_id in END and PONG frames\n"
		  "(default: the listening port)" },
	{ "model", 'm', KVS_OPT_STR(S, model), .arg = "NAME",
	  .help = "the model field of requests (default: the\n"
		  "first model of the server's /v1/models)" },
	{ "server-kind", 0, KVS_OPT_ENUM(S, kind, "auto", "llama.cpp", "vllm", "sglang", "openai"),
	  .arg = "KIND",
	  .help = "auto (default: from its /metrics and\n"
		  "/slots), llama.cpp, vllm, sglang, or openai\n"
		  "(another OpenAI-compatible server: load is\n"
		  "the adapter's own count)" },
	{ "extra-body", 0, KVS_OPT_STR(S, extra_body), .arg = "JSON",
	  .help = "a JSON object whose keys are added to every\n"
		  "request body ('{\"temperature\":0}'); the\n"
		  "adapter's own keys (prompt, model,\n"
		  "max_tokens, stream, stream_options) win" },
	{ "max-connections", 0, KVS_OPT_U32(S, max_conns, 1, 4096), .arg = "N",
	  .help = "HTTP/1.1 connections to the server, at\n"
		  "most (default {default}; more requests wait\n"
		  "in the adapter); llama.cpp: no more than\n"
		  "its slots" },
	{ "poll-ms", 0, KVS_OPT_U32(S, poll_ms, 50, 600000), .arg = "MS",
	  .help = "how often the server's health and load are\n"
		  "read (default {default})" },
	{ "stall-timeout", 0, KVS_OPT_U32(S, stall_s, 1, 86400), .arg = "S",
	  .help = "a stream that sends no event for S seconds\n"
		  "(keep-alive comments are none) fails with\n"
		  "ERROR timeout (default {default}). Not a\n"
		  "request that asked for no stream: its answer\n"
		  "comes whole at the end, however long it takes" },
	{ "kv-tokens", 0, KVS_OPT_U64(S, kv_tokens, 1, 1ull << 40), .arg = "N",
	  .help = "the server's KV cache in tokens, said to the\n"
		  "gateway, which sizes its index of the server by\n"
		  "it (default: what the server says: vLLM's\n"
		  "cache_config_info, num_gpu_blocks x block_size,\n"
		  "all engines'; SGLang's max_total_num_tokens, its\n"
		  "data-parallel ranks' pools summed; llama.cpp\n"
		  "says none: its slots' contexts and its\n"
		  "--cache-ram MiB of prompts, give their tokens)" },
	{ "connect-timeout-ms", 0, KVS_OPT_U32(S, connect_ms, 1, 600000), .arg = "MS",
	  .help = "connecting to the server (default\n"
		  "{default})" },
	{ "max-frame", 0, KVS_OPT_U32(S, max_payload, 1, KVS_MAX_PAYLOAD_LIMIT), .arg = "BYTES",
	  .help = "largest KVS1 payload accepted or sent\n"
		  "(default {default})" },
	KVS_OPT_ROW_PORT_FILE(S, port_file),
	KVS_OPT_ROW_LOG_LEVEL(S, level),
	KVS_OPT_ROW_HELP,
};
#undef S

static const struct kvs_optset optset = {
	.prog = PROG,
	KVS_OPT_ROWS(rows),
	.defaults = &defaults,
	.usage = "Usage: " PROG " --server http://HOST:PORT [--listen ADDR:PORT] [options]\n"
		 "\n"
		 "Puts an inference server with an OpenAI-compatible API (vLLM, SGLang,\n"
		 "llama.cpp's llama-server) behind the kvsplice gateway: each KVS1 REQUEST\n"
		 "becomes a streamed POST /v1/completions, each piece of generated text a\n"
		 "CHUNK, the server's usage (cached_tokens included) the END; PINGs are\n"
		 "answered from the server's /health and /metrics. Point the gateway's\n"
		 "--backend at --listen.\n"
		 "\n"
		 "Options:\n",
	.footer = "\n"
		  "Server flags that matter (docs/RUNBOOK.md, \"Real inference servers\"):\n"
		  "  vLLM       --enable-prefix-caching --enable-prompt-tokens-details\n"
		  "  SGLang     --enable-cache-report --enable-metrics (radix cache: on)\n"
		  "  llama.cpp  --metrics (its load, and its token counters, by which a\n"
		  "             restart is seen), -np N slots (prefix reuse is on by default)\n",
	.help_col = 27,
	.help_on_error = true,
};

/* http://HOST:PORT with no trailing '/' or "/v1": paths are added to it. */
static int check_server(struct adapter_config *c, char *buf, size_t len)
{
	CURLUcode uc;
	CURLU *u;
	size_t n;

	if (!c->server) {
		fprintf(stderr, PROG ": --server http://HOST:PORT is required\n");
		return -1;
	}
	if (strncmp(c->server, "http://", 7) && strncmp(c->server, "https://", 8)) {
		fprintf(stderr, PROG ": --server: '%s' is not an http:// or https:// URL\n",
			c->server);
		return -1;
	}
	u = curl_url();
	uc = u ? curl_url_set(u, CURLUPART_URL, c->server, 0) : CURLUE_OUT_OF_MEMORY;
	curl_url_cleanup(u);
	if (uc) {
		fprintf(stderr, PROG ": --server: '%s': %s\n", c->server, curl_url_strerror(uc));
		return -1;
	}
	snprintf(buf, len, "%s", c->server);
	n = strlen(buf);
	while (n && buf[n - 1] == '/')
		buf[--n] = '\0';
	if (n >= 3 && !strcmp(buf + n - 3, "/v1"))
		buf[n - 3] = '\0';
	c->server = buf;
	return 0;
}

/* The descriptors to wait on: the listener (unless it rests), then each
 * link. A half-closed link is not read, but its hang-up or error still
 * wakes the poll (and curl reports those as readable). */
static uint32_t wait_set(struct adapter *a, struct curl_waitfd *w, struct link **who, uint64_t now)
{
	uint32_t i, n = 0;

	w[n++] = (struct curl_waitfd){
		.fd = a->lfd,
		.events = now >= a->accept_paused_until_ns ? CURL_WAIT_POLLIN : 0,
	};
	for (i = 0; i < a->nlinks; i++) {
		struct link *l = a->links[i];

		who[n] = l;
		w[n++] = (struct curl_waitfd){
			.fd = l->fd,
			.events = (short)((l->eof ? 0 : CURL_WAIT_POLLIN) |
					  (l->tx.len ? CURL_WAIT_POLLOUT : 0)),
		};
	}
	return n;
}

/* After a turn: what queued goes out, drained links resume their jobs, and
 * links that are done close. */
static void settle(struct adapter *a)
{
	uint32_t i = 0;

	while (i < a->nlinks) {
		struct link *l = a->links[i];

		tx_flush(l);
		if (!l->dead && l->paused && l->tx.len < ADAPTER_TX_LOW)
			job_resume_link(a, l);
		if (l->dead || (l->eof && !l->njobs && !l->tx.len)) {
			link_close(a, l); /* moves the last link to i */
			continue;
		}
		i++;
	}
}

/* Runs the transfers, then answers every one that finished: a transfer
 * left unread here would wait for the next poll's timeout. */
static void perform(struct adapter *a)
{
	CURLMsg *msg;
	int running, left;

	curl_multi_perform(a->multi, &running);
	while ((msg = curl_multi_info_read(a->multi, &left)))
		if (msg->msg == CURLMSG_DONE && !state_done(a, msg->easy_handle, msg->data.result))
			job_done(a, msg->easy_handle, msg->data.result);
}

/* New links, up to 64 a turn. Out of descriptors, the listener rests for
 * a second (it would stay readable and spin), said once a second. */
static void accept_links(struct adapter *a, uint64_t now)
{
	int i, r = 0;

	for (i = 0; i < 64 && (r = link_accept(a)) > 0; i++)
		;
	if (r == -EMFILE || r == -ENFILE || r == -ENOBUFS || r == -ENOMEM) {
		a->accept_failures++;
		a->accept_paused_until_ns = now + 1000000000ull;
		pr_warn("event=accept_paused err=%s failures=%llu", strerror(-r),
			(unsigned long long)a->accept_failures);
	}
}

static int serve(struct adapter *a)
{
	struct curl_waitfd *w = NULL, *nw;
	struct link **who = NULL, **nwho;
	uint32_t cap = 0, n, i;
	uint64_t now;
	int timeout;

	while (!stop_flag) {
		if (a->nlinks + 1 > cap) {
			cap = (a->nlinks + 1) * 2;
			nw = realloc(w, cap * sizeof(*w));
			if (nw)
				w = nw;
			nwho = realloc(who, cap * sizeof(*who));
			if (nwho)
				who = nwho;
			if (!nw || !nwho) {
				pr_warn("event=fatal err=ENOMEM");
				break;
			}
		}
		now = kvs_now_ns();
		timeout = state_tick(a, now);
		n = wait_set(a, w, who, now);
		if (curl_multi_poll(a->multi, w, n, timeout, NULL) != CURLM_OK)
			break;
		perform(a);
		if (w[0].revents & CURL_WAIT_POLLIN)
			accept_links(a, kvs_now_ns());
		for (i = 1; i < n; i++) {
			struct link *l = who[i];

			if (!(w[i].revents & CURL_WAIT_POLLIN) || l->dead)
				continue;
			/* Not read once half-closed: woken, it hung up or
			 * reset. */
			if (l->eof || link_on_readable(a, l))
				l->dead = true;
		}
		/* Requests started above go out in this turn. */
		perform(a);
		job_check_stalls(a, kvs_now_ns());
		settle(a);
	}
	free(w);
	free(who);
	return 0;
}

/* A request's headers with ACCEPT; NULL when out of memory. */
static struct curl_slist *request_headers(const char *accept)
{
	const char *lines[] = {
		"Content-Type: application/json",
		accept,
		/* Without this, curl waits for a 100 Continue before a large body. */
		"Expect:",
	};
	struct curl_slist *l = NULL, *t;

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		t = curl_slist_append(l, lines[i]);
		if (!t) {
			curl_slist_free_all(l);
			return NULL;
		}
		l = t;
	}
	return l;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct adapter *a = calloc(1, sizeof(*a));
	char server[512];
	struct kvs_addr addr;
	uint64_t errors;
	int r, port, rc = 1;

	if (!a)
		return 1;
	a->cfg = defaults;
	r = kvs_opts_argv(&optset, stderr, argc, argv, &a->cfg);
	if (r) {
		free(a);
		return r > 0 ? 0 : 2;
	}
	if (check_server(&a->cfg, server, sizeof(server))) {
		free(a);
		return 2;
	}
	if (kvs_parse_addr(a->cfg.listen, &addr)) {
		fprintf(stderr, PROG ": --listen: '%s' is not ADDR:PORT\n", a->cfg.listen);
		free(a);
		return 2;
	}
	if (a->cfg.extra_body) {
		json_error_t err;

		a->extra = json_loads(a->cfg.extra_body, 0, &err);
		if (!json_is_object(a->extra)) {
			fprintf(stderr, PROG ": --extra-body: not a JSON object (%s)\n",
				a->extra ? "another JSON value" : err.text);
			json_decref(a->extra);
			free(a);
			return 2;
		}
	}
	kvs_log_init(PROG, a->cfg.level);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	snprintf(a->completions_url, sizeof(a->completions_url), "%s/v1/completions",
		 a->cfg.server);
	snprintf(a->chat_url, sizeof(a->chat_url), "%s/v1/chat/completions", a->cfg.server);

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		goto out;
	a->multi = curl_multi_init();
	a->hdrs_stream = request_headers("Accept: text/event-stream");
	a->hdrs_json = request_headers("Accept: application/json");
	if (!a->multi || !a->hdrs_stream || !a->hdrs_json)
		goto out;
	/* Requests take at most max_conns (job.c queues the rest); the
	 * health and load polls have room of their own beside them. */
	curl_multi_setopt(a->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)a->cfg.max_conns + 4);
	curl_multi_setopt(a->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)a->cfg.max_conns + 4);
	curl_multi_setopt(a->multi, CURLMOPT_MAXCONNECTS, (long)a->cfg.max_conns + 4);
	a->lfd = kvs_listen(&addr, 512);
	if (a->lfd < 0) {
		pr_warn("event=listen_failed listen=%s err=%s", a->cfg.listen, strerror(-a->lfd));
		goto out;
	}
	kvs_set_nonblock(a->lfd, 1);
	port = kvs_local_port(a->lfd);
	if (a->cfg.id == UINT32_MAX)
		a->cfg.id = (uint32_t)port;
	life_init(&a->st.life, kvs_new_instance(0));
	if (a->cfg.port_file)
		kvs_write_port_file(a->cfg.port_file, port);
	pr_info("event=listening port=%d id=%u instance=%u server=%s kind=%s max_connections=%u",
		port, a->cfg.id, a->st.life.instance, a->cfg.server, oai_kind_name(a->cfg.kind),
		a->cfg.max_conns);

	rc = serve(a);
	while (a->nlinks)
		link_close(a, a->links[0]);
	job_stop_all(a);
	for (r = 0, errors = 0; r <= KVS_E_MAX; r++)
		errors += a->stats.errors[r];
	pr_info("event=stopped requests=%llu ends=%llu errors=%llu cancels=%llu retries=%llu "
		"duplicates=%llu cancels_kept=%llu chunks=%llu chunk_bytes=%llu links=%llu "
		"polls=%llu poll_failures=%llu",
		(unsigned long long)a->stats.requests, (unsigned long long)a->stats.ends,
		(unsigned long long)errors, (unsigned long long)a->stats.cancels,
		(unsigned long long)a->stats.retries, (unsigned long long)a->stats.duplicates,
		(unsigned long long)a->stats.parked, (unsigned long long)a->stats.chunks,
		(unsigned long long)a->stats.chunk_bytes, (unsigned long long)a->stats.links,
		(unsigned long long)a->st.polls, (unsigned long long)a->st.poll_failures);
out:
	if (a->lfd > 0)
		close(a->lfd);
	state_free(a);
	if (a->multi)
		curl_multi_cleanup(a->multi);
	curl_slist_free_all(a->hdrs_stream);
	curl_slist_free_all(a->hdrs_json);
	curl_global_cleanup();
	json_decref(a->extra);
	free(a->links);
	free(a);
	return rc;
}
