// SPDX-License-Identifier: MIT
/* Request traces (JSONL): reading them, and each request's prompt. */
#include "trace.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvsplice/hash.h"
#include "prompt.h"

static const char *skip_ws(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

/* A JSON string (no escapes needed for the keys we read): returns the char
 * after the closing quote, the contents in [*s, *s + *len). */
static const char *parse_string(const char *p, const char **s, size_t *len)
{
	if (*p != '"')
		return NULL;
	*s = ++p;
	while (*p && *p != '"') {
		if (*p == '\\' && p[1])
			p++;
		p++;
	}
	if (*p != '"')
		return NULL;
	*len = (size_t)(p - *s);
	return p + 1;
}

static const char *parse_number(const char *p, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(p, &end);
	if (end == p || errno || !isfinite(*v))
		return NULL;
	return end;
}

/* An array of non-negative integers into r->ids (grown as needed). */
static const char *parse_ids(const char *p, struct kvs_trace_req *r)
{
	uint32_t cap = 0;

	if (*p != '[')
		return NULL;
	p = skip_ws(p + 1);
	if (*p == ']')
		return p + 1;
	for (;;) {
		char *end;
		unsigned long long v;

		if (!isdigit((unsigned char)*p))
			return NULL;
		errno = 0;
		v = strtoull(p, &end, 10);
		if (errno)
			return NULL;
		if (r->nids == cap) {
			uint64_t *n = realloc(r->ids, sizeof(uint64_t) * (cap ? 2 * cap : 64));

			if (!n)
				return NULL;
			r->ids = n;
			cap = cap ? 2 * cap : 64;
		}
		r->ids[r->nids++] = v;
		p = skip_ws(end);
		if (*p == ']')
			return p + 1;
		if (*p != ',')
			return NULL;
		p = skip_ws(p + 1);
	}
}

/* Skips a value we do not read (string, number, literal or flat array). */
static const char *skip_value(const char *p)
{
	const char *s;
	size_t len;
	double v;

	if (*p == '"')
		return parse_string(p, &s, &len);
	if (*p == '[') {
		int depth = 0;

		for (; *p; p++) {
			depth += *p == '[';
			depth -= *p == ']';
			if (!depth)
				return p + 1;
		}
		return NULL;
	}
	if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4))
		return p + 4;
	if (!strncmp(p, "false", 5))
		return p + 5;
	return parse_number(p, &v);
}

/* One line: 0, or a short reason it is not a record. */
static const char *parse_line(const char *p, struct kvs_trace_req *r, double *ts)
{
	bool have_ts = false, have_in = false, have_out = false, have_ids = false;
	double v;

	p = skip_ws(p);
	if (*p != '{')
		return "not a JSON object";
	p = skip_ws(p + 1);
	while (*p != '}') {
		const char *key;
		size_t klen;

		if (!(p = parse_string(p, &key, &klen)))
			return "expected a quoted key";
		p = skip_ws(p);
		if (*p != ':')
			return "expected ':' after a key";
		p = skip_ws(p + 1);
#define KEY(k) (klen == sizeof(k) - 1 && !memcmp(key, k, klen))
		if (KEY("timestamp") || KEY("input_length") || KEY("output_length")) {
			if (!(p = parse_number(p, &v)) || v < 0)
				return "lengths and timestamp must be non-negative numbers";
			if (KEY("timestamp")) {
				*ts = v;
				have_ts = true;
			} else if (KEY("input_length")) {
				if (v < 1 || v > UINT32_MAX / KVS_BYTES_PER_TOKEN)
					return "input_length out of range";
				r->input_tokens = (uint32_t)v;
				have_in = true;
			} else {
				if (v > UINT32_MAX)
					return "output_length out of range";
				r->output_tokens = v < 1 ? 1 : (uint32_t)v;
				have_out = true;
			}
		} else if (KEY("hash_ids")) {
			if (!(p = parse_ids(p, r)))
				return "hash_ids must be a list of non-negative integers";
			have_ids = true;
		} else if (!(p = skip_value(p))) {
			return "unreadable value";
		}
#undef KEY
		p = skip_ws(p);
		if (*p == ',')
			p = skip_ws(p + 1);
		else if (*p != '}')
			return "expected ',' or '}'";
	}
	if (*skip_ws(p + 1))
		return "text after the object";
	if (!have_ts || !have_in || !have_out || !have_ids)
		return "missing timestamp, input_length, output_length or hash_ids";
	if (r->nids > (r->input_tokens + KVS_TRACE_BLOCK_TOKENS - 1) / KVS_TRACE_BLOCK_TOKENS)
		return "more hash_ids than 512-token blocks of input";
	return NULL;
}

int kvs_trace_load(const char *path, uint32_t max, double speed, struct kvs_trace *t, char *err,
		   size_t errlen)
{
	FILE *f = fopen(path, "r");
	size_t cap = 0, lineno = 0;
	uint32_t rcap = 0;
	double last_ts = 0;
	char *line = NULL;
	int rc = 0;

	memset(t, 0, sizeof(*t));
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	while ((!max || t->n < max) && getline(&line, &cap, f) > 0) {
		struct kvs_trace_req r = { 0 };
		const char *why;
		double ts = 0;

		lineno++;
		if (!*skip_ws(line))
			continue; /* blank lines are no requests */
		why = parse_line(line, &r, &ts);
		if (!why && ts < last_ts)
			why = "timestamp goes back in time";
		if (why) {
			free(r.ids);
			snprintf(err, errlen, "%s:%zu: not a trace record: %s", path, lineno, why);
			rc = -EINVAL;
			goto out;
		}
		if (t->n == rcap) {
			struct kvs_trace_req *n =
				realloc(t->reqs, sizeof(*n) * (rcap ? 2 * rcap : 1024));

			if (!n) {
				free(r.ids);
				snprintf(err, errlen, "%s: out of memory", path);
				rc = -ENOMEM;
				goto out;
			}
			t->reqs = n;
			rcap = rcap ? 2 * rcap : 1024;
		}
		last_ts = ts;
		r.arrival_ms = ts / speed;
		if (r.input_tokens > t->max_input_tokens)
			t->max_input_tokens = r.input_tokens;
		t->reqs[t->n++] = r;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error", path);
		rc = -EIO;
	} else if (!t->n) {
		snprintf(err, errlen, "%s: no requests", path);
		rc = -ENODATA;
	}
out:
	free(line);
	fclose(f);
	if (rc) {
		kvs_trace_free(t);
		return rc;
	}
	return (int)t->n;
}

void kvs_trace_free(struct kvs_trace *t)
{
	for (uint32_t i = 0; t->reqs && i < t->n; i++)
		free(t->reqs[i].ids);
	free(t->reqs);
	memset(t, 0, sizeof(*t));
}

size_t kvs_trace_prompt(const struct kvs_trace_req *r, uint32_t req_index, uint8_t *buf)
{
	const size_t block = (size_t)KVS_TRACE_BLOCK_TOKENS * KVS_BYTES_PER_TOKEN;
	size_t len = (size_t)r->input_tokens * KVS_BYTES_PER_TOKEN, off, k;

	for (off = 0, k = 0; off < len; off += block, k++) {
		size_t n = len - off < block ? len - off : block;
		/* Distinct seed spaces: an id's text never equals a request's own. */
		uint64_t seed = k < r->nids ?
					0x7ace000000000000ull ^ r->ids[k] :
					0x0e1f000000000000ull ^ ((uint64_t)req_index << 20 | k);

		kvs_text_fill(seed, buf + off, n);
	}
	return len;
}
