/* SPDX-License-Identifier: MIT */
/* kvsplice-bench sim, the fleet in virtual time: what main.c calls. */
#ifndef KVS_BENCH_SIM_H
#define KVS_BENCH_SIM_H

/* kvsplice-bench sim [options]: argv[0] is "sim". */
int bench_sim(int argc, char **argv);

#endif
