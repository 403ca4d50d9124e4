/* SPDX-License-Identifier: MIT */
/* kvsplice-bench datapath, the data-path benchmark: what main.c calls. */
#ifndef KVS_BENCH_DATAPATH_H
#define KVS_BENCH_DATAPATH_H

/* kvsplice-bench datapath [options]: argv[0] is "datapath". An echo
 * backend and a client in this process, through a direct connection,
 * kvspliced's kernel path, its userspace path and HAProxy, side by side. */
int bench_datapath(int argc, char **argv);

#endif
