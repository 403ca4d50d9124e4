/* SPDX-License-Identifier: MIT */
/*
 * What the files of kvsplice-bench live share: a run's options, its
 * requests and connections (live.c sends and reads them), and the summary
 * live_report.c makes of them.
 */
#ifndef KVS_BENCH_LIVE_INT_H
#define KVS_BENCH_LIVE_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "netutil.h"
#include "trace.h"

#define PROG "kvsplice-bench"
#define MAX_BACKEND_IDS 256
#define MAX_TARGETS 64

enum req_status { RS_PENDING = 0, RS_OK, RS_ERROR, RS_MISMATCH };

struct req {
	uint32_t conn;
	uint32_t group;
	uint32_t chunks;
	uint32_t backend_id;
	uint32_t max_tokens; /* asked for: the chunks the response must hold */
	uint32_t prompt_tokens, cached_tokens;
	uint16_t error;
	uint8_t status;
	bool bad_bytes; /* a chunk differed from what the backend must send */
	uint64_t send_ns, first_ns, end_ns;
};

struct bconn {
	int fd;
	struct kvs_buf rx, tx;
	uint32_t inflight;
	bool dead;
};

struct run_opts {
	struct kvs_addr addrs[MAX_TARGETS]; /* connection i uses addrs[i % n] */
	uint32_t naddrs;
	uint32_t requests, connections, depth, max_tokens;
	uint32_t prefixes, prefix_tokens, suffix_tokens, suffix_jitter;
	uint32_t conversations, turn_tokens; /* conversation workload */
	uint64_t salt;
	uint32_t model;
	int hint, json, per_request, quiet;
	uint32_t timeout_s;
	uint32_t fleet; /* backends behind the target; 0 = those seen */
	double rate;	/* open loop: Poisson arrivals per second; 0 = closed loop */
	uint64_t seed;	/* of the arrival times */
	const char *prompt_file;
	const char *plot_dir, *label;
	const char *trace; /* replay: arrivals, lengths and prompts from the trace */
	double speed;	   /* of the trace's arrivals */
	int requests_set, max_tokens_set;
};

struct run {
	const struct run_opts *o;
	struct req *reqs; /* index = req_id - 1 */
	uint32_t n;	  /* requests to send: --requests, or the trace's */
	uint32_t next, done;
	struct kvs_trace trace;
	struct bconn *conns;
	int epfd;
	uint8_t *prefix_file;
	size_t prefix_file_len;
	uint8_t *prompt;	  /* scratch */
	uint64_t next_arrival_ns; /* open loop: when the next request is due */
	uint64_t rng;
	volatile sig_atomic_t *stop; /* set by the caller's SIGINT/SIGTERM handler */
};

struct summary {
	uint32_t ok, errors, mismatches, lost;
	double ttft_p50, ttft_p90, ttft_p99, e2e_p50, e2e_p90;
	double rps, tok_s, hit_rate, load_max_over_mean, load_cv;
	uint64_t prompt_tokens, cached_tokens, output_tokens;
	uint32_t nbackends;
	uint32_t backend_ids[MAX_BACKEND_IDS];
	uint32_t backend_reqs[MAX_BACKEND_IDS];
	uint32_t groups_split; /* prefix groups served by more than one backend */
	uint32_t turn_moves;   /* later turns served elsewhere than the one before */
	uint32_t later_turns;
	double wall_s;
	double *ttft; /* of the ok requests, sorted; the caller frees it */
};

/* Requests that share a prefix by construction form a group (a prefix
 * group or a conversation): how many groups; 0 for a trace, whose sharing
 * is its own affair. */
static inline uint32_t live_groups(const struct run *r)
{
	if (r->o->trace)
		return 0;
	return r->o->conversations ? r->o->conversations : r->o->prefixes;
}

/* live_report.c */
/* The run's figures; s->ttft is the caller's to free. */
void live_summarize(const struct run *r, double wall_s, struct summary *s);
/* --per-request: a line per request. */
void live_print_per_request(const struct run *r);
/* The summary, as text or (--json) JSON. */
void live_print_summary(const struct run *r, const struct summary *s);
/* --plot: this run's TTFT CDF and requests per backend. 0 or -1. */
int live_plot(const struct run *r, const struct summary *s);

#endif
