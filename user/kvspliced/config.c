// SPDX-License-Identifier: MIT
/*
 * kvspliced's configuration: the command line and the --config file, both
 * read by one table of options (opts.h), which also makes --help. Adding an
 * option is adding a row.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "kvsplice/hash.h"
#include "kvsplice/proto.h"
#include "pins.h"
#include "policy.h"
#include "route_shares.h"
#include "tenant.h"

#define PROG "kvspliced"

/* What the table fills: the configuration and what becomes part of it once
 * everything is read. */
struct settings {
	struct gw_config cfg;
	const char *listen; /* cfg.listen, once parsed (validate) */
	enum kvs_log_level level;
	const char *config; /* --config: read first (config_arg) */
};

static const struct settings defaults = {
	.cfg = {
		.pool_size = KVS_DEFAULT_POOL,
		.max_outstanding = KVS_DEFAULT_MAX_OUTSTANDING,
		.health_interval_ms = KVS_DEFAULT_HEALTH_INTERVAL_MS,
		.client_max_inflight = KVS_DEFAULT_CLIENT_INFLIGHT,
		.front_max_inflight = KVS_DEFAULT_FRONT_INFLIGHT,
		.max_payload = KVS_DEFAULT_MAX_PAYLOAD,
		.window_blocks = KVS_MAX_WINDOW_BLOCKS,
		.frame_timeout_ms = 30000,
		.balance = KVS_POLICY_BALANCE,
		.keep_balance = KVS_POLICY_KEEP_BALANCE,
		.index_blocks = KVS_POLICY_INDEX_BLOCKS,
		.kv_reports = 1,
		.min_match_pct = (uint32_t)(KVS_POLICY_MIN_MATCH_SHARE * 100),
		.kernel_slack = 512,
		.release_prefill_early = 1,
		.kernel_place = 1,
		.fd_store = 1,
		.pin_dir = KVS_DEFAULT_PIN_DIR,
		.drain_timeout_ms = KVS_DEFAULT_DRAIN_TIMEOUT_MS,
		.max_source_conns = KVS_DEFAULT_MAX_SOURCE_CONNS,
		.idle_timeout_ms = KVS_DEFAULT_IDLE_TIMEOUT_MS,
		.stop_drain_ms = KVS_DEFAULT_STOP_DRAIN_MS,
		.tenant_routes = GW_TENANT_ROUTES_AUTO,
		.ctl_rate = KVS_DEFAULT_CTL_RATE,
		.ctl_burst = KVS_DEFAULT_CTL_BURST,
		.ctl_close_after = KVS_DEFAULT_CTL_CLOSE_AFTER,
	},
	.listen = "127.0.0.1:7480",
	.level = KVS_LOG_INFO,
};

void gw_config_defaults(struct gw_config *c)
{
	memcpy(c, &defaults.cfg, sizeof(*c));
}

/* --backend, --metrics. */
static int parse_addr(FILE *err, const char *who, const struct kvs_opt *o, const char *v, void *dst)
{
	if (kvs_parse_addr(v, dst)) {
		fprintf(err, "%s: --%s: '%s' is not ADDR:PORT\n", who, o->name, v);
		return -1;
	}
	return 0;
}

static int parse_metrics(FILE *err, const char *who, const struct kvs_opt *o, const char *v,
			 void *dst)
{
	struct gw_config *c = (void *)((char *)dst - offsetof(struct gw_config, metrics));

	if (parse_addr(err, who, o, v, dst))
		return -1;
	c->metrics_set = 1;
	return 0;
}

/* --tenant-source (the list options' parsers check v and keep it as
 * text: kvs_opt_keep_checked; --allow, --deny, --front-source take
 * kvs_opt_cidr). */
static int parse_tenant(FILE *err, const char *who, const struct kvs_opt *o, const char *v,
			void *dst)
{
	struct kvs_cidr net;
	uint64_t salt;

	return kvs_opt_keep_checked(
		err, !gw_tenant_parse(v, &net, &salt), who, o, v, dst,
		"CIDR=SALT (10.1.0.0/16=7, 2001:db8::/32=0x2a; SALT a 64-bit number)");
}

/* --tenant-routes: auto, off, or a number of routes. */
static int parse_tenant_routes(FILE *err, const char *who, const struct kvs_opt *o, const char *v,
			       void *dst)
{
	uint32_t *n = dst;
	char *end;
	unsigned long x;

	if (!strcmp(v, "auto")) {
		*n = GW_TENANT_ROUTES_AUTO;
		return 0;
	}
	if (!strcmp(v, "off")) {
		*n = 0;
		return 0;
	}
	errno = 0;
	x = strtoul(v, &end, 10);
	if (v[0] >= '0' && v[0] <= '9' && !*end && !errno && x <= KVS_ROUTES_MAX) {
		*n = (uint32_t)x;
		return 0;
	}
	fprintf(err, "%s: --%s: '%s' is not auto, off or a number of routes (0-%u)\n", who, o->name,
		v, (unsigned)KVS_ROUTES_MAX);
	return -1;
}

/* The help text below says so. */
_Static_assert(KVS_BLOCK_BYTES == 64, "--window-blocks' help: blocks of 64 bytes");

#define S struct settings
static const struct kvs_opt rows[] = {
	{ "config", 'c', KVS_OPT_STR(S, config), .cli_only = true, .arg = "FILE",
	  .help = "read settings from FILE (INI: every long option\n"
		  "below is a key, 'backend = ADDR:PORT' once per\n"
		  "backend); the command line overrides it. SIGHUP\n"
		  "(or 'kvsplicectl reload') re-reads it: backends\n"
		  "added and removed (drained first) at once, and the\n"
		  "limits, balance and timeouts; the rest on restart\n"
		  "or 'kvsplicectl upgrade' (which applies them all)" },
	{ "check", 0, KVS_OPT_FLAG(S, cfg.check_only), .cli_only = true,
	  .help = "check the configuration (flags and file), say what\n"
		  "is wrong or that it is fine, and exit" },
	{ "listen", 'l', KVS_OPT_STR(S, listen), .arg = "ADDR:PORT",
	  .help = "address clients connect to (default {default};\n"
		  "port 0 picks a free one, see --port-file)" },
	{ "backend", 'b',
	  KVS_OPT_LIST(S, cfg.backends, cfg.nbackends, KVS_MAX_BACKENDS, parse_addr),
	  .unit = "backends", .arg = "ADDR:PORT",
	  .help = "a backend; repeat for each (at most {max})" },
	{ "pool", 0, KVS_OPT_U32(S, cfg.pool_size, 1, KVS_MAX_POOL), .arg = "N",
	  .help = "upstream connections per backend (default {default}, max {max})" },
	{ "datapath", 0, KVS_OPT_ENUM(S, cfg.user_path, "kernel", "user"), .arg = "PATH",
	  .help = "kernel (default): requests and responses spliced\n"
		  "by the BPF sockmap program; user: the controller\n"
		  "reads, routes and copies every frame itself (no\n"
		  "BPF on the data path). Switch at run time with\n"
		  "'kvsplicectl datapath user|kernel'" },
	{ "max-outstanding", 0, KVS_OPT_U32(S, cfg.max_outstanding, 0, UINT32_MAX), .arg = "N",
	  .help = "requests in flight per backend before new ones go\n"
		  "elsewhere or get a 'busy' error (default {default}; 0: no\n"
		  "limit)" },
	{ "front-source", 0,
	  KVS_OPT_LIST(S, cfg.front_sources, cfg.nfront_sources, KVS_ADM_MAX_LIST, kvs_opt_cidr),
	  .arg = "CIDR",
	  .help = "clients from here are fronts (kvsplice-http), which\n"
		  "carry many users on one connection: they get\n"
		  "--max-front-inflight instead; repeat (at most {max})" },
	{ "tenant-source", 0,
	  KVS_OPT_LIST(S, cfg.tenant_sources, cfg.ntenant_sources, KVS_MAX_TENANTS - 1,
		       parse_tenant),
	  .arg = "CIDR=SALT",
	  .help = "clients from CIDR are one tenant: the gateway writes\n"
		  "SALT (decimal or 0x-hex, 64 bits) into the cache_salt\n"
		  "of each of their requests, whatever they sent, so none\n"
		  "can share another tenant's cache; the first CIDR that\n"
		  "holds a client counts; fronts (--front-source) are not\n"
		  "bound; repeat (at most {max})" },
	{ "tenant-routes", 0, KVS_OPT_FUNC(S, cfg.tenant_routes, parse_tenant_routes),
	  .arg = "N|auto|off",
	  .help = "with --tenant-source: each tenant's share of the\n"
		  "kernel's routes map (262144 entries), the clients of\n"
		  "no tenant one share too, so that one tenant's flood of\n"
		  "new prompts cannot evict another's routes: a tenant at\n"
		  "its share learns no new route until its least used\n"
		  "are trimmed (each second). auto (default): the map\n"
		  "less 256 entries per CPU, split evenly; N: N routes\n"
		  "each (refused at start when they do not fit); off:\n"
		  "one LRU for all, as before" },
	{ "max-front-inflight", 0, KVS_OPT_U32(S, cfg.front_max_inflight, 0, 1u << 24), .arg = "N",
	  .help = "requests one front connection may have in flight\n"
		  "(default {default}; 0: no limit)" },
	{ "max-client-inflight", 0, KVS_OPT_U32(S, cfg.client_max_inflight, 0, 1u << 24),
	  .arg = "N",
	  .help = "requests one client connection may have in flight;\n"
		  "more get a 'busy' error (default {default}; 0: no limit).\n"
		  "With --max-outstanding it bounds what the kernel\n"
		  "queues for a client or backend that stops reading" },
	{ "health-interval-ms", 0, KVS_OPT_U32(S, cfg.health_interval_ms, 0, 3600000), .arg = "MS",
	  .help = "PING each backend this often; one that has not\n"
		  "answered within three intervals is ejected (down,\n"
		  "retried with back-off) (default {default}; 0: never)" },
	{ "max-frame", 0, KVS_OPT_U32(S, cfg.max_payload, KVS_BLOCK_BYTES, KVS_MAX_PAYLOAD_LIMIT),
	  .arg = "BYTES",
	  .help = "largest payload accepted (default {default}, max {max}); every\n"
		  "spliced socket's receive buffer is sized from it" },
	{ "window-blocks", 0, KVS_OPT_U32(S, cfg.window_blocks, 1, KVS_MAX_WINDOW_BLOCKS),
	  .arg = "N",
	  .help = "prompt blocks of 64 bytes the kernel hashes (default\n"
		  "and max {max})" },
	{ "frame-timeout-ms", 0, KVS_OPT_U32(S, cfg.frame_timeout_ms, 1, 3600000), .arg = "MS",
	  .help = "a frame not complete by then aborts its connection\n"
		  "(slow senders; default {default})" },
	{ "balance", 0, KVS_OPT_DOUBLE(S, cfg.balance, 1.0, 100.0), .arg = "F",
	  .help = "load bound: a backend above F x the fleet's mean\n"
		  "outstanding work (in tokens) takes no new request\n"
		  "from the controller (default {default})" },
	{ "keep-balance", 0, KVS_OPT_DOUBLE(S, cfg.keep_balance, 1.0, 100.0), .arg = "F",
	  .help = "a route's backend past the kernel's work limit keeps\n"
		  "a request while its outstanding work is within F x\n"
		  "the mean plus the request, and recomputing the prefix\n"
		  "elsewhere would cost more; past it, the request spills.\n"
		  "The controller's own decisions keep the backend with\n"
		  "the longest cached prefix by the same bound (default\n"
		  "{default}; the kernel's set at start)" },
	{ "backend-kv-blocks", 0, KVS_OPT_U32(S, cfg.index_blocks, 1, 1u << 28), .arg = "N",
	  .help = "KV capacity of each backend in 16-token blocks, for\n"
		  "backends that do not say theirs: the starting size of\n"
		  "the controller's index of what each holds; 4x N bounds\n"
		  "every index, said or learnt (default {default}, ~1.3 M\n"
		  "tokens)" },
	{ "backend-kv-reports", 0, KVS_OPT_ENUM(S, cfg.kv_reports, "no", "yes"), .arg = "yes|no",
	  .help = "size each backend's index by the KV capacity it says\n"
		  "in its PONGs (kvsplice-sim; kvsplice-adapter when its\n"
		  "server tells, vLLM and SGLang, or given --kv-tokens);\n"
		  "no: --backend-kv-blocks for all (default yes)" },
	{ "min-match-pct", 0, KVS_OPT_U32(S, cfg.min_match_pct, 0, 100), .arg = "P",
	  .help = "a cached prefix covering less than P% of the prompt\n"
		  "(a system prompt everybody shares) is not followed by\n"
		  "the kernel nor decisive for the controller (default {default})" },
	{ "kernel-slack-tokens", 0, KVS_OPT_U32(S, cfg.kernel_slack, 0, UINT32_MAX), .arg = "N",
	  .help = "the kernel follows a route while the backend's work\n"
		  "is within balance x mean + one typical request's work\n"
		  "(at least N tokens); past that the controller\n"
		  "decides, and may spill (default {default})" },
	{ "kernel-place", 0, KVS_OPT_ENUM(S, cfg.kernel_place, "no", "yes"), .arg = "yes|no",
	  .help = "the kernel places requests no route covers (new\n"
		  "prefixes, holders over the bound) by the controller's\n"
		  "placement rule and reports them; 'no' hands them to\n"
		  "the controller as before (default yes; set at start)" },
	{ "release-prefill", 0, KVS_OPT_FUNC(S, cfg.release_prefill_early, kvs_opt_release_prefill),
	  .arg = "WHEN",
	  .help = "a request's prefill work stops counting as its\n"
		  "backend's load at its 'first-token' (default) or\n"
		  "at its 'end'; see docs/ARCHITECTURE.md" },
	{ "max-source-conns", 0, KVS_OPT_U32(S, cfg.max_source_conns, 0, UINT32_MAX), .arg = "N",
	  .help = "client connections one source (an IPv4 address, an\n"
		  "IPv6 /64) may hold; the next is answered busy and\n"
		  "closed (default {default}; 0: no limit). --front-source\n"
		  "clients are not counted; raise it for a NAT or proxy\n"
		  "that is not a front" },
	{ "idle-timeout-ms", 0, KVS_OPT_U32(S, cfg.idle_timeout_ms, 0, UINT32_MAX), .arg = "MS",
	  .help = "a client connection with no request in flight that\n"
		  "has sent nothing for MS (to MS + 2 s) is answered\n"
		  "timeout and closed (default {default}, 5 min; 0:\n"
		  "never). Not --front-source clients" },
	{ "stop-drain-ms", 0, KVS_OPT_U32(S, cfg.stop_drain_ms, 0, 3600000), .arg = "MS",
	  .help = "on SIGTERM or SIGINT, stop accepting, answer new\n"
		  "requests busy, and wait up to MS for the requests in\n"
		  "flight to end, then close each client once it stops\n"
		  "sending, without a reset (up to 3.5 s more; default\n"
		  "{default}; 0: close at once; a second signal: at once).\n"
		  "Keep it under systemd's TimeoutStopSec" },
	{ "ctl-rate", 0, KVS_OPT_U32(S, cfg.ctl_rate, 0, 10000000), .arg = "N",
	  .help = "frames a second one client connection may have the\n"
		  "controller handle: PINGs, requests the kernel passes\n"
		  "up (all with --kernel-place no), requests refused busy,\n"
		  "CANCELs (the userspace path's routed requests are\n"
		  "free). Beyond that and --ctl-burst, its PINGs and\n"
		  "CANCELs are dropped and its requests answered busy\n"
		  "(default {default}; 0: no limit; --front-source\n"
		  "clients have none)" },
	{ "ctl-burst", 0, KVS_OPT_U32(S, cfg.ctl_burst, 1, 10000000), .arg = "N",
	  .help = "of those, how many at once (default {default})" },
	{ "ctl-close-after", 0, KVS_OPT_U32(S, cfg.ctl_close_after, 0, UINT32_MAX), .arg = "N",
	  .help = "a client N frames over its budget, never pausing\n"
		  "long enough to refill it, is answered busy and\n"
		  "closed (default {default}; 0: never)" },
	KVS_OPT_HEADING("\n"
			"Admission (an XDP program on the interface clients arrive on; TCP to the\n"
			"gateway's port only; drops are counted in 'kvsplicectl stats'):\n"),
	{ "xdp-iface", 0, KVS_OPT_STR(S, cfg.adm.ifname), .arg = "IFACE",
	  .help = "attach it to IFACE (native XDP if the driver has\n"
		  "it, else generic)" },
	{ "allow", 0,
	  KVS_OPT_LIST(S, cfg.adm.allow, cfg.adm.nallow, KVS_ADM_MAX_LIST, kvs_opt_cidr),
	  .arg = "CIDR",
	  .help = "only sources in these CIDRs get in; repeat (IPv4\n"
		  "or IPv6, at most {max}; default: everybody)" },
	{ "deny", 0, KVS_OPT_LIST(S, cfg.adm.deny, cfg.adm.ndeny, KVS_ADM_MAX_LIST, kvs_opt_cidr),
	  .arg = "CIDR",
	  .help = "sources in these CIDRs are dropped, even if allowed;\n"
		  "repeat" },
	{ "syn-rate", 0, KVS_OPT_U32(S, cfg.adm.syn_rate, 0, 10000000), .arg = "N",
	  .help = "new connections (SYNs) per source per second\n"
		  "(default 0: no limit)" },
	{ "syn-burst", 0, KVS_OPT_U32(S, cfg.adm.syn_burst, 1, 10000000), .arg = "N",
	  .help = "SYNs a source may send at once (default: N of\n"
		  "--syn-rate)" },
	KVS_OPT_HEADING(
		"\n"
		"Upgrades without dropping a connection ('kvsplicectl upgrade', or SIGUSR2,\n"
		"starts the program file anew with --takeover; systemd follows it):\n"),
	{ "handover-socket", 0, KVS_OPT_STR(S, cfg.handover_path), .arg = "PATH",
	  .help = "a Unix socket (root's) where a new controller can\n"
		  "ask this one for its sockets (default\n" KVS_CONTROL_DIR
		  "/<last part of --pin-dir>.handover)" },
	{ "takeover", 0, KVS_OPT_FLAG(S, cfg.takeover), .cli_only = true,
	  .help = "start by taking over from the controller at the\n"
		  "hand-over socket (same --pin-dir): its listening\n"
		  "socket, client and backend connections, pinned maps\n"
		  "and backends; then this one's configuration applies:\n"
		  "its backend list as on a reload, --pool reached\n"
		  "while serving, a moved --listen or --metrics moved.\n"
		  "The old one exits" },
	KVS_OPT_HEADING("\n"),
	{ "drain-timeout-ms", 0, KVS_OPT_U32(S, cfg.drain_timeout_ms, 0, 24 * 3600 * 1000),
	  .arg = "MS",
	  .help = "a backend being removed gets this long for its\n"
		  "requests in flight; the rest are answered\n"
		  "backend_gone (default {default})" },
	{ "pin-dir", 0, KVS_OPT_STR(S, cfg.pin_dir), .arg = "DIR",
	  .help = "where maps are pinned, on a bpf file system\n"
		  "(default {default}); made if absent,\n"
		  "and then removed at a clean exit once empty" },
	{ "control-socket", 0, KVS_OPT_STR(S, cfg.control_path), .arg = "PATH",
	  .help = "where kvsplicectl reaches this controller (default\n" KVS_CONTROL_DIR
		  "/<last part of --pin-dir>.sock)" },
	{ "fd-store", 0, KVS_OPT_ENUM(S, cfg.fd_store, "no", "yes"), .arg = "yes|no",
	  .help = "under systemd ($NOTIFY_SOCKET), hand the listening,\n"
		  "client and backend sockets to its descriptor store\n"
		  "(the unit's FileDescriptorStoreMax=), so that after a\n"
		  "crash the restarted controller gets them back and no\n"
		  "connection drops (docs/RUNBOOK.md, \"Crashes\";\n"
		  "default yes; without systemd it does nothing)" },
	{ "keep-pins", 0, KVS_OPT_FLAG(S, cfg.keep_pins),
	  .help = "leave the maps pinned after exit, for inspection" },
	KVS_OPT_ROW_PORT_FILE(S, cfg.port_file),
	{ "metrics", 0, KVS_OPT_FUNC(S, cfg.metrics, parse_metrics), .arg = "ADDR:PORT",
	  .help = "serve Prometheus metrics at http://ADDR:PORT/metrics" },
	{ "log-level", 0, KVS_OPT_FUNC(S, level, kvs_opt_log_level), .arg = "LEVEL",
	  .help = "warn, info (default) or debug; logs are logfmt on stderr" },
	KVS_OPT_ROW_HELP,
};
#undef S

static const struct kvs_optset optset = {
	.prog = PROG,
	KVS_OPT_ROWS(rows),
	.defaults = &defaults,
	.usage = "Usage: " PROG " --listen ADDR:PORT --backend ADDR:PORT [--backend ...] "
		 "[options]\n"
		 "\n"
		 "Prefix-aware gateway for LLM inference backends speaking KVS1. Requests are\n"
		 "spliced to the backend that holds their prompt prefix by a BPF sockmap\n"
		 "program; the first request of a prefix is routed here (the slow path), which\n"
		 "installs the routes that let the kernel route the next ones by itself.\n"
		 "\n"
		 "Options:\n",
	.footer = "\n"
		  "Needs root (BPF, sockmap) and bpffs, mounted on /sys/fs/bpf if absent.\n"
		  "Inspect a running gateway with 'kvsplicectl status', 'kvsplicectl stats' or\n"
		  "'bpftool map dump pinned " KVS_DEFAULT_PIN_DIR "/backends'. See "
		  "docs/ARCHITECTURE.md.\n",
	.file_opt = "--config",
	.bad_key_hint = "keys are kvspliced's long options but config, check, help and "
			"takeover; see kvspliced --help",
};

void kvs_config_store_free(struct kvs_config_store *store)
{
	kvs_ini_free(&store->ini);
	store->path = NULL;
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
static int validate(FILE *err, struct settings *s)
{
	struct gw_config *cfg = &s->cfg;
	char a[96], b[96];

	if (cfg->nbackends == 0) {
		fprintf(err, PROG ": at least one backend is required (--backend ADDR:PORT, or "
				  "'backend = ADDR:PORT' in the config file; see --help)\n");
		return -1;
	}
	for (uint32_t i = 0; i < cfg->nbackends; i++) {
		for (uint32_t j = 0; j < i; j++) {
			if (!strcmp(kvs_addr_str(&cfg->backends[i], a, sizeof(a)),
				    kvs_addr_str(&cfg->backends[j], b, sizeof(b)))) {
				fprintf(err, PROG ": backend %s is given twice\n", a);
				return -1;
			}
		}
	}
	for (uint32_t i = 0; i < cfg->nbackends; i++)
		if (!kvs_addr_port(&cfg->backends[i])) {
			fprintf(err, PROG ": backend %s: port 0 is no port to connect to\n",
				kvs_addr_str(&cfg->backends[i], a, sizeof(a)));
			return -1;
		}
	if (kvs_parse_addr(s->listen, &cfg->listen)) {
		fprintf(err, PROG ": --listen: '%s' is not ADDR:PORT\n", s->listen);
		return -1;
	}
	/* (--check passed this; the start then failed to bind the second) */
	if (cfg->metrics_set && kvs_addr_port(&cfg->listen) &&
	    !strcmp(kvs_addr_str(&cfg->metrics, a, sizeof(a)),
		    kvs_addr_str(&cfg->listen, b, sizeof(b)))) {
		fprintf(err, PROG ": --metrics %s is --listen's address too\n", a);
		return -1;
	}
	if (!cfg->adm.ifname && (cfg->adm.nallow || cfg->adm.ndeny || cfg->adm.syn_rate)) {
		fprintf(err, PROG ": --allow, --deny and --syn-rate need --xdp-iface IFACE\n");
		return -1;
	}
	if (strlen(cfg->pin_dir) >= 200) {
		fprintf(err, PROG ": --pin-dir: path too long\n");
		return -1;
	}
	if (cfg->control_path && strlen(cfg->control_path) >= 108) {
		fprintf(err, PROG ": --control-socket: path too long (a Unix socket's is at "
				  "most 107 bytes)\n");
		return -1;
	}
	return 0;
}

/* The file, then the command line; 0, 1 (help) or -1. */
static int parse(FILE *err, int argc, char **argv, struct settings *s,
		 struct kvs_config_store *store)
{
	const char *path = s->cfg.config_path;

	store->path = path;
	if (path && (kvs_ini_read(&optset, err, path, &store->ini) ||
		     kvs_ini_apply(&optset, err, &store->ini, path, s)))
		return -1;
	return kvs_opts_argv(&optset, err, argc, argv, s);
}

int kvs_config_parse(FILE *err, int argc, char **argv, struct gw_config *cfg,
		     enum kvs_log_level *level, struct kvs_config_store *store)
{
	struct settings s;
	int r;

	memcpy(&s, &defaults, sizeof(s));
	memset(store, 0, sizeof(*store));
	s.cfg.config_path = config_arg(argc, argv);
	r = parse(err, argc, argv, &s, store);
	if (!r && (s.config != s.cfg.config_path) &&
	    (!s.config || !s.cfg.config_path || strcmp(s.config, s.cfg.config_path))) {
		/* getopt read a spelling the scan does not know (-cFILE, an
		 * abbreviation such as --conf FILE): the file it named was not
		 * read, and the options parsed over it. Again, with it. */
		const char *path = s.config;

		kvs_config_store_free(store);
		memcpy(&s, &defaults, sizeof(s));
		s.cfg.config_path = path;
		r = parse(err, argc, argv, &s, store);
	}
	if (!r) {
		*level = s.level;
		r = validate(err, &s);
	}
	memcpy(cfg, &s.cfg, sizeof(*cfg));
	return r;
}
