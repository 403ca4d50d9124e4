/* SPDX-License-Identifier: MIT */
/*
 * What the files of kvsplice-bench live share: a run's options, its
 * requests and connections (live.c sends and reads them, live_verify.c
 * checks what comes back), and the summary live_report.c makes of them.
 */
#ifndef KVS_BENCH_LIVE_INT_H
#define KVS_BENCH_LIVE_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "codec.h"
#include "netutil.h"
#include "trace.h"

#define PROG "kvsplice-bench"
#define MAX_BACKEND_IDS 256
#define MAX_TARGETS 64

/* RS_MISMATCH: answered, but the answer broke a check of --verify. */
enum req_status { RS_PENDING = 0, RS_OK, RS_ERROR, RS_MISMATCH };

/* --verify: what a response must be. FRAMING holds for any KVS1 server
 * (kvsplice-adapter in front of a real one: CHUNKs of generated text, any
 * number, an early stop); SIM adds kvsplice-sim's exact output on top. */
enum live_verify { LIVE_VERIFY_SIM = 0, LIVE_VERIFY_FRAMING };

/* Frames that break the framing rules, by kind (live_verify.c says each
 * rule). Counted in both modes; any of them fails the run. */
enum live_fault {
	LF_BAD_FRAME,	/* a header the codec refuses: the connection is lost */
	LF_BAD_TYPE,	/* a type no server sends a client */
	LF_UNKNOWN_REQ, /* a req_id this run never sent */
	LF_WRONG_CONN,	/* a req_id sent on another connection */
	LF_AFTER_END,	/* a CHUNK after its request's END or ERROR */
	LF_DUP_END,	/* a second END or ERROR for a request */
	LF_BAD_END,	/* END figures that cannot be: output 0 after CHUNKs, cached > prompt */
	LF_MAX,
};

extern const char *const live_fault_names[LF_MAX];

struct req {
	uint32_t conn;
	uint32_t group;
	uint32_t chunks;
	uint32_t backend_id;
	uint32_t max_tokens; /* the output kvsplice-sim must send: the marker's, or
			      * the declared max_tokens if smaller */
	uint32_t prompt_tokens, cached_tokens, output_tokens; /* END's figures */
	uint16_t error;
	uint8_t status;
	bool sent;	/* on the wire: only then may frames name it */
	bool bad_bytes; /* --verify sim: a chunk differed from what the backend must send */
	bool gone;	/* ended by the gateway's backend_gone: stragglers may follow */
	bool got_end;	/* ended by an END (else by an ERROR, or not yet) */
	uint64_t send_ns, first_ns, end_ns;
};

struct bconn {
	int fd;
	struct kvs_buf rx, tx;
	uint32_t inflight;
	bool dead;
	/* The gateway said it closes it (an ERROR with req_id 0: a stop):
	 * nothing new goes on it, and its sending side is shut (fin) once
	 * its requests are answered, as docs/PROTOCOL.md "Closing" asks. */
	bool going, fin;
};

struct run_opts {
	struct kvs_addr addrs[MAX_TARGETS]; /* connection i uses addrs[i % n] */
	uint32_t naddrs;
	uint32_t requests, connections, depth;
	uint32_t max_tokens;	      /* the true output length: the marker's */
	uint32_t declared_max_tokens; /* the REQUEST header's (0: none declared) */
	int true_length;	      /* the header says the true length; no marker */
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
	const char *until; /* stop sending once this file exists */
	double speed;	   /* of the trace's arrivals */
	int verify;	   /* enum live_verify */
	int requests_set, max_tokens_set, timeout_set;
};

/* What the targets say of the fleet (live_fleet.c), asked before and
 * after the run. */
#define MAX_FLEET_SLOTS 64 /* a gateway's backend slots (KVS_MAX_BACKENDS) */
struct live_fleet {
	uint32_t gateways, old_gateways; /* targets that answered as gateways
					  * (old: without the fleet) */
	uint32_t from_gateway;		 /* the most backends a gateway said it has */
	uint32_t in_service;		 /* of which in service (up, not drained): the least */
	uint32_t from_backends;		 /* targets that are backends, by id */
	bool per_slot;			 /* a gateway answered slot by slot */
	bool in_before[MAX_FLEET_SLOTS], in_after[MAX_FLEET_SLOTS];
	uint32_t sent_before[MAX_FLEET_SLOTS], sent_after[MAX_FLEET_SLOTS];
};

struct run {
	const struct run_opts *o;
	struct req *reqs; /* index = req_id - 1 */
	uint32_t n;	  /* requests to send: --requests, or the trace's (those sent,
			   * once --until's file exists) */
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
	uint32_t faults[LF_MAX];     /* framing violations seen, by kind */
	uint32_t late;		     /* frames after a backend_gone ERROR, ignored */
	uint32_t conn_errors;	     /* ERRORs with req_id 0: about a connection */
	/* Requests' ERRORs by code: the first few are printed, the rest
	 * counted (unshown) and said as one line a second (live_errors_say). */
	uint32_t err_seen[KVS_E_MAX + 1], err_unshown[KVS_E_MAX + 1];
	uint64_t err_said_ns;
	bool sim_hinted; /* told once that another server needs --verify framing */
	struct live_fleet fleet;
};

struct summary {
	uint32_t ok, errors, mismatches, lost;
	uint32_t errors_by_code[KVS_E_MAX + 1]; /* the requests' ERROR codes */
	uint32_t framing_errors;		/* sum of the run's faults */
	uint32_t ends;				/* requests ended by an END */
	double ttft_p50, ttft_p90, ttft_p99, e2e_p50, e2e_p90;
	double rps, tok_s, hit_rate, load_max_over_mean, load_cv;
	double load_max_over_mean_work; /* by prefill tokens computed, not requests */
	uint64_t prompt_tokens, cached_tokens, output_tokens;
	uint32_t nbackends;
	uint32_t fleet;		/* backends counted in max/mean: at least nbackends */
	const char *fleet_from; /* "gateway", "backends", "option" or "seen" */
	uint32_t backend_ids[MAX_BACKEND_IDS];
	uint32_t backend_reqs[MAX_BACKEND_IDS];
	uint64_t backend_work[MAX_BACKEND_IDS]; /* prompt - cached tokens, from ENDs */
	uint32_t groups_split;			/* prefix groups served by more than one backend */
	uint32_t turn_moves; /* later turns served elsewhere than the one before */
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

/* live_verify.c */
/* A frame read on connection ci (p: its payload): checks it against
 * --verify and records it. True when it ended one of ci's requests. */
bool live_on_frame(struct run *r, uint32_t ci, const struct kvs_msg *m, const uint8_t *p);
/* A header the codec refused (status: why) on connection ci: the stream
 * cannot be framed past it. */
void live_bad_header(struct run *r, uint32_t ci, int status);
/* The requests' ERRORs not printed one by one since the last call, one
 * line per code; at most once a second unless final. */
void live_errors_say(struct run *r, bool final);

/* live_fleet.c */
/* Asks each target what it is (before the run, then after): a gateway
 * its fleet and the requests it has sent each backend, a backend its id.
 * Nothing with --fleet. */
void live_fleet_ask(const struct run_opts *o, struct live_fleet *f, bool after);
/* Backends in the fleet, *src saying who said so: --fleet ("option"), the
 * gateway ("gateway", the most it had before or after), the targets
 * themselves ("backends"); 0 and "seen" when nobody could say (a gateway
 * from before the fleet). */
uint32_t live_fleet_size(const struct run_opts *o, const struct live_fleet *f, const char **src);
/* Requests the gateway sent backend slot s during the run, or -1. */
int64_t live_fleet_sent(const struct live_fleet *f, uint32_t s);

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
