/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text exposition (format 0.0.4) of a gateway's state, from
 * a snapshot the controller takes when scraped (--metrics ADDR:PORT). Pure:
 * the rendering is unit-tested on known inputs.
 */
#ifndef KVS_METRICS_H
#define KVS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvsplice/admission.h"
#include "kvsplice/maps.h"

/* Upper bounds of the decision-latency histogram, in seconds. */
#define KVS_DECIDE_BUCKETS 10
extern const double kvs_decide_bounds[KVS_DECIDE_BUCKETS];

struct kvs_decide_hist {
	uint64_t count[KVS_DECIDE_BUCKETS + 1]; /* the last: above every bound */
	double sum_s;
};

void kvs_decide_observe(struct kvs_decide_hist *h, double seconds);

struct kvs_metrics_in {
	const struct kvs_stats *k;
	const struct kvs_ctl_stats *c;
	const struct kvs_xdp_stats *x; /* NULL without XDP admission */
	const struct kvs_backend *be;  /* nbackends of them */
	const struct kvs_ttft *ttft;   /* theirs (backend_ttft); NULL: none */
	const char *const *names;      /* their addresses */
	/* Restarts the controller saw of each (a new instance in its PONG;
	 * its own count, from its start); NULL: not given. */
	const uint64_t *restarts;
	uint32_t nbackends;
	long routes;	     /* entries in the routes map; < 0 unknown */
	double routes_age_s; /* how long ago routes was counted */
	uint32_t clients;
	const struct kvs_decide_hist *decide;
	long open_fds, max_fds; /* the controller's descriptors; < 0 unknown */
	/* Tenants' shares of the routes map, entries 0..nshares-1 (0: none). */
	const struct kvs_route_share *shares;
	uint32_t nshares;
};

/* Renders into buf (NUL-terminated); returns the length it needed, which
 * may exceed cap (then the output is cut). */
size_t kvs_metrics_render(char *buf, size_t cap, const struct kvs_metrics_in *in);

#endif
