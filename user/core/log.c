// SPDX-License-Identifier: MIT
/* Logging in logfmt, one line per event, at a process-wide level. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

/* Process-wide by design: every module logs with the same level and name. */
static const char *log_prog = "kvsplice";
static enum kvs_log_level log_level = KVS_LOG_INFO;

static const char *const level_names[] = { "warn", "info", "debug" };

void kvs_log_init(const char *prog, enum kvs_log_level level)
{
	log_prog = prog;
	log_level = level;
}

int kvs_log_parse_level(const char *s)
{
	for (unsigned int i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (strcmp(s, level_names[i]) == 0)
			return (int)i;
	return -1;
}

int kvs_log_enabled(enum kvs_log_level level)
{
	return level <= log_level;
}

const char *kvs_log_quote_mem(const void *p, size_t n, char *buf, size_t len)
{
	const unsigned char *s = p;
	size_t o = 0;

	if (!len)
		return buf;
	for (size_t i = 0; i < n && o + 5 < len; i++) {
		unsigned char ch = s[i];

		if (ch == '\r' || ch == '\n' || ch == '\t')
			o += (size_t)snprintf(buf + o, len - o, "\\%c",
					      ch == '\r' ? 'r' :
					      ch == '\n' ? 'n' :
							   't');
		else if (ch == '"' || ch == '\\')
			o += (size_t)snprintf(buf + o, len - o, "\\%c", ch);
		else if (ch >= 0x20 && ch < 0x7f)
			buf[o++] = (char)ch;
		else
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", ch);
	}
	buf[o] = '\0';
	return buf;
}

const char *kvs_log_quote(const char *s, char *buf, size_t len)
{
	return kvs_log_quote_mem(s, strlen(s), buf, len);
}

void kvs_log(enum kvs_log_level level, const char *fmt, ...)
{
	char ts[32], line[1024];
	struct timeval tv;
	struct tm tm;
	va_list ap;
	int n;

	if (!kvs_log_enabled(level))
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	n = snprintf(line, sizeof(line), "ts=%s.%03ldZ level=%s prog=%s ", ts,
		     (long)(tv.tv_usec / 1000), level_names[level], log_prog);
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(line))
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One write per line, so lines from several processes sharing a log do
	 * not interleave mid-line. */
	fprintf(stderr, "%s\n", line);
}
