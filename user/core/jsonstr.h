/* SPDX-License-Identifier: MIT */
/* A string as a JSON string, for the tools that print their JSON with
 * printf rather than build it: a path or a server's words may hold
 * quotes, backslashes or control characters. */
#ifndef KVS_JSONSTR_H
#define KVS_JSONSTR_H

#include <stddef.h>
#include <stdio.h>

/* s (at most max bytes, up to its NUL) quoted and escaped onto f. */
void kvs_json_str(FILE *f, const char *s, size_t max);

#endif
