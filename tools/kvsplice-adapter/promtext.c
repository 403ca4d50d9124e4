// SPDX-License-Identifier: MIT
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "promtext.h"

/* The next line of [*p, end) into [*l, *l + *n); false at the end. */
static bool next_line(const char **p, const char *end, const char **l, size_t *n)
{
	const char *nl;

	if (*p >= end)
		return false;
	nl = memchr(*p, '\n', (size_t)(end - *p));
	*l = *p;
	*n = (size_t)((nl ? nl : end) - *p);
	*p = nl ? nl + 1 : end;
	if (*n && (*l)[*n - 1] == '\r') /* CRLF, from a proxy */
		(*n)--;
	return true;
}

/* Length of the metric name a sample line starts with. */
static size_t name_len(const char *l, size_t n)
{
	size_t i = 0;

	while (i < n && l[i] != '{' && l[i] != ' ' && l[i] != '\t')
		i++;
	return i;
}

/* The value after the name and labels, or false. Label values are quoted
 * strings that may hold '}' and escaped quotes. */
static bool value_of(const char *l, size_t n, size_t i, double *v)
{
	char num[64], *e;
	size_t k = 0;
	bool quoted = false;

	if (i < n && l[i] == '{') {
		for (i++; i < n; i++) {
			if (quoted && l[i] == '\\')
				i++;
			else if (l[i] == '"')
				quoted = !quoted;
			else if (!quoted && l[i] == '}')
				break;
		}
		if (i >= n)
			return false;
		i++;
	}
	while (i < n && (l[i] == ' ' || l[i] == '\t'))
		i++;
	while (i < n && l[i] != ' ' && l[i] != '\t' && k < sizeof(num) - 1)
		num[k++] = l[i++];
	num[k] = '\0';
	if (!k)
		return false;
	*v = strtod(num, &e);
	return *e == '\0' && isfinite(*v);
}

/* The samples of name: how many, and their sum. */
static unsigned samples(const char *text, size_t len, const char *name, double *sum)
{
	const char *p = text, *end = text + len, *l;
	size_t n, nl = strlen(name), k;
	unsigned count = 0;
	double v;

	*sum = 0;
	while (next_line(&p, end, &l, &n)) {
		if (!n || l[0] == '#')
			continue;
		k = name_len(l, n);
		if (k != nl || memcmp(l, name, nl) || !value_of(l, n, k, &v))
			continue;
		*sum += v;
		count++;
	}
	return count;
}

bool kvs_prom_sum(const char *text, size_t len, const char *name, double *out)
{
	return samples(text, len, name, out) > 0;
}

bool kvs_prom_mean(const char *text, size_t len, const char *name, double *out)
{
	unsigned n = samples(text, len, name, out);

	if (n)
		*out /= n;
	return n > 0;
}

bool kvs_prom_has_prefix(const char *text, size_t len, const char *prefix)
{
	const char *p = text, *end = text + len, *l;
	size_t n, pl = strlen(prefix);

	while (next_line(&p, end, &l, &n))
		if (n >= pl && l[0] != '#' && !memcmp(l, prefix, pl))
			return true;
	return false;
}
