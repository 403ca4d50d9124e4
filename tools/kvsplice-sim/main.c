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
 * figures after a request's last.
 *
 * This file: the options and startup; server.c serves.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "kvsplice/proto.h"
#include "log.h"
#include "server.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " [--listen ADDR:PORT] [options]\n"
		"\n"
		"A KVS1 backend that behaves like a vLLM instance with automatic prefix\n"
		"caching: 16-token blocks (64 bytes of prompt), chained block hashes, LRU\n"
		"eviction of unused blocks, continuous batching with chunked prefill, and\n"
		"the per-step timing model of Llama-3.1-70B on 8xH100.\n"
		"\n"
		"Options:\n"
		"  -l, --listen ADDR:PORT   where to listen (default 127.0.0.1:0, a free port)\n"
		"  -p, --port P             shorthand for --listen 127.0.0.1:P\n"
		"      --port-file FILE     write the listening port to FILE once listening\n"
		"      --id N               backend id reported in END frames (default: port)\n"
		"      --kv-blocks N        KV cache capacity in 16-token blocks (default %u)\n"
		"      --time-scale F       multiply every modeled wait by F (default 1; tests\n"
		"                           use 0.01)\n"
		"      --base-ms MS         step time model: fixed cost per step (default %g)\n"
		"      --per-token-ms MS    per token in the step (default %g)\n"
		"      --prefill-attn-ms MS per prefill token x context token (default %g)\n"
		"      --decode-ctx-ms MS   per context token of a decoding sequence (default %g)\n"
		"      --step-tokens N      chunked-prefill budget per step (default %u)\n"
		"      --max-frame BYTES    largest payload accepted (default %u)\n"
		"      --max-seqs N         requests batched at once (default %u)\n"
		"      --log-level LEVEL    warn, info (default) or debug\n"
		"  -h, --help               this text\n",
		(unsigned int)KVS_MODEL_KV_BLOCKS, KVS_MODEL_BASE_MS, KVS_MODEL_PER_TOKEN_MS,
		KVS_MODEL_PREFILL_ATTN_MS, KVS_MODEL_DECODE_CTX_MS,
		(unsigned int)KVS_MODEL_STEP_TOKENS, KVS_DEFAULT_MAX_PAYLOAD,
		(unsigned int)KVS_ENGINE_MAX_SEQS);
}

enum {
	OPT_PORT_FILE = 256,
	OPT_ID,
	OPT_KV,
	OPT_SCALE,
	OPT_BASE,
	OPT_PER_TOKEN,
	OPT_ATTN,
	OPT_DECODE,
	OPT_STEP,
	OPT_MAX_FRAME,
	OPT_MAX_SEQS,
	OPT_LOG,
};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "port", required_argument, NULL, 'p' },
		{ "port-file", required_argument, NULL, OPT_PORT_FILE },
		{ "id", required_argument, NULL, OPT_ID },
		{ "kv-blocks", required_argument, NULL, OPT_KV },
		{ "time-scale", required_argument, NULL, OPT_SCALE },
		{ "base-ms", required_argument, NULL, OPT_BASE },
		{ "per-token-ms", required_argument, NULL, OPT_PER_TOKEN },
		{ "prefill-attn-ms", required_argument, NULL, OPT_ATTN },
		{ "decode-ctx-ms", required_argument, NULL, OPT_DECODE },
		{ "step-tokens", required_argument, NULL, OPT_STEP },
		{ "max-frame", required_argument, NULL, OPT_MAX_FRAME },
		{ "max-seqs", required_argument, NULL, OPT_MAX_SEQS },
		{ "log-level", required_argument, NULL, OPT_LOG },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct sim s = { .time_scale = 1.0,
			 .max_payload = KVS_DEFAULT_MAX_PAYLOAD,
			 .id = UINT32_MAX,
			 .max_seqs = KVS_ENGINE_MAX_SEQS };
	struct sigaction sa = { .sa_handler = on_signal };
	char listen_buf[64] = "127.0.0.1:0";
	const char *listen = listen_buf, *port_file = NULL;
	enum kvs_log_level level = KVS_LOG_INFO;
	struct kvs_addr addr;
	uint32_t port;
	int opt;

	kvs_model_defaults(&s.model);
	while ((opt = getopt_long(argc, argv, "l:p:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'l':
			listen = optarg;
			break;
		case 'p':
			if (kvs_arg_u32(PROG, "--port", optarg, 0, 65535, &port))
				return 2;
			snprintf(listen_buf, sizeof(listen_buf), "127.0.0.1:%u", port);
			listen = listen_buf;
			break;
		case OPT_PORT_FILE:
			port_file = optarg;
			break;
		case OPT_ID:
			if (kvs_arg_u32(PROG, "--id", optarg, 0, UINT32_MAX - 1, &s.id))
				return 2;
			break;
		case OPT_KV:
			if (kvs_arg_u32(PROG, "--kv-blocks", optarg, 1, 1u << 28,
					&s.model.kv_blocks))
				return 2;
			break;
		case OPT_SCALE:
			if (kvs_arg_double(PROG, "--time-scale", optarg, 0, 1000, &s.time_scale))
				return 2;
			break;
		case OPT_BASE:
			if (kvs_arg_double(PROG, "--base-ms", optarg, 0, 1e6, &s.model.base_ms))
				return 2;
			break;
		case OPT_PER_TOKEN:
			if (kvs_arg_double(PROG, "--per-token-ms", optarg, 0, 1e6,
					   &s.model.per_token_ms))
				return 2;
			break;
		case OPT_ATTN:
			if (kvs_arg_double(PROG, "--prefill-attn-ms", optarg, 0, 1e6,
					   &s.model.prefill_attn_ms))
				return 2;
			break;
		case OPT_DECODE:
			if (kvs_arg_double(PROG, "--decode-ctx-ms", optarg, 0, 1e6,
					   &s.model.decode_ctx_ms))
				return 2;
			break;
		case OPT_STEP:
			if (kvs_arg_u32(PROG, "--step-tokens", optarg, 1, 1u << 24,
					&s.model.step_tokens))
				return 2;
			break;
		case OPT_MAX_FRAME:
			if (kvs_arg_u32(PROG, "--max-frame", optarg, 1, KVS_MAX_PAYLOAD_LIMIT,
					&s.max_payload))
				return 2;
			break;
		case OPT_MAX_SEQS:
			if (kvs_arg_u32(PROG, "--max-seqs", optarg, 1, 65536, &s.max_seqs))
				return 2;
			break;
		case OPT_LOG:
			if (kvs_arg_log_level(PROG, optarg, &level))
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s' (see --help)\n", argv[optind]);
		return 2;
	}
	if (kvs_parse_addr(listen, &addr)) {
		fprintf(stderr, PROG ": --listen: '%s' is not ADDR:PORT\n", listen);
		return 2;
	}
	kvs_log_init(PROG, level);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (sim_start(&s, &addr, listen))
		return 1;
	if (port_file)
		kvs_write_port_file(port_file, kvs_local_port(s.lfd));
	pr_info("event=listening port=%d id=%u kv_blocks=%u time_scale=%g", kvs_local_port(s.lfd),
		s.id, s.model.kv_blocks, s.time_scale);

	sim_serve(&s, &stop_flag);
	sim_stop(&s);
	return 0;
}
