/* SPDX-License-Identifier: MIT */
/*
 * kvsplice-sim's server: a KVS1 listener whose requests, from every
 * connection, go to one batching engine stepped in (scaled) real time.
 * main.c sets the options in struct sim, then starts, serves and stops it.
 */
#ifndef KVS_SIM_SERVER_H
#define KVS_SIM_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "engine.h"
#include "model.h"
#include "netutil.h"

#define PROG "kvsplice-sim"

struct sim_conn;
struct sim_req;

struct sim {
	struct kvs_model_params model;
	double time_scale;
	uint32_t id;
	uint32_t max_payload;
	uint32_t max_seqs;
	const char *not_ready_file; /* while it exists, PONGs say NOT_READY */
	/* What its PONGs say it is (include/kvsplice/proto.h,
	 * KVS_OFF_INSTANCE): --instance, or drawn at start; its cache starts
	 * empty with it. */
	uint32_t instance;
	int epfd, lfd, tfd;
	struct kvs_engine eng;
	bool stepping;	   /* a step's timer is running */
	double step_start; /* model ms */
	uint64_t t0_ns;	   /* model time 0 */
	struct sim_req *live;
	struct sim_conn *conns; /* open connections */
	struct kvs_buf oai;	/* OpenAI-shaped output being built (oai.c), reused */
	bool in_step;		/* replies wait for the step's one write (on_timer) */
	uint64_t served, cached_tokens_total, prompt_tokens_total;
	uint64_t cancelled, cancels_ignored; /* CANCELs that stopped a request; for none */
};

/* Allocates the engine, listens on addr (listen: how the user wrote it, for
 * messages), and sets up the epoll set and the step timer. 0, or the exit
 * status (1) with a message on stderr. */
int sim_start(struct sim *s, const struct kvs_addr *addr, const char *listen);
/* Serves until *stop is set. */
void sim_serve(struct sim *s, volatile sig_atomic_t *stop);
/* Logs the totals, frees what is queued and open, closes everything. */
void sim_stop(struct sim *s);

#endif
