// SPDX-License-Identifier: MIT
/*
 * kvsplice-sim: a backend that speaks KVS1 and behaves like one vLLM
 * instance with automatic prefix caching, on the timing model of
 * user/model/model.h.
 *
 * Requests from all connections go to one engine (user/model/engine.h): continuous
 * batching with chunked prefill under a per-step token budget, prefix
 * caching on 16-token blocks, and the per-step time model. Each step is
 * planned, its modeled duration (times --time-scale) waited on a timer, and
 * then its tokens are sent: one CHUNK frame per token, an END frame with the
 * figures after a request's last. A prompt may end with an end-of-sequence
 * marker (prompt.h) that stops the answer before max_tokens.
 *
 * This file: the options and startup; server.c serves.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#include "args.h"
#include "instance.h"
#include "kvsplice/proto.h"
#include "log.h"
#include "opts.h"
#include "server.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

/* What the options fill: the server's settings and how to start it. */
struct settings {
	struct sim s;
	const char *listen; /* listen_buf after --port */
	char listen_buf[64];
	const char *port_file;
	enum kvs_log_level level;
};

/* Not const: the model's part comes from kvs_model_defaults() (main). */
static struct settings defaults = {
	.s = { .time_scale = 1.0,
	       .max_payload = KVS_DEFAULT_MAX_PAYLOAD,
	       .id = UINT32_MAX,
	       .max_seqs = KVS_ENGINE_MAX_SEQS },
	.listen = "127.0.0.1:0",
	.level = KVS_LOG_INFO,
};

/* --port P: --listen 127.0.0.1:P. */
static int parse_port(FILE *err, const char *who, const struct kvs_opt *o, const char *v, void *dst)
{
	struct settings *a = (void *)((char *)dst - offsetof(struct settings, listen));
	uint32_t port;

	if (kvs_arg_u32(err, who, "--port", v, 0, 65535, &port))
		return -1;
	snprintf(a->listen_buf, sizeof(a->listen_buf), "127.0.0.1:%u", port);
	a->listen = a->listen_buf;
	return 0;
}

#define S struct settings
static const struct kvs_opt rows[] = {
	{ "listen", 'l', KVS_OPT_STR(S, listen), .arg = "ADDR:PORT",
	  .help = "where to listen (default {default}, a free port)" },
	{ "port", 'p', KVS_OPT_FUNC(S, listen, parse_port), .arg = "P",
	  .help = "shorthand for --listen 127.0.0.1:P" },
	KVS_OPT_ROW_PORT_FILE(S, port_file),
	{ "id", 0, KVS_OPT_U32(S, s.id, 0, UINT32_MAX - 1), .arg = "N",
	  .help = "backend id reported in END frames (default: port)" },
	{ "kv-blocks", 0, KVS_OPT_U32(S, s.model.kv_blocks, 1, 1u << 28), .arg = "N",
	  .help = "KV cache capacity in 16-token blocks (default {default})" },
	{ "time-scale", 0, KVS_OPT_DOUBLE(S, s.time_scale, 0, 1000), .arg = "F",
	  .help = "multiply every modeled wait by F (default {default}; tests\n"
		  "use 0.01)" },
	{ "base-ms", 0, KVS_OPT_DOUBLE(S, s.model.base_ms, 0, 1e6), .arg = "MS",
	  .help = "step time model: fixed cost per step (default {default})" },
	{ "per-token-ms", 0, KVS_OPT_DOUBLE(S, s.model.per_token_ms, 0, 1e6), .arg = "MS",
	  .help = "per token in the step (default {default})" },
	{ "prefill-attn-ms", 0, KVS_OPT_DOUBLE(S, s.model.prefill_attn_ms, 0, 1e6), .arg = "MS",
	  .help = "per prefill token x context token (default {default})" },
	{ "decode-ctx-ms", 0, KVS_OPT_DOUBLE(S, s.model.decode_ctx_ms, 0, 1e6), .arg = "MS",
	  .help = "per context token of a decoding sequence (default {default})" },
	{ "step-tokens", 0, KVS_OPT_U32(S, s.model.step_tokens, 1, 1u << 24), .arg = "N",
	  .help = "chunked-prefill budget per step (default {default})" },
	{ "max-frame", 0, KVS_OPT_U32(S, s.max_payload, 1, KVS_MAX_PAYLOAD_LIMIT), .arg = "BYTES",
	  .help = "largest payload accepted (default {default})" },
	{ "max-seqs", 0, KVS_OPT_U32(S, s.max_seqs, 1, 65536), .arg = "N",
	  .help = "requests batched at once (default {default})" },
	{ "not-ready-file", 0, KVS_OPT_STR(S, s.not_ready_file), .arg = "FILE",
	  .help = "while FILE exists, answer PINGs NOT_READY (as an inference\n"
		  "server that is down or loading would)" },
	{ "instance", 0, KVS_OPT_U32(S, s.instance, 1, UINT32_MAX), .arg = "N",
	  .help = "the instance its PONGs say (default: drawn at random at\n"
		  "start; a gateway takes a new one for a restart, its cache\n"
		  "lost: tests give the same one to stand for a reconnect)" },
	KVS_OPT_ROW_LOG_LEVEL(S, level),
	KVS_OPT_ROW_HELP,
};
#undef S

static const struct kvs_optset optset = {
	.prog = PROG,
	KVS_OPT_ROWS(rows),
	.defaults = &defaults,
	.usage = "Usage: " PROG " [--listen ADDR:PORT] [options]\n"
		 "\n"
		 "A KVS1 backend that behaves like a vLLM instance with automatic prefix\n"
		 "caching: 16-token blocks (64 bytes of prompt), chained block hashes, LRU\n"
		 "eviction of unused blocks, continuous batching with chunked prefill, and\n"
		 "the per-step timing model of Llama-3.1-70B on 8xH100.\n"
		 "\n"
		 "A request generates max_tokens tokens (0: none), unless its prompt ends\n"
		 "with an end-of-sequence marker, \" <eos:N>\" (the last bytes of the prompt,\n"
		 "ASCII, N decimal): then it generates N, or max_tokens if that is smaller\n"
		 "and not 0, and its END says how many, as a real model stops at its end\n"
		 "of sequence. kvsplice-bench live appends it (the true output length) so\n"
		 "that max_tokens can be what a real client declares. The marker is part\n"
		 "of the prompt for hashing and caching.\n"
		 "\n"
		 "Options:\n",
	.footer = "",
	.help_col = 27,
	.help_on_error = true,
};

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct settings a;
	struct sim *s = &a.s;
	struct kvs_addr addr;
	int r;

	kvs_model_defaults(&defaults.s.model);
	a = defaults;
	r = kvs_opts_argv(&optset, stderr, argc, argv, &a);
	if (r)
		return r > 0 ? 0 : 2;
	if (kvs_parse_addr(a.listen, &addr)) {
		fprintf(stderr, PROG ": --listen: '%s' is not ADDR:PORT\n", a.listen);
		return 2;
	}
	kvs_log_init(PROG, a.level);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (!s->instance)
		s->instance = kvs_new_instance(0);
	if (sim_start(s, &addr, a.listen))
		return 1;
	if (a.port_file)
		kvs_write_port_file(a.port_file, kvs_local_port(s->lfd));
	pr_info("event=listening port=%d id=%u instance=%u kv_blocks=%u time_scale=%g",
		kvs_local_port(s->lfd), s->id, s->instance, s->model.kv_blocks, s->time_scale);

	sim_serve(s, &stop_flag);
	sim_stop(s);
	return 0;
}
