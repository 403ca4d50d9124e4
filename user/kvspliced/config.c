// SPDX-License-Identifier: MIT
/* kvspliced's configuration: the command line and the --config file. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "args.h"
#include "kvsplice/hash.h"
#include "kvsplice/proto.h"
#include "pins.h"
#include "policy.h"

#define PROG "kvspliced"

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
		"  -c, --config FILE          read settings from FILE (INI: every long option\n"
		"                             below is a key, 'backend = ADDR:PORT' once per\n"
		"                             backend); the command line overrides it. SIGHUP\n"
		"                             (or 'kvsplicectl reload') re-reads it: backends\n"
		"                             added and removed (drained first) at once, and the\n"
		"                             limits, balance and timeouts; the rest on restart\n"
		"      --check                check the configuration (flags and file), say what\n"
		"                             is wrong or that it is fine, and exit\n"
		"  -l, --listen ADDR:PORT     address clients connect to (default 127.0.0.1:7480;\n"
		"                             port 0 picks a free one, see --port-file)\n"
		"  -b, --backend ADDR:PORT    a backend; repeat for each (at most %d)\n"
		"      --pool N               upstream connections per backend (default %d, max %d)\n"
		"      --datapath PATH        kernel (default): requests and responses spliced\n"
		"                             by the BPF sockmap program; user: the controller\n"
		"                             reads, routes and copies every frame itself (no\n"
		"                             BPF on the data path). Switch at run time with\n"
		"                             'kvsplicectl datapath user|kernel'\n"
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
		"Upgrades without dropping a connection ('kvsplicectl upgrade', or SIGUSR2,\n"
		"starts the program file anew with --takeover; systemd follows it):\n"
		"      --handover-socket PATH a Unix socket (root's) where a new controller can\n"
		"                             ask this one for its sockets (default\n"
		"                             " KVS_CONTROL_DIR "/<last part of --pin-dir>.handover)\n"
		"      --takeover             start by taking over from the controller at the\n"
		"                             hand-over socket (same --pin-dir): its listening\n"
		"                             socket, client and backend connections, pinned maps\n"
		"                             and backends; then this one's backend list applies,\n"
		"                             as on a reload. The old one exits\n"
		"\n"
		"      --drain-timeout-ms MS  a backend being removed gets this long for its\n"
		"                             requests in flight; the rest are answered\n"
		"                             backend_gone (default %u)\n"
		"      --pin-dir DIR          where maps are pinned (default %s)\n"
		"      --control-socket PATH  where kvsplicectl reaches this controller (default\n"
		"                             " KVS_CONTROL_DIR "/<last part of --pin-dir>.sock)\n"
		"      --keep-pins            leave the maps pinned after exit, for inspection\n"
		"      --port-file FILE       write the listening port to FILE once listening\n"
		"      --metrics ADDR:PORT    serve Prometheus metrics at http://ADDR:PORT/metrics\n"
		"      --log-level LEVEL      warn, info (default) or debug; logs are logfmt on stderr\n"
		"  -h, --help                 this text\n"
		"\n"
		"Needs root (BPF, sockmap) and bpffs, mounted on /sys/fs/bpf if absent.\n"
		"Inspect a running gateway with 'kvsplicectl status', 'kvsplicectl stats' or\n"
		"'bpftool map dump pinned %s/backends'. See docs/ARCHITECTURE.md.\n",
		KVS_MAX_BACKENDS, KVS_DEFAULT_POOL, KVS_MAX_POOL, KVS_DEFAULT_MAX_OUTSTANDING,
		KVS_DEFAULT_CLIENT_INFLIGHT, KVS_DEFAULT_HEALTH_INTERVAL_MS, KVS_DEFAULT_MAX_PAYLOAD,
		KVS_MAX_PAYLOAD_LIMIT, KVS_BLOCK_BYTES, KVS_MAX_WINDOW_BLOCKS, KVS_POLICY_BALANCE,
		(unsigned int)KVS_POLICY_INDEX_BLOCKS, (unsigned int)(KVS_POLICY_MIN_MATCH_SHARE * 100),
		512u, KVS_ADM_MAX_LIST, KVS_DEFAULT_DRAIN_TIMEOUT_MS, KVS_DEFAULT_PIN_DIR,
		KVS_DEFAULT_PIN_DIR);
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
	OPT_DRAIN_TIMEOUT,
	OPT_CONTROL,
	OPT_CHECK,
	OPT_DATAPATH,
};

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
	{ "drain-timeout-ms", required_argument, NULL, OPT_DRAIN_TIMEOUT },
	{ "control-socket", required_argument, NULL, OPT_CONTROL },
	{ "config", required_argument, NULL, 'c' },
	{ "check", no_argument, NULL, OPT_CHECK },
	{ "datapath", required_argument, NULL, OPT_DATAPATH },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

void gw_config_defaults(struct gw_config *c)
{
	memset(c, 0, sizeof(*c));
	c->pool_size = KVS_DEFAULT_POOL;
	c->max_outstanding = KVS_DEFAULT_MAX_OUTSTANDING;
	c->health_interval_ms = KVS_DEFAULT_HEALTH_INTERVAL_MS;
	c->client_max_inflight = KVS_DEFAULT_CLIENT_INFLIGHT;
	c->max_payload = KVS_DEFAULT_MAX_PAYLOAD;
	c->window_blocks = KVS_MAX_WINDOW_BLOCKS;
	c->frame_timeout_ms = 30000;
	c->balance = KVS_POLICY_BALANCE;
	c->index_blocks = KVS_POLICY_INDEX_BLOCKS;
	c->min_match_pct = (uint32_t)(KVS_POLICY_MIN_MATCH_SHARE * 100);
	c->kernel_slack = 512;
	c->release_prefill_early = 1;
	c->pin_dir = KVS_DEFAULT_PIN_DIR;
	c->drain_timeout_ms = KVS_DEFAULT_DRAIN_TIMEOUT_MS;
}

/* Where a parse is: what the command line has given so far. */
struct parse_state {
	const char *listen;
	enum kvs_log_level level;
	int cli_backends, cli_allow, cli_deny; /* seen on the command line */
};

/* --allow / --deny: checked here, so a typo stops the start with a message. */
static int add_cidr(const char *who, const char *opt, const char *v, const char **list, uint32_t *n)
{
	uint8_t addr[16];
	uint32_t plen;
	int family;

	if (kvs_cidr_parse(v, &family, addr, &plen)) {
		fprintf(stderr, "%s: %s: '%s' is not an address or CIDR (10.0.0.0/8, fd00::/8)\n", who,
			opt, v);
		return -1;
	}
	if (*n == KVS_ADM_MAX_LIST) {
		fprintf(stderr, "%s: %s: at most %d\n", who, opt, KVS_ADM_MAX_LIST);
		return -1;
	}
	list[(*n)++] = v;
	return 0;
}

/*
 * Applies argv[1..argc) to cfg. file is NULL for the command line, else
 * the config file the arguments were made from (lines[i]: argv[i]'s line).
 * 0, 1 (help printed) or -1.
 */
static int apply_args(int argc, char **argv, const char *file, const int *lines,
		      struct gw_config *cfg, struct parse_state *st)
{
	char who[600];
	int opt;

	optind = 0; /* a fresh scan (GNU getopt) */
	opterr = !file; /* ini_args checked the keys already */
	while ((opt = getopt_long(argc, argv, "l:b:c:h", opts, NULL)) != -1) {
		if (file)
			snprintf(who, sizeof(who), PROG ": %s:%d", file, lines[optind - 1]);
		else
			snprintf(who, sizeof(who), PROG);
		switch (opt) {
		case 'l':
			st->listen = optarg;
			break;
		case 'b':
			if (!file && !st->cli_backends++)
				cfg->nbackends = 0; /* the command line's list replaces the file's */
			if (cfg->nbackends == KVS_MAX_BACKENDS) {
				fprintf(stderr, "%s: at most %d backends\n", who, KVS_MAX_BACKENDS);
				return -1;
			}
			if (kvs_parse_addr(optarg, &cfg->backends[cfg->nbackends])) {
				fprintf(stderr, "%s: --backend: '%s' is not ADDR:PORT\n", who, optarg);
				return -1;
			}
			cfg->nbackends++;
			break;
		case OPT_POOL:
			if (kvs_arg_u32(who, "--pool", optarg, 1, KVS_MAX_POOL, &cfg->pool_size))
				return -1;
			break;
		case OPT_MAX_OUT:
			if (kvs_arg_u32(who, "--max-outstanding", optarg, 0, UINT32_MAX,
					&cfg->max_outstanding))
				return -1;
			break;
		case OPT_HEALTH:
			if (kvs_arg_u32(who, "--health-interval-ms", optarg, 0, 3600000,
					&cfg->health_interval_ms))
				return -1;
			break;
		case OPT_CLIENT_INFLIGHT:
			if (kvs_arg_u32(who, "--max-client-inflight", optarg, 0, 1u << 24,
					&cfg->client_max_inflight))
				return -1;
			break;
		case OPT_MAX_FRAME:
			if (kvs_arg_u32(who, "--max-frame", optarg, KVS_BLOCK_BYTES,
					KVS_MAX_PAYLOAD_LIMIT, &cfg->max_payload))
				return -1;
			break;
		case OPT_WINDOW:
			if (kvs_arg_u32(who, "--window-blocks", optarg, 1, KVS_MAX_WINDOW_BLOCKS,
					&cfg->window_blocks))
				return -1;
			break;
		case OPT_FRAME_TIMEOUT:
			if (kvs_arg_u32(who, "--frame-timeout-ms", optarg, 1, 3600000,
					&cfg->frame_timeout_ms))
				return -1;
			break;
		case OPT_BALANCE:
			if (kvs_arg_double(who, "--balance", optarg, 1.0, 100.0, &cfg->balance))
				return -1;
			break;
		case OPT_KV_BLOCKS:
			if (kvs_arg_u32(who, "--backend-kv-blocks", optarg, 1, 1u << 28,
					&cfg->index_blocks))
				return -1;
			break;
		case OPT_MIN_MATCH:
			if (kvs_arg_u32(who, "--min-match-pct", optarg, 0, 100, &cfg->min_match_pct))
				return -1;
			break;
		case OPT_SLACK:
			if (kvs_arg_u32(who, "--kernel-slack-tokens", optarg, 0, UINT32_MAX,
					&cfg->kernel_slack))
				return -1;
			break;
		case OPT_RELEASE:
			if (kvs_arg_release_prefill(who, optarg, &cfg->release_prefill_early))
				return -1;
			break;
		case OPT_PIN_DIR:
			cfg->pin_dir = optarg;
			break;
		case OPT_KEEP_PINS:
			cfg->keep_pins = 1;
			break;
		case OPT_PORT_FILE:
			cfg->port_file = optarg;
			break;
		case OPT_LOG_LEVEL:
			if (kvs_arg_log_level(who, optarg, &st->level))
				return -1;
			break;
		case OPT_XDP_IFACE:
			cfg->adm.ifname = optarg;
			break;
		case OPT_ALLOW:
			if (!file && !st->cli_allow++)
				cfg->adm.nallow = 0;
			if (add_cidr(who, "--allow", optarg, cfg->adm.allow, &cfg->adm.nallow))
				return -1;
			break;
		case OPT_DENY:
			if (!file && !st->cli_deny++)
				cfg->adm.ndeny = 0;
			if (add_cidr(who, "--deny", optarg, cfg->adm.deny, &cfg->adm.ndeny))
				return -1;
			break;
		case OPT_SYN_RATE:
			if (kvs_arg_u32(who, "--syn-rate", optarg, 0, 10000000, &cfg->adm.syn_rate))
				return -1;
			break;
		case OPT_HANDOVER:
			cfg->handover_path = optarg;
			break;
		case OPT_TAKEOVER:
			cfg->takeover = 1;
			break;
		case OPT_METRICS:
			if (kvs_parse_addr(optarg, &cfg->metrics)) {
				fprintf(stderr, "%s: --metrics: '%s' is not ADDR:PORT\n", who, optarg);
				return -1;
			}
			cfg->metrics_set = 1;
			break;
		case OPT_SYN_BURST:
			if (kvs_arg_u32(who, "--syn-burst", optarg, 1, 10000000, &cfg->adm.syn_burst))
				return -1;
			break;
		case OPT_DRAIN_TIMEOUT:
			if (kvs_arg_u32(who, "--drain-timeout-ms", optarg, 0, 24 * 3600 * 1000,
					&cfg->drain_timeout_ms))
				return -1;
			break;
		case OPT_CONTROL:
			cfg->control_path = optarg;
			break;
		case 'c':
			break; /* read first (kvs_config_parse) */
		case OPT_CHECK:
			cfg->check_only = 1;
			break;
		case OPT_DATAPATH:
			if (strcmp(optarg, "kernel") && strcmp(optarg, "user")) {
				fprintf(stderr, "%s: --datapath: '%s' is not kernel or user\n", who,
					optarg);
				return -1;
			}
			cfg->user_path = !strcmp(optarg, "user");
			break;
		case 'h':
			if (file)
				break; /* not a key (ini_args refuses it) */
			usage(stdout);
			return 1;
		default:
			if (!file)
				fprintf(stderr, "%s: see --help\n", PROG);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s' (see --help)\n", argv[optind]);
		return -1;
	}
	return 0;
}

static bool truth(const char *v, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" }, *const no[] = { "false", "no",
										       "off", "0" };

	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i]) || !strcasecmp(v, no[i])) {
			*out = !strcasecmp(v, yes[i]);
			return true;
		}
	}
	return false;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/* The option a key names (a long option's name), or NULL. */
static const struct option *key_option(const char *key)
{
	for (const struct option *o = opts; o->name; o++)
		if (!strcmp(o->name, key))
			return o;
	return NULL;
}

/* Reads path into store: one "--key=value" (or "--flag") per setting. */
static int ini_args(const char *path, struct kvs_config_store *store)
{
	FILE *f = fopen(path, "r");
	long size;
	char *line, *save = NULL;
	int lineno = 0, cap;

	memset(store, 0, sizeof(*store));
	if (!f) {
		fprintf(stderr, PROG ": --config %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || size > (1 << 20) ||
	    fseek(f, 0, SEEK_SET)) {
		fprintf(stderr, PROG ": --config %s: unreadable or over 1 MiB\n", path);
		fclose(f);
		return -1;
	}
	store->text = calloc(1, (size_t)size + 2);
	cap = (int)(size / 2) + 2; /* a setting is at least two bytes */
	store->args = calloc((size_t)cap + 1, sizeof(char *));
	store->lines = calloc((size_t)cap + 1, sizeof(int));
	if (!store->text || !store->args || !store->lines ||
	    fread(store->text, 1, (size_t)size, f) != (size_t)size) {
		fprintf(stderr, PROG ": --config %s: cannot read it\n", path);
		fclose(f);
		return -1;
	}
	fclose(f);
	store->args[store->nargs++] = (char *)PROG; /* argv[0] */
	for (char *p = store->text; p; p = save) {
		char *eq, *key, *val, *arg;
		const struct option *o;
		bool on;

		line = p;
		save = strchr(p, '\n');
		if (save)
			*save++ = '\0';
		lineno++;
		line = trim(line);
		if (!*line || *line == '#' || *line == ';' || *line == '[')
			continue;
		eq = strchr(line, '=');
		if (!eq) {
			fprintf(stderr, PROG ": %s:%d: expected 'key = value'\n", path, lineno);
			return -1;
		}
		*eq = '\0';
		key = trim(line);
		val = trim(eq + 1);
		o = key_option(key);
		if (!o || !strcmp(key, "config") || !strcmp(key, "help") || !strcmp(key, "takeover") ||
		    !strcmp(key, "check")) {
			fprintf(stderr,
				PROG ": %s:%d: unknown key '%s' (keys are kvspliced's long options but "
				     "config, check, help and takeover; see kvspliced --help)\n",
				path, lineno, key);
			return -1;
		}
		if (o->has_arg == no_argument) {
			if (!truth(val, &on)) {
				fprintf(stderr, PROG ": %s:%d: %s: '%s' is not true or false\n", path,
					lineno, key, val);
				return -1;
			}
			if (!on)
				continue;
			val = NULL;
		} else if (!*val) {
			fprintf(stderr, PROG ": %s:%d: %s: no value\n", path, lineno, key);
			return -1;
		}
		arg = malloc(strlen(key) + (val ? strlen(val) : 0) + 4);
		if (!arg || store->nargs >= cap) {
			free(arg);
			fprintf(stderr, PROG ": --config %s: out of memory\n", path);
			return -1;
		}
		sprintf(arg, val ? "--%s=%s" : "--%s", key, val ? val : "");
		store->lines[store->nargs] = lineno;
		store->args[store->nargs++] = arg;
	}
	return 0;
}

void kvs_config_store_free(struct kvs_config_store *store)
{
	for (int i = 1; store->args && i < store->nargs; i++)
		free(store->args[i]);
	free(store->args);
	free(store->lines);
	free(store->text);
	memset(store, 0, sizeof(*store));
}

/* --config FILE (or -c FILE, --config=FILE) on the command line, if any. */
static const char *config_arg(int argc, char **argv)
{
	const char *path = NULL;

	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if ((!strcmp(argv[i], "--config") || !strcmp(argv[i], "-c")) && i + 1 < argc)
			path = argv[++i];
		else if (!strncmp(argv[i], "--config=", 9))
			path = argv[i] + 9;
	}
	return path;
}

/* What no single option can check. */
static int validate(struct gw_config *cfg, const struct parse_state *st)
{
	char a[96], b[96];

	if (cfg->nbackends == 0) {
		fprintf(stderr, PROG ": at least one backend is required (--backend ADDR:PORT, or "
				     "'backend = ADDR:PORT' in the config file; see --help)\n");
		return -1;
	}
	for (uint32_t i = 0; i < cfg->nbackends; i++) {
		for (uint32_t j = 0; j < i; j++) {
			if (!strcmp(kvs_addr_str(&cfg->backends[i], a, sizeof(a)),
				    kvs_addr_str(&cfg->backends[j], b, sizeof(b)))) {
				fprintf(stderr, PROG ": backend %s is given twice\n", a);
				return -1;
			}
		}
	}
	if (kvs_parse_addr(st->listen, &cfg->listen)) {
		fprintf(stderr, PROG ": --listen: '%s' is not ADDR:PORT\n", st->listen);
		return -1;
	}
	if (!cfg->adm.ifname && (cfg->adm.nallow || cfg->adm.ndeny || cfg->adm.syn_rate)) {
		fprintf(stderr, PROG ": --allow, --deny and --syn-rate need --xdp-iface IFACE\n");
		return -1;
	}
	if (strlen(cfg->pin_dir) >= 200) {
		fprintf(stderr, PROG ": --pin-dir: path too long\n");
		return -1;
	}
	if (cfg->control_path && strlen(cfg->control_path) >= 108) {
		fprintf(stderr, PROG ": --control-socket: path too long (a Unix socket's is at "
				     "most 107 bytes)\n");
		return -1;
	}
	return 0;
}

int kvs_config_parse(int argc, char **argv, struct gw_config *cfg, enum kvs_log_level *level,
		     struct kvs_config_store *store)
{
	struct parse_state st = { .listen = "127.0.0.1:7480", .level = KVS_LOG_INFO };
	const char *path = config_arg(argc, argv);
	int r;

	gw_config_defaults(cfg);
	memset(store, 0, sizeof(*store));
	cfg->config_path = path;
	if (path) {
		if (ini_args(path, store))
			return -1;
		r = apply_args(store->nargs, store->args, path, store->lines, cfg, &st);
		if (r)
			return r;
	}
	r = apply_args(argc, argv, NULL, NULL, cfg, &st);
	if (r)
		return r;
	*level = st.level;
	return validate(cfg, &st);
}
