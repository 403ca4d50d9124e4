/* SPDX-License-Identifier: MIT */
/*
 * Server-sent events (text/event-stream, the WHATWG HTML spec's "event
 * stream interpretation"): splits what an inference server streams into
 * events. Lines end in CRLF, LF or CR; "data:" lines accumulate (joined with
 * LF), "event:" names the event, lines starting with ':' are comments, an
 * empty line dispatches. Pure: bytes in, callbacks out. An event or line
 * above the limit is refused rather than buffered without bound: what a
 * server sends is input like any other.
 */
#ifndef KVS_SSE_H
#define KVS_SSE_H

#include <stdbool.h>
#include <stddef.h>

/* Called once per event; a nonzero return stops kvs_sse_feed, which
 * returns it. data is NUL-terminated (len excludes the NUL). */
typedef int (*kvs_sse_fn)(void *ctx, const char *event, const char *data, size_t len);

struct kvs_sse {
	char *line; /* the line being read */
	size_t line_len, line_cap;
	char *data; /* the event's data so far */
	size_t data_len, data_cap;
	bool has_data;
	bool skip_lf; /* the last byte was a CR: a LF right after it is the same line end */
	char event[32];
	size_t max; /* largest line or event */
};

void kvs_sse_init(struct kvs_sse *s, size_t max);
void kvs_sse_free(struct kvs_sse *s);
/* 0, the callback's nonzero return, -E2BIG (a line or event above max) or
 * -ENOMEM. After a nonzero return the parser must not be fed again. */
int kvs_sse_feed(struct kvs_sse *s, const char *p, size_t n, kvs_sse_fn fn, void *ctx);
/* True if an event was cut off: bytes read after the last dispatch. */
bool kvs_sse_pending(const struct kvs_sse *s);

#endif
