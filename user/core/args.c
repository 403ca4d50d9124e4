// SPDX-License-Identifier: MIT
/* Strict number parsing for command lines: the whole string, in range. */
#include "args.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

int kvs_arg_u64(FILE *err, const char *prog, const char *flag, const char *s, uint64_t min,
		uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (!*s || *end || errno || s[0] == '-') {
		fprintf(err, "%s: %s: '%s' is not a whole number\n", prog, flag, s);
		return -1;
	}
	if (v < min || v > max) {
		fprintf(err, "%s: %s: %llu is out of range [%llu, %llu]\n", prog, flag, v,
			(unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
}

int kvs_arg_u32(FILE *err, const char *prog, const char *flag, const char *s, uint32_t min,
		uint32_t max, uint32_t *out)
{
	uint64_t v;

	if (kvs_arg_u64(err, prog, flag, s, min, max, &v))
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int kvs_arg_double(FILE *err, const char *prog, const char *flag, const char *s, double min,
		   double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (!*s || *end || errno) {
		fprintf(err, "%s: %s: '%s' is not a number\n", prog, flag, s);
		return -1;
	}
	if (!(v >= min && v <= max)) {
		fprintf(err, "%s: %s: %g is out of range [%g, %g]\n", prog, flag, v, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

int kvs_arg_release_prefill(FILE *err, const char *prog, const char *s, int *early)
{
	if (strcmp(s, "first-token") && strcmp(s, "end")) {
		fprintf(err, "%s: --release-prefill: '%s' is neither 'first-token' nor 'end'\n",
			prog, s);
		return -1;
	}
	*early = !strcmp(s, "first-token");
	return 0;
}

int kvs_arg_log_level(FILE *err, const char *prog, const char *s, enum kvs_log_level *out)
{
	int lvl = kvs_log_parse_level(s);

	if (lvl < 0) {
		fprintf(err, "%s: --log-level: '%s' is not warn, info or debug\n", prog, s);
		return -1;
	}
	*out = (enum kvs_log_level)lvl;
	return 0;
}
