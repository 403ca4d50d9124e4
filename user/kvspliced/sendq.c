// SPDX-License-Identifier: MIT
/*
 * A socket's outgoing bytes, sent in order from two buffers: one being sent
 * (frozen: the kernel reads it), one being appended to. The inject socket
 * and every userspace-path connection send this way.
 */
#include "sendq.h"

#include "loop.h"

#include <errno.h>
#include <sys/socket.h>

void gw_sendq_init(struct gw_sendq *q, size_t limit)
{
	kvs_buf_init(&q->out[0], limit);
	kvs_buf_init(&q->out[1], limit);
	q->cur = 0;
	q->pending = false;
}

void gw_sendq_free(struct gw_sendq *q)
{
	kvs_buf_free(&q->out[0]);
	kvs_buf_free(&q->out[1]);
}

bool gw_sendq_busy(const struct gw_sendq *q)
{
	return q->pending || q->out[0].len || q->out[1].len;
}

/*
 * What a short send left of the frozen buffer goes first; only then is the
 * other buffer frozen and sent. (Sending the other one first, as a kick
 * after a completion that found no free SQE once could, would put bytes
 * appended later ahead of older ones.)
 */
void gw_sendq_kick(struct io_uring *ring, struct gw_sendq *q, int fd, uint64_t udata)
{
	struct kvs_buf *b = &q->out[q->cur ^ 1];
	struct io_uring_sqe *sqe;

	if (q->pending)
		return;
	if (!b->len)
		b = &q->out[q->cur];
	if (!b->len)
		return;
	sqe = gw_sqe(ring);
	if (!sqe)
		return; /* the tick kicks again */
	if (b == &q->out[q->cur])
		q->cur ^= 1;
	io_uring_prep_send(sqe, fd, kvs_buf_head(b), b->len, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, udata);
	q->pending = true;
}

int gw_sendq_done(struct io_uring *ring, struct gw_sendq *q, int fd, uint64_t udata, int res)
{
	q->pending = false;
	if (res < 0)
		return res;
	kvs_buf_consume(&q->out[q->cur ^ 1], (size_t)res);
	gw_sendq_kick(ring, q, fd, udata);
	return 0;
}

int gw_sendq_flush_sync(struct gw_sendq *q, int fd)
{
	for (int i = 1; i <= 2; i++) { /* the frozen buffer's rest, then the other */
		struct kvs_buf *b = &q->out[q->cur ^ (i & 1)];

		while (b->len) {
			ssize_t w = send(fd, kvs_buf_head(b), b->len, MSG_NOSIGNAL);

			if (w < 0 && errno != EINTR)
				return -errno;
			if (w > 0)
				kvs_buf_consume(b, (size_t)w);
		}
	}
	return 0;
}
