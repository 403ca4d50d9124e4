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
#include <stdint.h>

#include "admission.h"
#include "kvsplice/maps.h"
#include "netutil.h"

/* Bounds on what the kernel may queue for one client or one backend. */
#define KVS_DEFAULT_MAX_OUTSTANDING 1024u
#define KVS_DEFAULT_CLIENT_INFLIGHT 256u
#define KVS_DEFAULT_HEALTH_INTERVAL_MS 1000u

struct gw_config {
	struct kvs_addr listen;
	struct kvs_addr backends[KVS_MAX_BACKENDS];
	uint32_t nbackends;
	uint32_t pool_size;        /* upstream connections per backend */
	uint32_t max_outstanding;  /* per backend; 0 = no limit */
	uint32_t client_max_inflight; /* per client connection; 0 = no limit */
	uint32_t health_interval_ms;  /* PING each backend this often; 0 = never */
	uint32_t max_payload;
	uint32_t window_blocks;
	uint32_t frame_timeout_ms; /* a frame not complete by then aborts */
	double balance;            /* bounded-load factor, >= 1 */
	uint32_t index_blocks;     /* per-backend prefix index (their KV blocks) */
	uint32_t min_match_pct;    /* a shallower prefix match is not decisive */
	uint32_t kernel_slack;     /* least slack, in tokens, above balance x
				    * mean work before the kernel defers */
	int release_prefill_early; /* prefill charge off at the first CHUNK */
	const char *pin_dir;
	const char *port_file;     /* write the listening port here */
	int keep_pins;             /* leave maps pinned on exit */
	struct kvs_adm_opts adm;   /* XDP admission, when adm.ifname is set */
	const char *handover_path; /* listen here for a controller taking over */
	struct kvs_addr metrics;   /* --metrics: Prometheus text endpoint */
	int metrics_set;
	int takeover;              /* take over from the one at handover_path */
};

void gw_config_defaults(struct gw_config *c);

/* Runs until *stop is set (by a signal handler). 0 or -errno. */
int gw_run(const struct gw_config *cfg, volatile sig_atomic_t *stop);

#endif
