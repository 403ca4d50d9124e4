/* SPDX-License-Identifier: MIT */
/*
 * kvsplice-bench sim --sweep: every policy from below round robin's knee
 * to the load where the best of them saturates, and whether kvsplice is
 * best there (sim_sweep.c runs it, sim_sweep_report.c prints it).
 */
#ifndef KVS_BENCH_SIM_SWEEP_H
#define KVS_BENCH_SIM_SWEEP_H

#include <stdint.h>

#include "sim_int.h"

#define SWEEP_MAX_PROBES 32
#define SWEEP_MAX_LOADS 64

/* kvsplice against the best of the others on one figure (lower is better). */
enum sweep_verdict { SV_BEST, SV_TIED, SV_LOSES, SV_NONE /* kvsplice not run */ };
extern const char *const sweep_verdict_names[SV_NONE + 1];

/* One rr run of the knee search. */
struct sweep_probe {
	double load; /* req/s, or the trace's speed */
	double served, p90;
	int over; /* past the knee */
};

/* --sweep-repeat: at most this many runs a load, SIM_SWEEP_SPACING of the
 * load apart (N = 4: 0.994, 0.998, 1.002 and 1.006 x the load). */
#define SIM_SWEEP_MAX_REPEAT 16
#define SIM_SWEEP_SPACING 0.004

/* Run k of n at one load: the factor its load is scaled by. */
double sim_sweep_repeat_factor(uint32_t k, uint32_t n);

struct sweep_pol {
	const char *name;
	double p50, p90, p99, rps, served, hit, mm_work;
	int skipped;	    /* saturated at lower loads, not run (TTFT infinite) */
	int saturated_runs; /* loads in a row up to this one it served too little at */
};

struct sweep_load {
	double factor; /* x the knee */
	double load;   /* req/s, or the trace's speed */
	double offered_rps;
	struct sweep_pol pol[MAX_POLICIES];
	double best_served; /* the most any policy served */
	int saturated;	    /* best_served under sweep_served */
	enum sweep_verdict v90, v99;
	double gap90, gap99; /* kvsplice against the best other, percent */
};

struct sweep {
	double base; /* the load the knee search starts from */
	double knee; /* the lowest load found past rr's knee */
	uint32_t nprobe, nload, npol;
	struct sweep_probe probe[SWEEP_MAX_PROBES];
	struct sweep_load load[SWEEP_MAX_LOADS];
};

/* What policy r served of what w offered: the time arrivals took over the
 * time until the last request ended (1 when every request is served as it
 * comes; a queue that grows stretches the run past the arrivals). */
double sim_served(const struct workload *w, const struct result *r);

/* kvsplice's figure v[k] against the least of the others in v[0..n):
 * best if no other is lower, tied if within tol_pct percent or tol_ms of
 * it (either), else it loses; *gap_pct is how far above (negative:
 * below) the best other it is. */
enum sweep_verdict sim_sweep_verdict(const double *v, uint32_t n, int k, double tol_pct,
				     double tol_ms, double *gap_pct);

/*
 * Whether a policy whose run at the load before is prev is left out of the
 * next load (it counts as infinitely slow there): once it has served under
 * --sweep-served at two loads in a row, or was left out already. One load
 * is not enough: near its saturation a policy's served share wavers by a
 * point or two from one load to the next (kvsplice on the trace, 16
 * backends: 96.97% at 3.1x the knee, 99.2% at 3.2x), and leaving it out
 * after one dip judged every higher load without it.
 */
int sim_sweep_skip(const struct sweep_pol *prev);

/* res's TTFT percentiles over its requests after the first warmup (a
 * fraction) of the n by arrival (--sweep-warmup). */
void sim_sweep_after_warmup(struct result *res, uint32_t n, double warmup);

/* The workload's load (req/s, or a trace's speed), read and set. */
double sim_load_of(const struct sim_opts *o);
void sim_set_load(struct sim_opts *o, double load);

/* Round robin's knee of o's workload into s->knee (and its probes): 0, or
 * -1 (the workload cannot be made, or no load up to 1024 x the start
 * saturates it). */
int sim_sweep_knee(const struct sim_opts *o, struct sweep *s);

/* The ladder: every policy of o from sweep_from x s->knee up. 0 or -1. */
int sim_sweep_ladder(const struct sim_opts *o, struct sweep *s);

/* kvsplice-bench sim --sweep with the parsed options: 0, or the exit
 * status. */
int sim_sweep(const struct sim_opts *o);

/* sim_sweep_report.c */
void sim_sweep_print(const struct sim_opts *o, const struct sweep *s);
void sim_sweep_json(const struct sim_opts *o, const struct sweep *s);

#endif
