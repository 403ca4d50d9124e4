/* SPDX-License-Identifier: MIT */
/* Strict command-line number parsing: the whole string, in range, or an
 * error that names the flag. */
#ifndef KVS_ARGS_H
#define KVS_ARGS_H

#include <stdint.h>
#include <stdio.h>

#include "log.h"

/* 0 on success; on error prints "PROG: FLAG: ..." on err, returns -1. */
int kvs_arg_u64(FILE *err, const char *prog, const char *flag, const char *s, uint64_t min,
		uint64_t max, uint64_t *out);
int kvs_arg_u32(FILE *err, const char *prog, const char *flag, const char *s, uint32_t min,
		uint32_t max, uint32_t *out);
/* --log-level: warn, info or debug. */
int kvs_arg_log_level(FILE *err, const char *prog, const char *s, enum kvs_log_level *out);
/* --release-prefill: 'first-token' (*early = 1) or 'end' (*early = 0). */
int kvs_arg_release_prefill(FILE *err, const char *prog, const char *s, int *early);
int kvs_arg_double(FILE *err, const char *prog, const char *flag, const char *s, double min,
		   double max, double *out);

#endif
