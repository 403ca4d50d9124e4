/* SPDX-License-Identifier: MIT */
/*
 * Logging in logfmt (key=value pairs), one line per event, to stderr:
 *   ts=2026-11-29T19:00:00.123Z level=info prog=kvspliced event=accept fd=7
 * Callers pass the fields after prog=; the level is process-wide, like
 * xdp-tools' pr_warn/pr_info/pr_debug.
 */
#ifndef KVS_LOG_H
#define KVS_LOG_H

#include <stddef.h>

enum kvs_log_level {
	KVS_LOG_WARN = 0,
	KVS_LOG_INFO = 1,
	KVS_LOG_DEBUG = 2,
};

void kvs_log_init(const char *prog, enum kvs_log_level level);
/* Parses "warn", "info" or "debug"; returns -1 for anything else. */
int kvs_log_parse_level(const char *s);
int kvs_log_enabled(enum kvs_log_level level);
/* n bytes of p for a quoted logfmt value (key="..."), cut to fit buf:
 * printable ASCII as it is (quotes and backslashes escaped), CR LF TAB
 * as \r \n \t, any other byte as \xNN. Returns buf. */
const char *kvs_log_quote_mem(const void *p, size_t n, char *buf, size_t len);
/* kvs_log_quote_mem of the string s. */
const char *kvs_log_quote(const char *s, char *buf, size_t len);
void kvs_log(enum kvs_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pr_warn(...) kvs_log(KVS_LOG_WARN, __VA_ARGS__)
#define pr_info(...) kvs_log(KVS_LOG_INFO, __VA_ARGS__)
#define pr_debug(...)                                                                              \
	do {                                                                                       \
		if (kvs_log_enabled(KVS_LOG_DEBUG))                                                \
			kvs_log(KVS_LOG_DEBUG, __VA_ARGS__);                                       \
	} while (0)

#endif
