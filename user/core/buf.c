// SPDX-License-Identifier: MIT
/* A growable byte queue with a hard cap (receive and send buffers). */
#include "buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

void kvs_buf_init(struct kvs_buf *b, size_t limit)
{
	memset(b, 0, sizeof(*b));
	b->limit = limit;
}

void kvs_buf_free(struct kvs_buf *b)
{
	free(b->data);
	kvs_buf_init(b, b->limit);
}

int kvs_buf_reserve(struct kvs_buf *b, size_t n)
{
	size_t need = b->len + n, ncap;
	uint8_t *p;

	if (b->limit && need > b->limit)
		return -ENOBUFS;
	if (b->off + need <= b->cap)
		return 0;
	/* Slide the live bytes down before growing: a framer that consumes
	 * frame by frame keeps reusing the same memory. */
	if (b->off && need <= b->cap) {
		memmove(b->data, b->data + b->off, b->len);
		b->off = 0;
		return 0;
	}
	ncap = b->cap ? b->cap : 4096;
	while (ncap < need)
		ncap *= 2;
	if (b->limit && ncap > b->limit)
		ncap = b->limit;
	p = malloc(ncap);
	if (!p)
		return -ENOMEM;
	if (b->len)
		memcpy(p, b->data + b->off, b->len);
	free(b->data);
	b->data = p;
	b->cap = ncap;
	b->off = 0;
	return 0;
}

int kvs_buf_append(struct kvs_buf *b, const void *p, size_t n)
{
	int err = kvs_buf_reserve(b, n);

	if (err)
		return err;
	if (n)
		memcpy(kvs_buf_tail(b), p, n);
	b->len += n;
	return 0;
}

void kvs_buf_commit(struct kvs_buf *b, size_t n)
{
	b->len += n;
}

void kvs_buf_consume(struct kvs_buf *b, size_t n)
{
	if (n >= b->len) {
		b->off = 0;
		b->len = 0;
		return;
	}
	b->off += n;
	b->len -= n;
}

long kvs_buf_recv(struct kvs_buf *b, int fd, size_t chunk)
{
	ssize_t n;

	if (kvs_buf_reserve(b, chunk) && kvs_buf_room(b) == 0)
		return -ENOBUFS;
	do
		n = recv(fd, kvs_buf_tail(b), kvs_buf_room(b), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	kvs_buf_commit(b, (size_t)n);
	return n;
}
