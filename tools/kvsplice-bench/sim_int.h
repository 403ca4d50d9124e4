/* SPDX-License-Identifier: MIT */
/*
 * What the files of kvsplice-bench sim share: the options, the workload
 * (sim_workload.c makes it), a policy's result (sim_fleet.c runs the fleet
 * under it) and the report (sim_report.c).
 */
#ifndef KVS_BENCH_SIM_INT_H
#define KVS_BENCH_SIM_INT_H

#include <stdint.h>

#include "kvsplice/maps.h"

#define PROG "kvsplice-bench sim"
#define MAX_POLICIES 8

enum pol { P_RR, P_LOR, P_CHASH, P_KVSPLICE, P_SGLANG, P_LLMD, P_DYNAMO };
extern const char *const pol_names[P_DYNAMO + 1]; /* by enum pol; sim_fleet.c */

/* How policy kvsplice is modelled: the split the gateway runs (the kernel
 * follows installed routes and places the rest, user/core/kroute.h), or the
 * controller deciding every request (kvs_policy_decide), as before it. */
enum kvsplice_model { M_SPLIT, M_CONTROLLER };

enum join_mode { J_JOINS, J_NEVER, J_ALWAYS };

enum workload_kind { W_CONTEXTS, W_GROUPS, W_CONVERSATIONS, W_UNIQUE };
/* by enum workload_kind, then NULL (--workload's words); sim_workload.c */
extern const char *const workload_names[W_UNIQUE + 2];

struct sim_opts {
	uint32_t backends, kv_blocks, requests, context_tokens, own_tokens, max_tokens, contexts;
	/* what each request tells the router it may generate (0: nothing);
	 * max_tokens, or the trace's output_length, is what it generates */
	uint32_t declared_max_tokens;
	/* kvsplice: its index sized index_scale x the backends' real caches
	 * (a router's estimate is rarely right), and whether the backends'
	 * END reports correct it (kvs_policy_feedback, as the gateway does) */
	double index_scale;
	int feedback;
	int hot; /* kvsplice: replicate hot prefixes (--kvsplice-hot) */
	double rate, occupancy;
	int rate_set; /* --rate given (the sweep scales the default by backends) */
	/* the last backend joins this many seconds after the first arrival
	 * (absent until then, as one added with kvsplicectl); 0: there from
	 * the start */
	double join_at_s;
	/* with join_at_s: the last backend joins then (J_JOINS), never comes
	 * (J_NEVER: the fleet without it) or is there from the start
	 * (J_ALWAYS): the same requests, before and after, in all three */
	int newcomer;
	int join_flush; /* kvsplice: every route voided at the join (routes flush) */
	double balance, recompute_weight; /* kvsplice policy */
	double keep_balance;		  /* the kernel's keep bound (kvs_place_keep) */
	int release_early;		  /* prefill charge off at the first token */
	enum kvsplice_model model;	  /* kvsplice: split or controller */
	uint32_t window_blocks;		  /* kvsplice split: blocks the kernel hashes */
	const char *trace;		  /* replay this JSONL trace instead */
	enum workload_kind kind;
	uint32_t groups, per_group, system_tokens, question_tokens; /* groups */
	int system_set;						    /* --system-tokens given */
	uint32_t conversations, turn_tokens;			    /* conversations */
	double speed;						    /* trace arrival-rate factor */
	uint64_t seed;
	int json;
	int quiet; /* no progress lines on stderr (the sweep's runs) */
	/* --sweep (sim_sweep.c): the load ladder from sweep_from to at most
	 * sweep_max x round robin's knee in steps of sweep_step; a policy
	 * saturates serving under sweep_served of what is offered; kvsplice
	 * ties within sweep_tol_pct percent or sweep_tol_ms; the knee is also
	 * where rr's TTFT p90 passes sweep_knee_p90 ms (0: not); each load is
	 * judged on the mean of sweep_repeat runs SIM_SWEEP_SPACING apart */
	int sweep;
	uint32_t sweep_repeat;
	double sweep_from, sweep_step, sweep_max, sweep_served, sweep_tol_pct, sweep_tol_ms,
		sweep_knee_p90;
	/* the first sweep_warmup of a run's requests, by arrival, left out of
	 * the TTFT percentiles judged (0: none) */
	double sweep_warmup;
	const char *plot_dir;
	const char *dump_path; /* --dump: every request's fate, CSV */
	uint32_t npol;
	enum pol pols[MAX_POLICIES];
};

/* The workload, fixed by the seed (or the trace): per request its arrival,
 * and either a context (generated) or the trace's lengths and block ids. */
struct workload {
	uint32_t n;
	double *arrival_ms;
	uint32_t *context;
	uint32_t *prompt_tokens, *max_tokens;
	uint64_t **ids; /* trace, groups, conversations: content ids of blocks */
	uint32_t *nids;
	uint32_t id_blocks; /* our 16-token blocks per id: 32 in a trace, else 1 */
};

/* --join-at: the requests that arrived before the join and after it. */
struct join_figures {
	uint32_t before, after;
	double before_p50, before_p90, before_p99; /* TTFT, ms */
	double after_p50, after_p90, after_p99;
	double share;	   /* of the requests after, those the newcomer served */
	double share_60;   /* the same, of those in the join's first 60 s */
	double work_share; /* of the prefill tokens computed after */
	double hit_after;  /* hit rate of the requests after */
};

/* kvsplice: its index of each backend against the real cache (feedback). */
#define SIM_INDEX_SAMPLES 20
struct index_figures {
	/* mean index size over the backends / the real capacity, at the end
	 * and at SIM_INDEX_SAMPLES even points of the arrivals' span */
	double final, series[SIM_INDEX_SAMPLES];
	/* TTFT p50, p90, p99 and hit rate of the requests that arrived in
	 * the first and in the last third of the run */
	double first[4], last[4];
};

/*
 * Where a policy's hits went (item 8 of issue 16): at each decision, the
 * longest prefix of the prompt any backend's cache held, and what the
 * chosen one held. What the fleet held and the policy did not pick is lost
 * to routing; what nobody held, to what the caches kept. For kvsplice,
 * the loss by the kernel's verdict (or the controller's reason), and each
 * request's verdict, TTFT and cached tokens by arrival, so that what it
 * spilled can be compared with what another policy did with the same
 * requests.
 */
#define SIM_WHY_N 24 /* kvs_why 0..KVS_WHY_MAX; 16 + enum kvs_reason (controller) */
struct anatomy {
	double held_anywhere, held_by_chosen; /* of prompt tokens */
	double duplicated;	       /* of requests some backend held a prefix of: held on 2+ */
	double lost_by_why[SIM_WHY_N]; /* of prompt tokens (kvsplice) */
	uint32_t n_by_why[SIM_WHY_N];
	/* by arrival (freed with the result) */
	double *ttft;
	uint32_t *cached, *prompt;
	uint8_t *why;
	uint8_t *backend; /* the one that served it */
};

struct result {
	const char *name;
	double ttft_p50, ttft_p90, ttft_p99, e2e_p50, e2e_p90, rps, tok_s, hit, mm, cv;
	double mm_work; /* load max/mean by prefill tokens computed */
	uint32_t done;
	double *ttft;			/* sorted, done of them: for --plot */
	double loads[KVS_MAX_BACKENDS]; /* requests each backend served */
	struct join_figures join;	/* --join-at only */
	struct index_figures index;	/* kvsplice only */
	struct anatomy anat;
};

/* sim_workload.c */
/* The workload of o: generated, fixed by the seed, or read from --trace.
 * 0, or -1 with a message (a trace that cannot be read). */
/* sim_workload.c: the defaults of every option (tests start from them). */
extern const struct sim_opts sim_defaults;
int sim_make_workload(const struct sim_opts *o, struct workload *w);
void sim_free_workload(struct workload *w);
uint32_t sim_prompt_tokens(const struct sim_opts *o, const struct workload *w, uint32_t i);
/* The block hashes of request i, sim_prompt_tokens() / 16 of them, into h. */
void sim_fill_request(const struct sim_opts *o, const struct workload *w, uint32_t i, uint64_t *h);
/* Hit rate of one LRU cache the size of the whole fleet on the requests. */
double sim_fleet_lru_ceiling(const struct sim_opts *o, const struct workload *w);

/* sim_fleet.c: the fleet in virtual time under policy p, every request
 * served; res->ttft is the caller's to free. */
void sim_run_policy(const struct sim_opts *o, const struct workload *w, enum pol p,
		    struct result *res);

/* sim_report.c */
/* The result the others are compared with: rr's, or the first policy's. */
uint32_t sim_baseline(const struct sim_opts *o, const struct result *res);
void sim_print_json(const struct sim_opts *o, const struct workload *w, double ceiling,
		    const struct result *res, uint32_t base);
void sim_print_header(const struct sim_opts *o, const struct workload *w, double ceiling);
void sim_print_table(const struct sim_opts *o, const struct result *res, uint32_t base);
void sim_free_result(struct result *r);
/* --dump: every request's fate, as CSV, into path. 0, or -1 with a
 * message. */
int sim_write_dump(const char *path, const struct sim_opts *o, const struct workload *w,
		   const struct result *res);

#endif
