/* SPDX-License-Identifier: MIT */
/*
 * Other routers' policies, re-implemented for kvsplice-bench sim: each
 * keeps its own state (its view of what each worker holds) and picks a
 * backend for a request from what the fleet shows it. sim_baselines.c
 * names the upstream source of each.
 */
#ifndef KVS_BENCH_SIM_BASELINES_H
#define KVS_BENCH_SIM_BASELINES_H

#include <stdint.h>

#include "engine.h"
#include "sim_int.h"

/* One backend as a router may see it: its engine (queue, KV in use, the
 * prefix cache its KV events would publish, the requests it holds), and
 * the requests routed to it that have not ended. */
struct sim_bview {
	const struct kvs_engine *eng;
	uint64_t outstanding;
};

struct sim_baseline;

/* The state of policy p (P_SGLANG, P_LLMD, P_DYNAMO) for the fleet of o,
 * its random choices fixed by o->seed; NULL when out of memory. */
struct sim_baseline *sim_baseline_new(enum pol p, const struct sim_opts *o);
/* The backend for request r among v[0..nb), at virtual time now_ms (never
 * decreasing); records what the policy learns from its own choice. r->id
 * names the request in v's engines once submitted. */
int sim_baseline_pick(struct sim_baseline *s, const struct sim_bview *v, uint32_t nb,
		      const struct kvs_eng_req *r, double now_ms);
void sim_baseline_free(struct sim_baseline *s);

#endif
