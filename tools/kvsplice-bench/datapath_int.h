/* SPDX-License-Identifier: MIT */
/*
 * What the files of kvsplice-bench datapath share: the options, a run's
 * result, and the parts datapath.c drives: the echo backend
 * (datapath_echo.c), the client and its measurement (datapath_load.c), and
 * the gateways between them (datapath_gateway.c).
 */
#ifndef KVS_BENCH_DATAPATH_INT_H
#define KVS_BENCH_DATAPATH_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define PROG "kvsplice-bench datapath"
#define MAX_SIZES 8
#define MAX_CONNS 64
#define MAX_SAMPLES (1u << 20)

enum { C_DIRECT, C_KERNEL, C_USER, C_HAPROXY, C_HAPROXY_SPLICE, NCFG };
enum { M_RR, M_PIPE, M_STREAM, NMODES };

struct dp_opts {
	uint32_t conns, depth;
	double seconds, warmup;
	uint32_t sizes[MAX_SIZES], nsizes;
	uint32_t stream_request, stream_chunks, stream_chunk_bytes, stream_gap_us, stream_depth;
	int stream_step_write; /* --stream-step-write */
	bool on[NCFG];
	bool mode_on[NMODES];
	int json;
	const char *plot; /* --plot DIR */
	char gw_bin[4096];
	const char *haproxy;
};

struct result {
	int cfg, mode;
	uint32_t size;
	double rps, gbps, p50_us, p99_us;
	double proc_s, kernel_s, bytes; /* CPU: the gateway process, softirq + kworkers */
	double requests;		/* answered in the measured window */
	double p50_added_us, p99_added_us, cpu_s_per_gb, proc_s_per_gb, cpu_us_per_req;
	bool ok;
};

/* datapath_echo.c: the echo backend. dp_echo_accept is a thread's start
 * routine (arg: a struct echo): it accepts until the listener fails, and
 * serves each connection on threads of its own. */
struct echo {
	int fd;		      /* the listener */
	uint32_t chunk_bytes; /* a streamed CHUNK's payload */
	uint32_t gap_us;      /* between two decode steps (0: back to back) */
	bool step_write;      /* a connection's step in one write, by client */
};
void *dp_echo_accept(void *arg);

/* datapath_load.c: one measurement, through port, of frames of size bytes
 * in mode; gw is the gateway's pid, whose CPU time is counted (0: none),
 * name the config's, for messages. Fills r's figures; 0 or -errno. */
int dp_run_load(const struct dp_opts *o, const char *name, uint16_t port, uint32_t size, int mode,
		pid_t gw, struct result *r);

/* datapath_gateway.c: starts cfg's gateway in front of the echo backend,
 * its log and port file named after name in tmp: its pid and *port, or
 * -errno. */
pid_t dp_start_gateway(const struct dp_opts *o, int cfg, const char *name, uint16_t echo,
		       const char *tmp, int *port);
void dp_stop_gateway(pid_t pid);
/* The files dp_start_gateway wrote in tmp for the gateways named in
 * names (NULL-terminated), then tmp itself: removed. Only those, so a
 * directory that holds anything else stays. */
void dp_remove_tmp(const char *tmp, const char *const *names);

#endif
