/* SPDX-License-Identifier: MIT */
/*
 * The gateway's controller: one io_uring event loop that accepts clients,
 * keeps the upstream pools, and runs the slow path (frames the kernel passed
 * up). It never writes into a socket the kernel redirects into: everything it
 * sends goes through its inject socket, back through the kernel's verdict.
 */
#ifndef KVS_GATEWAY_H
#define KVS_GATEWAY_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "admission.h"
#include "kvsplice/maps.h"
#include "netutil.h"

/* Bounds on what the kernel may queue for one client or one backend. */
#define KVS_DEFAULT_MAX_OUTSTANDING 1024u
#define KVS_DEFAULT_CLIENT_INFLIGHT 256u
#define KVS_DEFAULT_FRONT_INFLIGHT 65536u
#define KVS_DEFAULT_HEALTH_INTERVAL_MS 1000u
#define KVS_DEFAULT_DRAIN_TIMEOUT_MS 60000u
/* What one client address may hold, and how long a client may sit idle
 * (docs/RUNBOOK.md, "Descriptors and idle clients"). */
#define KVS_DEFAULT_MAX_SOURCE_CONNS 1024u
#define KVS_DEFAULT_IDLE_TIMEOUT_MS 300000u
/* How long a stop waits for the requests in flight (--stop-drain-ms). */
#define KVS_DEFAULT_STOP_DRAIN_MS 10000u
/* What one client connection may make the controller do (frames a second,
 * at once, and over that in a row before it is closed): far above what a
 * client sends (docs/RUNBOOK.md, "One client and the controller"). */
#define KVS_DEFAULT_CTL_RATE 1000u
#define KVS_DEFAULT_CTL_BURST 1000u
#define KVS_DEFAULT_CTL_CLOSE_AFTER 10000u

struct gw_config {
	struct kvs_addr listen;
	struct kvs_addr backends[KVS_MAX_BACKENDS];
	uint32_t nbackends;
	uint32_t pool_size;	      /* upstream connections per backend */
	uint32_t max_outstanding;     /* per backend; 0 = no limit */
	uint32_t client_max_inflight; /* per client connection; 0 = no limit */
	/* Trusted multiplexers (kvsplice-http): clients from these CIDRs get
	 * front_max_inflight instead (docs/RUNBOOK.md, "OpenAI clients"). */
	const char *front_sources[KVS_ADM_MAX_LIST];
	uint32_t nfront_sources;
	uint32_t front_max_inflight; /* 0 = no limit */
	/* Tenants bound to where their clients come from: "CIDR=SALT"
	 * (tenant.h; docs/RUNBOOK.md, "Tenants"). */
	const char *tenant_sources[KVS_MAX_TENANTS - 1];
	uint32_t ntenant_sources;
	/* Each tenant's share of the kernel's routes map, in routes
	 * (GW_TENANT_ROUTES_AUTO: split evenly; 0: none). */
	uint32_t tenant_routes;
	uint32_t health_interval_ms; /* PING each backend this often; 0 = never */
	uint32_t max_payload;
	uint32_t window_blocks;
	uint32_t frame_timeout_ms; /* a frame not complete by then aborts */
	double balance;		   /* bounded-load factor, >= 1 */
	double keep_balance;	   /* a holder keeps a request within it (place.h) */
	uint32_t index_blocks;	   /* per-backend prefix index (their KV blocks) */
	int kv_reports;		   /* a backend's own capacity sizes its index */
	uint32_t min_match_pct;	   /* a shallower prefix match is not decisive */
	uint32_t kernel_slack;	   /* least slack, in tokens, above balance x
				    * mean work before the kernel defers */
	int release_prefill_early; /* prefill charge off at the first CHUNK */
	int kernel_place;	   /* the kernel places requests no route covers */
	const char *pin_dir;
	const char *port_file;	   /* write the listening port here */
	int keep_pins;		   /* leave maps pinned on exit */
	struct kvs_adm_opts adm;   /* XDP admission, when adm.ifname is set */
	const char *handover_path; /* listen here for a controller taking over */
	struct kvs_addr metrics;   /* --metrics: Prometheus text endpoint */
	int metrics_set;
	int takeover;		   /* take over from the one at handover_path */
	uint32_t drain_timeout_ms; /* a removed backend's requests may finish */
	const char *control_path;  /* kvsplicectl's socket; NULL: the default
				    * for pin_dir (kvs_control_path) */
	const char *config_path;   /* --config FILE, for status and reloads */
	int check_only;		   /* --check: validate, do not run */
	int user_path;		   /* --datapath user: the userspace data path */
	int fd_store;		   /* hand sockets to systemd's descriptor store */
	uint32_t max_source_conns; /* client connections per source; 0 = no limit */
	uint32_t idle_timeout_ms;  /* an idle client is closed; 0 = never */
	uint32_t stop_drain_ms;	   /* a stop waits this long for requests in flight */
	/* A client connection's budget of controller work (kvsplice/budget.h);
	 * fronts have none. Rate 0: no limit. */
	uint32_t ctl_rate, ctl_burst, ctl_close_after;
};

void gw_config_defaults(struct gw_config *c);

/* How the controller is told to stop or reload, and how it re-reads its
 * configuration: load() fills *cfg afresh (the strings it points to stay
 * valid until the next call) and returns 0, or -errno with a message for
 * the operator in msg. */
struct gw_hooks {
	volatile sig_atomic_t *stop;	/* SIGTERM, SIGINT: counted (a second: at once) */
	volatile sig_atomic_t *reload;	/* SIGHUP: re-read the backend list */
	volatile sig_atomic_t *upgrade; /* SIGUSR2: start a successor (gw_upgrade) */
	int argc;			/* the command line, for the successor */
	char **argv;
	int (*load)(void *ctx, struct gw_config *cfg, char *msg, size_t len);
	void *ctx;
};

/* Runs until *stop is set (by a signal handler). 0 or -errno. */
int gw_run(const struct gw_config *cfg, const struct gw_hooks *hooks);

#endif
