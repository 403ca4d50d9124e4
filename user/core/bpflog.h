/* SPDX-License-Identifier: MIT */
/* libbpf's messages (and the verifier's logs it passes on) through our
 * logger, so that they follow --log-level and read as logfmt. */
#ifndef KVS_BPFLOG_H
#define KVS_BPFLOG_H

/* From now on libbpf prints through kvs_log: its warnings at warn, its
 * info and debug lines at debug, one logfmt line per line of its text. */
void kvs_log_libbpf(void);

#endif
