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

/* The next sample line of the family name (nl its length): the line in
 * [*l, *l + *n), the name's length in *k (where its labels or value
 * begin). false past the end. */
static bool next_sample(const char **p, const char *end, const char *name, size_t nl,
			const char **l, size_t *n, size_t *k)
{
	while (next_line(p, end, l, n)) {
		if (!*n || (*l)[0] == '#')
			continue;
		*k = name_len(*l, *n);
		if (*k == nl && !memcmp(*l, name, nl))
			return true;
	}
	return false;
}

/* The value after the name and labels, or false: none, one that is no
 * finite number, or one too long to be a number. Label values are quoted
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
	if (!k || (i < n && l[i] != ' ' && l[i] != '\t'))
		return false;
	*v = strtod(num, &e);
	return *e == '\0' && isfinite(*v);
}

/* The samples of one name. */
struct family {
	unsigned count;	 /* samples whose value reads */
	double sum, min; /* of those */
	bool unreadable; /* a sample whose value does not */
};

static void samples(const char *text, size_t len, const char *name, struct family *f)
{
	const char *p = text, *end = text + len, *l;
	size_t n, nl = strlen(name), k;
	double v;

	*f = (struct family){ 0 };
	while (next_sample(&p, end, name, nl, &l, &n, &k)) {
		if (!value_of(l, n, k, &v)) {
			/* not skipped: the sum of the other label sets
			 * would pass for the whole */
			f->unreadable = true;
			continue;
		}
		if (!f->count || v < f->min)
			f->min = v;
		f->sum += v;
		f->count++;
	}
}

static enum kvs_prom_got got(const struct family *f)
{
	if (f->unreadable || !isfinite(f->sum)) /* (or their sum past a double's) */
		return KVS_PROM_UNREADABLE;
	return f->count ? KVS_PROM_OK : KVS_PROM_NONE;
}

enum kvs_prom_got kvs_prom_read(const char *text, size_t len, const char *name, double *out)
{
	struct family f;

	samples(text, len, name, &f);
	if (got(&f) == KVS_PROM_OK)
		*out = f.sum;
	return got(&f);
}

/* The next blank-separated word of [l + *i, l + n) into [*w, *w + *wn). */
static bool word(const char *l, size_t n, size_t *i, const char **w, size_t *wn)
{
	size_t from;

	while (*i < n && (l[*i] == ' ' || l[*i] == '\t'))
		(*i)++;
	from = *i;
	while (*i < n && l[*i] != ' ' && l[*i] != '\t')
		(*i)++;
	*w = l + from;
	*wn = *i - from;
	return *wn > 0;
}

static bool word_is(const char *w, size_t wn, const char *s)
{
	return wn == strlen(s) && !memcmp(w, s, wn);
}

/* Whether a "# TYPE" line names name's family as something other than a
 * counter. The family of name is name itself (the 0.0.4 text format,
 * which the Prometheus clients serve unless asked for OpenMetrics) or,
 * for name_total, name without _total (OpenMetrics). "untyped" and
 * "unknown" say nothing; any other type, in any line, is not a counter. */
static bool typed_not_counter(const char *text, size_t len, const char *name)
{
	const char *p = text, *end = text + len, *l, *w;
	size_t n, wn, i, nl = strlen(name);
	size_t fl = nl > 6 && !strcmp(name + nl - 6, "_total") ? nl - 6 : nl;
	bool other = false;

	while (next_line(&p, end, &l, &n)) {
		i = 1;
		if (!n || l[0] != '#' || !word(l, n, &i, &w, &wn) || !word_is(w, wn, "TYPE") ||
		    !word(l, n, &i, &w, &wn) || (wn != nl && wn != fl) || memcmp(w, name, wn))
			continue;
		if (!word(l, n, &i, &w, &wn))
			continue;
		other |= !word_is(w, wn, "counter") && !word_is(w, wn, "untyped") &&
			 !word_is(w, wn, "unknown");
	}
	return other;
}

enum kvs_prom_got kvs_prom_counter(const char *text, size_t len, const char *name, double *out)
{
	struct family f;

	samples(text, len, name, &f);
	if (got(&f) == KVS_PROM_NONE)
		return KVS_PROM_NONE;
	if (typed_not_counter(text, len, name))
		return KVS_PROM_NOT_COUNTER;
	if (f.count && f.min < 0) /* no counter's value */
		f.unreadable = true;
	if (got(&f) == KVS_PROM_OK)
		*out = f.sum;
	return got(&f);
}

bool kvs_prom_sum(const char *text, size_t len, const char *name, double *out)
{
	return kvs_prom_read(text, len, name, out) == KVS_PROM_OK;
}

/* name's samples into *f; true when they all read. */
static bool readable(const char *text, size_t len, const char *name, struct family *f)
{
	samples(text, len, name, f);
	return got(f) == KVS_PROM_OK;
}

bool kvs_prom_mean(const char *text, size_t len, const char *name, double *out)
{
	struct family f;

	if (!readable(text, len, name, &f))
		return false;
	*out = f.sum / f.count;
	return true;
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

/* What a label set says of one key. */
enum label_got {
	LABEL_BROKEN = -1, /* the label set does not parse */
	LABEL_ABSENT,
	LABEL_FOUND,
};

/* Label key's value, its quoted text with any escapes left in, in
 * [*s, *s + *sn), from the label set l[i..n) (at its '{', or none). */
static enum label_got label_find(const char *l, size_t n, size_t i, const char *key, const char **s,
				 size_t *sn)
{
	size_t kl = strlen(key), from;

	if (i >= n || l[i] != '{')
		return LABEL_ABSENT;
	for (i++; i < n && l[i] != '}';) {
		while (i < n && (l[i] == ' ' || l[i] == ','))
			i++;
		if (i < n && l[i] == '}') /* a trailing comma */
			break;
		from = i;
		while (i < n && l[i] != '=')
			i++;
		if (i + 1 >= n || l[i + 1] != '"')
			return LABEL_BROKEN;
		bool mine = i - from == kl && !memcmp(l + from, key, kl);

		i += 2;
		from = i;
		while (i < n && l[i] != '"')
			i += l[i] == '\\' ? 2 : 1;
		if (i >= n)
			return LABEL_BROKEN;
		if (mine) {
			*s = l + from;
			*sn = i - from;
			return LABEL_FOUND;
		}
		i++;
	}
	return i < n ? LABEL_ABSENT : LABEL_BROKEN;
}

/* Label key's value in the label set l[i..n) (at its '{'), read as a
 * number, in *v. A number never holds an escape, so a value with one is
 * not one. */
static bool label_num(const char *l, size_t n, size_t i, const char *key, double *v)
{
	const char *s;
	size_t sn;
	char num[64], *e;

	if (label_find(l, n, i, key, &s, &sn) != LABEL_FOUND || !sn || sn >= sizeof(num) ||
	    memchr(s, '\\', sn))
		return false;
	memcpy(num, s, sn);
	num[sn] = '\0';
	*v = strtod(num, &e);
	return *e == '\0' && isfinite(*v);
}

bool kvs_prom_label_product_max(const char *text, size_t len, const char *name, const char *a,
				const char *b, double *out)
{
	const char *p = text, *end = text + len, *l;
	size_t n, nl = strlen(name), k;
	unsigned count = 0;
	double va, vb, x;

	*out = 0;
	while (next_sample(&p, end, name, nl, &l, &n, &k)) {
		/* a broken sample: the others would pass for the whole */
		if (!value_of(l, n, k, &x) || !label_num(l, n, k, a, &va) ||
		    !label_num(l, n, k, b, &vb))
			return false;
		if (!count || va * vb > *out)
			*out = va * vb;
		count++;
	}
	return count > 0;
}

bool kvs_prom_group_max_sum(const char *text, size_t len, const char *name, const char *label,
			    double *out)
{
	struct group {
		const char *s; /* label's value, or NULL for the samples without it */
		size_t sn;
		double max;
	} g[KVS_PROM_GROUPS_MAX];
	const char *p = text, *end = text + len, *l, *s;
	size_t n, nl = strlen(name), k, sn, groups = 0, j;
	enum label_got lg;
	double v;

	while (next_sample(&p, end, name, nl, &l, &n, &k)) {
		/* a broken sample: the others would pass for the whole */
		lg = label_find(l, n, k, label, &s, &sn);
		if (!value_of(l, n, k, &v) || lg == LABEL_BROKEN)
			return false;
		if (lg == LABEL_ABSENT) {
			s = NULL;
			sn = 0;
		}
		for (j = 0; j < groups; j++)
			if (g[j].sn == sn &&
			    (g[j].s == s || (g[j].s && s && !memcmp(g[j].s, s, sn))))
				break;
		if (j == groups) {
			if (groups == KVS_PROM_GROUPS_MAX)
				return false;
			g[groups++] = (struct group){ .s = s, .sn = sn, .max = v };
		} else if (v > g[j].max) {
			g[j].max = v;
		}
	}
	*out = 0;
	for (j = 0; j < groups; j++)
		*out += g[j].max;
	return groups > 0 && isfinite(*out);
}
