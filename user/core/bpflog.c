// SPDX-License-Identifier: MIT
/* libbpf's messages through our logger (libbpf_set_print). */
#include "bpflog.h"

#include <bpf/libbpf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* libbpf's info lines narrate loading (object, maps, relocations): an
 * operator wants them only when debugging, like ours at debug. */
static enum kvs_log_level level_of(enum libbpf_print_level level)
{
	return level == LIBBPF_WARN ? KVS_LOG_WARN : KVS_LOG_DEBUG;
}

static int print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	enum kvs_log_level lv = level_of(level);
	char *text, *line, *save = NULL;

	if (!kvs_log_enabled(lv))
		return 0;
	/* Whole, however long: a verifier log ends with what went wrong. */
	if (vasprintf(&text, fmt, ap) < 0)
		return 0;
	/* A verifier log comes as one message of many lines: each its own
	 * record, quotes made single so that the value stays one field. */
	for (char *p = text; *p; p++)
		if (*p == '"')
			*p = '\'';
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "libbpf: ", 8)) /* event=libbpf says it */
			line += 8;
		kvs_log(lv, "event=libbpf msg=\"%s\"", line);
	}
	free(text);
	return 0;
}

void kvs_log_libbpf(void)
{
	libbpf_set_print(print);
}
