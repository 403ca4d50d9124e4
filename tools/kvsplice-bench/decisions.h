/* SPDX-License-Identifier: MIT */
/* kvsplice-bench decisions, routing decisions per second: what main.c calls. */
#ifndef KVS_BENCH_DECISIONS_H
#define KVS_BENCH_DECISIONS_H

/* kvsplice-bench decisions [options]: argv[0] is "decisions". */
int bench_decisions(int argc, char **argv);

#endif
