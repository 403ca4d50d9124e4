/* SPDX-License-Identifier: MIT */
/* kvsplice-bench http, straight to an OpenAI-compatible server: what main.c
 * calls. */
#ifndef KVS_BENCH_HTTP_H
#define KVS_BENCH_HTTP_H

/* kvsplice-bench http --url URL [options]: argv[0] is "http". */
int bench_http(int argc, char **argv);

#endif
