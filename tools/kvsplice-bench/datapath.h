/* SPDX-License-Identifier: MIT */
#ifndef KVS_BENCH_DATAPATH_H
#define KVS_BENCH_DATAPATH_H

/* kvsplice-bench datapath [options]: argv[0] is "datapath". The data-path
 * benchmark: an echo backend and a client in this process, through a
 * direct connection, kvspliced's kernel path, its userspace path and
 * HAProxy, side by side. */
int bench_datapath(int argc, char **argv);

#endif
