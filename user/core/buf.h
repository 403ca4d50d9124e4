/* SPDX-License-Identifier: MIT */
/*
 * A growable byte queue with a hard cap: receive buffer for framing and send
 * queue for non-blocking writers. Appends beyond the cap fail with -ENOBUFS,
 * so a peer that stops reading cannot make its queue grow without bound.
 */
#ifndef KVS_BUF_H
#define KVS_BUF_H

#include <stddef.h>
#include <stdint.h>

struct kvs_buf {
	uint8_t *data;
	size_t off; /* first unconsumed byte */
	size_t len; /* bytes after off */
	size_t cap;
	size_t limit; /* most bytes it may hold; 0 = no limit */
};

void kvs_buf_init(struct kvs_buf *b, size_t limit);
void kvs_buf_free(struct kvs_buf *b);
/* Room for n more bytes at kvs_buf_tail(b); 0 or -ENOBUFS/-ENOMEM. */
int kvs_buf_reserve(struct kvs_buf *b, size_t n);
static inline uint8_t *kvs_buf_head(const struct kvs_buf *b)
{
	return b->data + b->off;
}
static inline uint8_t *kvs_buf_tail(const struct kvs_buf *b)
{
	return b->data + b->off + b->len;
}
/* Free bytes at the tail without growing. */
static inline size_t kvs_buf_room(const struct kvs_buf *b)
{
	return b->cap - b->off - b->len;
}
int kvs_buf_append(struct kvs_buf *b, const void *p, size_t n);
/* Marks n bytes written at the tail (after kvs_buf_reserve). */
void kvs_buf_commit(struct kvs_buf *b, size_t n);
void kvs_buf_consume(struct kvs_buf *b, size_t n);

/*
 * One recv() from fd into the tail of b, making room for up to chunk bytes
 * (less if the cap leaves less). Returns the bytes read, 0 at end of stream,
 * -EAGAIN when nothing is there, -ENOBUFS when b is full, or -errno.
 */
long kvs_buf_recv(struct kvs_buf *b, int fd, size_t chunk);

#endif
