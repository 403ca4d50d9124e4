/* SPDX-License-Identifier: MIT */
/*
 * The admission program (bpf/admission.bpf.c) as the controller sees it:
 * CIDR lists parsed and loaded into its LPM tries, the program attached to
 * the gateway's interface (native XDP where the driver has it, generic
 * otherwise), and detached again on exit.
 */
#ifndef KVS_ADMISSION_H
#define KVS_ADMISSION_H

#include <stdint.h>

struct admission_bpf;

#define KVS_ADM_MAX_LIST 256 /* CIDRs per list on the command line */

struct kvs_adm_opts {
	const char *pin_dir;
	const char *ifname;
	uint16_t port;	    /* the gateway's listening port */
	uint32_t syn_rate;  /* SYNs per source per second; 0 = no limit */
	uint32_t syn_burst; /* bucket depth; 0 = the rate (one second's worth) */
	const char *allow[KVS_ADM_MAX_LIST];
	uint32_t nallow;
	const char *deny[KVS_ADM_MAX_LIST];
	uint32_t ndeny;
};

struct kvs_admission {
	struct admission_bpf *skel;
	int ifindex;
	uint32_t xdp_flags; /* how it was attached, for the detach */
};

/* Loads, fills and attaches. 0 or -errno, with a log line saying why. */
int kvs_adm_open(struct kvs_admission *a, const struct kvs_adm_opts *o);
void kvs_adm_close(struct kvs_admission *a);
/* Its drop counters, summed over CPUs; -ENOENT when it is not running. */
struct kvs_xdp_stats;
int kvs_adm_stats(const struct kvs_admission *a, struct kvs_xdp_stats *x);

#endif
