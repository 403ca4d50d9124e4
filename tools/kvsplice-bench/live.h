/* SPDX-License-Identifier: MIT */
/* kvsplice-bench live (or run), the load generator: what main.c calls. */
#ifndef KVS_BENCH_LIVE_H
#define KVS_BENCH_LIVE_H

#include <signal.h>
#include <stdio.h>

/* live's part of the top-level --help: what it does, then its options. */
void live_usage(FILE *f);
/* kvsplice-bench live [options]: argv[0] is "live" or "run". usage prints
 * the whole --help (live's is the top level's); *stop, set by the caller's
 * SIGINT/SIGTERM handler, ends the run early (what finished is reported). */
int bench_live(int argc, char **argv, void (*usage)(FILE *f), volatile sig_atomic_t *stop);

#endif
