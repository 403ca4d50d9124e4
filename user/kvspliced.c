// SPDX-License-Identifier: MIT
/* kvspliced: the kvsplice gateway and controller. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "gateway.h"
#include "kvsplice/hash.h"
#include "kvsplice/proto.h"
#include "log.h"
#include "model.h"
#include "policy.h"

#define PROG "kvspliced"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " --listen ADDR:PORT --backend ADDR:PORT [--backend ...] [options]\n"
		"\n"
		"Prefix-aware gateway for LLM inference backends speaking KVS1. Requests are\n"
		"spliced to the backend that holds their prompt prefix by a BPF sockmap\n"
		"program; the first request of a prefix is routed here (the slow path), which\n"
		"installs the routes that let the kernel route the next ones by itself.\n"
		"\n"
		"Options:\n"
		"  -l, --listen ADDR:PORT     address clients connect to (default 127.0.0.1:7480;\n"
		"                             port 0 picks a free one, see --port-file)\n"
		"  -b, --backend ADDR:PORT    a backend; repeat for each (at most %d)\n"
		"      --pool N               upstream connections per backend (default %d, max %d)\n"
		"      --max-outstanding N    requests in flight per backend before new ones go\n"
		"                             elsewhere or get a 'busy' error (default %u; 0: no\n"
		"                             limit)\n"
		"      --max-client-inflight N  requests one client connection may have in flight;\n"
		"                             more get a 'busy' error (default %u; 0: no limit).\n"
		"                             With --max-outstanding it bounds what the kernel\n"
		"                             queues for a client or backend that stops reading\n"
		"      --health-interval-ms MS  PING each backend this often; one that has not\n"
		"                             answered within three intervals is ejected (down,\n"
		"                             retried with back-off) (default %u; 0: never)\n"
		"      --max-frame BYTES      largest payload accepted (default %u, max %u); every\n"
		"                             spliced socket's receive buffer is sized from it\n"
		"      --window-blocks N      prompt blocks of %d bytes the kernel hashes (default\n"
		"                             and max %d)\n"
		"      --frame-timeout-ms MS  a frame not complete by then aborts its connection\n"
		"                             (slow senders; default 30000)\n"
		"      --balance F            load bound: a backend above F x the fleet's mean\n"
		"                             outstanding work (in tokens) takes no new request\n"
		"                             from the controller (default %.2f)\n"
		"      --backend-kv-blocks N  KV capacity of each backend in 16-token blocks; the\n"
		"                             controller's index of what each holds is bounded by\n"
		"                             it (default %u, ~1.3 M tokens)\n"
		"      --min-match-pct P      a cached prefix covering less than P%% of the prompt\n"
		"                             (a system prompt everybody shares) is not followed by\n"
		"                             the kernel nor decisive for the controller (default %u)\n"
		"      --kernel-slack-tokens N  the kernel follows a route while the backend's work\n"
		"                             is within balance x mean + one typical request's work\n"
		"                             (at least N tokens); past that the controller\n"
		"                             decides, and may spill (default %u)\n"
		"      --release-prefill WHEN a request's prefill work stops counting as its\n"
		"                             backend's load at its 'first-token' (default) or\n"
		"                             at its 'end'; see docs/ARCHITECTURE.md\n"
		"\n"
		"Admission (an XDP program on the interface clients arrive on; TCP to the\n"
		"gateway's port only; drops are counted in 'kvsplicectl stats'):\n"
		"      --xdp-iface IFACE      attach it to IFACE (native XDP if the driver has\n"
		"                             it, else generic)\n"
		"      --allow CIDR           only sources in these CIDRs get in; repeat (IPv4\n"
		"                             or IPv6, at most %d; default: everybody)\n"
		"      --deny CIDR            sources in these CIDRs are dropped, even if allowed;\n"
		"                             repeat\n"
		"      --syn-rate N           new connections (SYNs) per source per second\n"
		"                             (default 0: no limit)\n"
		"      --syn-burst N          SYNs a source may send at once (default: N of\n"
		"                             --syn-rate)\n"
		"\n"
		"Upgrades without dropping a connection:\n"
		"      --handover-socket PATH a Unix socket (root's) where a new controller can\n"
		"                             ask this one for its sockets\n"
		"      --takeover             start by taking over from the controller at\n"
		"                             --handover-socket: its listening socket, client and\n"
		"                             backend connections and pinned maps (same\n"
		"                             --pin-dir and --backend list); it then exits\n"
		"\n"
		"      --pin-dir DIR          where maps are pinned (default %s)\n"
		"      --keep-pins            leave the maps pinned after exit, for inspection\n"
		"      --port-file FILE       write the listening port to FILE once listening\n"
		"      --metrics ADDR:PORT    serve Prometheus metrics at http://ADDR:PORT/metrics\n"
		"      --log-level LEVEL      warn, info (default) or debug; logs are logfmt on stderr\n"
		"  -h, --help                 this text\n"
		"\n"
		"Needs root (BPF, sockmap) and bpffs, mounted on /sys/fs/bpf if absent.\n"
		"Inspect a running gateway with 'kvsplicectl stats' or\n"
		"'bpftool map dump pinned %s/backends'. See docs/ARCHITECTURE.md.\n",
		KVS_MAX_BACKENDS, KVS_DEFAULT_POOL, KVS_MAX_POOL, KVS_DEFAULT_MAX_OUTSTANDING,
		KVS_DEFAULT_CLIENT_INFLIGHT, KVS_DEFAULT_HEALTH_INTERVAL_MS, KVS_DEFAULT_MAX_PAYLOAD,
		KVS_MAX_PAYLOAD_LIMIT, KVS_BLOCK_BYTES, KVS_MAX_WINDOW_BLOCKS, KVS_POLICY_BALANCE,
		(unsigned int)KVS_MODEL_KV_BLOCKS, (unsigned int)(KVS_POLICY_MIN_MATCH_SHARE * 100),
		512u, KVS_ADM_MAX_LIST, KVS_DEFAULT_PIN_DIR, KVS_DEFAULT_PIN_DIR);
}

enum {
	OPT_POOL = 256,
	OPT_MAX_OUT,
	OPT_CLIENT_INFLIGHT,
	OPT_HEALTH,
	OPT_MAX_FRAME,
	OPT_WINDOW,
	OPT_FRAME_TIMEOUT,
	OPT_BALANCE,
	OPT_KV_BLOCKS,
	OPT_MIN_MATCH,
	OPT_SLACK,
	OPT_RELEASE,
	OPT_PIN_DIR,
	OPT_KEEP_PINS,
	OPT_PORT_FILE,
	OPT_LOG_LEVEL,
	OPT_XDP_IFACE,
	OPT_ALLOW,
	OPT_DENY,
	OPT_SYN_RATE,
	OPT_SYN_BURST,
	OPT_HANDOVER,
	OPT_TAKEOVER,
	OPT_METRICS,
};

/* --allow / --deny: checked here, so a typo stops the start with a message. */
static int add_cidr(const char *opt, const char *v, const char **list, uint32_t *n)
{
	uint8_t addr[16];
	uint32_t plen;
	int family;

	if (kvs_cidr_parse(v, &family, addr, &plen)) {
		fprintf(stderr, PROG ": %s: '%s' is not an address or CIDR (10.0.0.0/8, fd00::/8)\n",
			opt, v);
		return -1;
	}
	if (*n == KVS_ADM_MAX_LIST) {
		fprintf(stderr, PROG ": %s: at most %d\n", opt, KVS_ADM_MAX_LIST);
		return -1;
	}
	list[(*n)++] = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "backend", required_argument, NULL, 'b' },
		{ "pool", required_argument, NULL, OPT_POOL },
		{ "max-outstanding", required_argument, NULL, OPT_MAX_OUT },
		{ "max-client-inflight", required_argument, NULL, OPT_CLIENT_INFLIGHT },
		{ "health-interval-ms", required_argument, NULL, OPT_HEALTH },
		{ "max-frame", required_argument, NULL, OPT_MAX_FRAME },
		{ "window-blocks", required_argument, NULL, OPT_WINDOW },
		{ "frame-timeout-ms", required_argument, NULL, OPT_FRAME_TIMEOUT },
		{ "balance", required_argument, NULL, OPT_BALANCE },
		{ "backend-kv-blocks", required_argument, NULL, OPT_KV_BLOCKS },
		{ "min-match-pct", required_argument, NULL, OPT_MIN_MATCH },
		{ "kernel-slack-tokens", required_argument, NULL, OPT_SLACK },
		{ "release-prefill", required_argument, NULL, OPT_RELEASE },
		{ "pin-dir", required_argument, NULL, OPT_PIN_DIR },
		{ "keep-pins", no_argument, NULL, OPT_KEEP_PINS },
		{ "port-file", required_argument, NULL, OPT_PORT_FILE },
		{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
		{ "xdp-iface", required_argument, NULL, OPT_XDP_IFACE },
		{ "allow", required_argument, NULL, OPT_ALLOW },
		{ "deny", required_argument, NULL, OPT_DENY },
		{ "syn-rate", required_argument, NULL, OPT_SYN_RATE },
		{ "syn-burst", required_argument, NULL, OPT_SYN_BURST },
		{ "handover-socket", required_argument, NULL, OPT_HANDOVER },
		{ "takeover", no_argument, NULL, OPT_TAKEOVER },
		{ "metrics", required_argument, NULL, OPT_METRICS },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	enum kvs_log_level level = KVS_LOG_INFO;
	const char *listen = "127.0.0.1:7480";
	struct sigaction sa = { .sa_handler = on_signal };
	struct gw_config cfg;
	int opt, err;

	gw_config_defaults(&cfg);
	while ((opt = getopt_long(argc, argv, "l:b:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'l':
			listen = optarg;
			break;
		case 'b':
			if (cfg.nbackends == KVS_MAX_BACKENDS) {
				fprintf(stderr, PROG ": at most %d backends\n", KVS_MAX_BACKENDS);
				return 2;
			}
			if (kvs_parse_addr(optarg, &cfg.backends[cfg.nbackends])) {
				fprintf(stderr, PROG ": --backend: '%s' is not ADDR:PORT\n", optarg);
				return 2;
			}
			cfg.nbackends++;
			break;
		case OPT_POOL:
			if (kvs_arg_u32(PROG, "--pool", optarg, 1, KVS_MAX_POOL, &cfg.pool_size))
				return 2;
			break;
		case OPT_MAX_OUT:
			if (kvs_arg_u32(PROG, "--max-outstanding", optarg, 0, UINT32_MAX,
					&cfg.max_outstanding))
				return 2;
			break;
		case OPT_HEALTH:
			if (kvs_arg_u32(PROG, "--health-interval-ms", optarg, 0, 3600000,
					&cfg.health_interval_ms))
				return 2;
			break;
		case OPT_CLIENT_INFLIGHT:
			if (kvs_arg_u32(PROG, "--max-client-inflight", optarg, 0, 1u << 24,
					&cfg.client_max_inflight))
				return 2;
			break;
		case OPT_MAX_FRAME:
			if (kvs_arg_u32(PROG, "--max-frame", optarg, KVS_BLOCK_BYTES,
					KVS_MAX_PAYLOAD_LIMIT, &cfg.max_payload))
				return 2;
			break;
		case OPT_WINDOW:
			if (kvs_arg_u32(PROG, "--window-blocks", optarg, 1, KVS_MAX_WINDOW_BLOCKS,
					&cfg.window_blocks))
				return 2;
			break;
		case OPT_FRAME_TIMEOUT:
			if (kvs_arg_u32(PROG, "--frame-timeout-ms", optarg, 1, 3600000,
					&cfg.frame_timeout_ms))
				return 2;
			break;
		case OPT_BALANCE:
			if (kvs_arg_double(PROG, "--balance", optarg, 1.0, 100.0, &cfg.balance))
				return 2;
			break;
		case OPT_KV_BLOCKS:
			if (kvs_arg_u32(PROG, "--backend-kv-blocks", optarg, 1, 1u << 28,
					&cfg.index_blocks))
				return 2;
			break;
		case OPT_MIN_MATCH:
			if (kvs_arg_u32(PROG, "--min-match-pct", optarg, 0, 100, &cfg.min_match_pct))
				return 2;
			break;
		case OPT_SLACK:
			if (kvs_arg_u32(PROG, "--kernel-slack-tokens", optarg, 0, UINT32_MAX,
					&cfg.kernel_slack))
				return 2;
			break;
		case OPT_RELEASE:
			if (kvs_arg_release_prefill(PROG, optarg, &cfg.release_prefill_early))
				return 2;
			break;
		case OPT_PIN_DIR:
			cfg.pin_dir = optarg;
			break;
		case OPT_KEEP_PINS:
			cfg.keep_pins = 1;
			break;
		case OPT_PORT_FILE:
			cfg.port_file = optarg;
			break;
		case OPT_LOG_LEVEL:
			if (kvs_arg_log_level(PROG, optarg, &level))
				return 2;
			break;
		case OPT_XDP_IFACE:
			cfg.adm.ifname = optarg;
			break;
		case OPT_ALLOW:
			if (add_cidr("--allow", optarg, cfg.adm.allow, &cfg.adm.nallow))
				return 2;
			break;
		case OPT_DENY:
			if (add_cidr("--deny", optarg, cfg.adm.deny, &cfg.adm.ndeny))
				return 2;
			break;
		case OPT_SYN_RATE:
			if (kvs_arg_u32(PROG, "--syn-rate", optarg, 0, 10000000, &cfg.adm.syn_rate))
				return 2;
			break;
		case OPT_HANDOVER:
			cfg.handover_path = optarg;
			break;
		case OPT_TAKEOVER:
			cfg.takeover = 1;
			break;
		case OPT_METRICS:
			if (kvs_parse_addr(optarg, &cfg.metrics)) {
				fprintf(stderr, PROG ": --metrics: '%s' is not ADDR:PORT\n", optarg);
				return 2;
			}
			cfg.metrics_set = 1;
			break;
		case OPT_SYN_BURST:
			if (kvs_arg_u32(PROG, "--syn-burst", optarg, 1, 10000000, &cfg.adm.syn_burst))
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
	if (cfg.nbackends == 0) {
		fprintf(stderr, PROG ": at least one --backend ADDR:PORT is required (see --help)\n");
		return 2;
	}
	if (kvs_parse_addr(listen, &cfg.listen)) {
		fprintf(stderr, PROG ": --listen: '%s' is not ADDR:PORT\n", listen);
		return 2;
	}
	if (!cfg.adm.ifname && (cfg.adm.nallow || cfg.adm.ndeny || cfg.adm.syn_rate)) {
		fprintf(stderr, PROG ": --allow, --deny and --syn-rate need --xdp-iface IFACE\n");
		return 2;
	}
	if (cfg.takeover && !cfg.handover_path) {
		fprintf(stderr, PROG ": --takeover needs --handover-socket PATH (the running one's)\n");
		return 2;
	}
	if (strlen(cfg.pin_dir) >= 200) {
		fprintf(stderr, PROG ": --pin-dir: path too long\n");
		return 2;
	}

	kvs_log_init(PROG, level);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	err = gw_run(&cfg, &stop_flag);
	return err ? 1 : 0;
}
