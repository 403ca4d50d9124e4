// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sse.h"

void kvs_sse_init(struct kvs_sse *s, size_t max)
{
	memset(s, 0, sizeof(*s));
	s->max = max;
}

void kvs_sse_free(struct kvs_sse *s)
{
	free(s->line);
	free(s->data);
	memset(s, 0, sizeof(*s));
}

bool kvs_sse_pending(const struct kvs_sse *s)
{
	return s->line_len || s->has_data;
}

/* Room for n more bytes plus a NUL in *buf, never beyond max. */
static int grow(char **buf, size_t *cap, size_t need, size_t max)
{
	size_t c;
	char *p;

	if (need > max)
		return -E2BIG;
	if (need + 1 <= *cap)
		return 0;
	c = *cap ? *cap : 256;
	while (c < need + 1)
		c *= 2;
	if (c > max + 1)
		c = max + 1;
	p = realloc(*buf, c);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = c;
	return 0;
}

static int dispatch(struct kvs_sse *s, kvs_sse_fn fn, void *ctx)
{
	int r = 0;

	/* The spec: an event whose data buffer is empty is not dispatched
	 * ("data:" alone, a keep-alive some servers send). */
	if (s->has_data && s->data_len) {
		s->data[s->data_len] = '\0';
		r = fn(ctx, s->event[0] ? s->event : "message", s->data, s->data_len);
	}
	s->data_len = 0;
	s->has_data = false;
	s->event[0] = '\0';
	return r;
}

/* One complete line (without its end). */
static int on_line(struct kvs_sse *s, const char *l, size_t n, kvs_sse_fn fn, void *ctx)
{
	const char *colon, *v;
	size_t fl, vl;
	int r;

	if (n == 0)
		return dispatch(s, fn, ctx);
	if (l[0] == ':')
		return 0;
	colon = memchr(l, ':', n);
	fl = colon ? (size_t)(colon - l) : n;
	v = colon ? colon + 1 : l + n;
	vl = n - (size_t)(v - l);
	if (vl && v[0] == ' ') {
		v++;
		vl--;
	}
	if (fl == 4 && !memcmp(l, "data", 4)) {
		size_t need = s->data_len + (s->has_data ? 1 : 0) + vl;

		r = grow(&s->data, &s->data_cap, need, s->max);
		if (r)
			return r;
		if (s->has_data)
			s->data[s->data_len++] = '\n';
		memcpy(s->data + s->data_len, v, vl);
		s->data_len += vl;
		s->has_data = true;
	} else if (fl == 5 && !memcmp(l, "event", 5)) {
		if (vl >= sizeof(s->event))
			vl = sizeof(s->event) - 1;
		memcpy(s->event, v, vl);
		s->event[vl] = '\0';
	}
	/* id and retry mean nothing for one response; unknown fields are
	 * ignored, as the spec says. */
	return 0;
}

int kvs_sse_feed(struct kvs_sse *s, const char *p, size_t n, kvs_sse_fn fn, void *ctx)
{
	const char *end = p + n;
	int r;

	while (p < end) {
		const char *cr, *lf, *eol;
		size_t len;

		if (s->skip_lf) {
			s->skip_lf = false;
			if (*p == '\n') {
				p++;
				continue;
			}
		}
		lf = memchr(p, '\n', (size_t)(end - p));
		cr = memchr(p, '\r', (size_t)((lf ? lf : end) - p));
		eol = cr ? cr : lf;
		len = (size_t)((eol ? eol : end) - p);
		if (!eol) { /* a partial line: keep it for the next feed */
			r = grow(&s->line, &s->line_cap, s->line_len + len, s->max);
			if (r)
				return r;
			memcpy(s->line + s->line_len, p, len);
			s->line_len += len;
			return 0;
		}
		if (s->line_len) {
			r = grow(&s->line, &s->line_cap, s->line_len + len, s->max);
			if (r)
				return r;
			memcpy(s->line + s->line_len, p, len);
			s->line_len += len;
			r = on_line(s, s->line, s->line_len, fn, ctx);
			s->line_len = 0;
		} else {
			if (len > s->max)
				return -E2BIG;
			r = on_line(s, p, len, fn, ctx);
		}
		if (r)
			return r;
		p = eol + 1;
		if (*eol == '\r')
			s->skip_lf = true;
	}
	return 0;
}
