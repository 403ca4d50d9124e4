// SPDX-License-Identifier: MIT
/*
 * The send queue (user/kvspliced/sendq.c) keeps a socket's bytes in order
 * across short sends: what a send left of the frozen buffer goes before
 * anything appended since, whatever the completions' timing, and the
 * hand-over's synchronous flush does the same.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "sendq.h"

#define UDATA 0x1234u

/* The send the last kick prepared (not submitted): its buffer and length. */
static const struct io_uring_sqe *last_sqe(const struct io_uring *ring)
{
	return &ring->sq.sqes[(ring->sq.sqe_tail - 1) & ring->sq.ring_mask];
}

static void fill(uint8_t *p, size_t n, uint32_t from)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((from + i) * 131u);
}

static void check(const uint8_t *p, size_t n, uint32_t from)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)((from + i) * 131u))
			fail_msg("byte %zu of the stream out of order", from + i);
}

/* A short send's rest goes first; the buffer appended meanwhile after it. */
static void short_send_rest_first(void **state)
{
	struct io_uring ring;
	struct gw_sendq q;
	uint8_t a[1000], b[300];
	const struct io_uring_sqe *sqe;

	(void)state;
	assert_int_equal(io_uring_queue_init(8, &ring, 0), 0);
	gw_sendq_init(&q, 1 << 20);
	fill(a, sizeof(a), 0);
	fill(b, sizeof(b), sizeof(a));

	assert_false(gw_sendq_busy(&q));
	assert_int_equal(kvs_buf_append(gw_sendq_buf(&q), a, sizeof(a)), 0);
	gw_sendq_kick(&ring, &q, 5, UDATA);
	assert_true(q.pending);
	sqe = last_sqe(&ring);
	assert_int_equal(sqe->len, sizeof(a));
	assert_int_equal(sqe->user_data, UDATA);

	/* While it is in flight, more is appended, and a kick does nothing. */
	assert_int_equal(kvs_buf_append(gw_sendq_buf(&q), b, sizeof(b)), 0);
	gw_sendq_kick(&ring, &q, 5, UDATA);
	assert_ptr_equal(last_sqe(&ring), sqe);

	/* 400 of the 1000 went: the next send is the other 600 of a. */
	assert_int_equal(gw_sendq_done(&ring, &q, 5, UDATA, 400), 0);
	sqe = last_sqe(&ring);
	assert_int_equal(sqe->len, 600);
	check((const uint8_t *)(uintptr_t)sqe->addr, 600, 400);

	/* Those went: then b. */
	assert_int_equal(gw_sendq_done(&ring, &q, 5, UDATA, 600), 0);
	sqe = last_sqe(&ring);
	assert_int_equal(sqe->len, sizeof(b));
	check((const uint8_t *)(uintptr_t)sqe->addr, sizeof(b), sizeof(a));

	assert_int_equal(gw_sendq_done(&ring, &q, 5, UDATA, sizeof(b)), 0);
	assert_false(gw_sendq_busy(&q));
	/* An error is handed back and consumes nothing. */
	assert_int_equal(kvs_buf_append(gw_sendq_buf(&q), a, 10), 0);
	gw_sendq_kick(&ring, &q, 5, UDATA);
	assert_int_equal(gw_sendq_done(&ring, &q, 5, UDATA, -EPIPE), -EPIPE);
	assert_true(gw_sendq_busy(&q));
	gw_sendq_free(&q);
	io_uring_queue_exit(&ring);
}

/* The synchronous flush (a hand-over) sends the frozen rest, then the rest. */
static void flush_sync_in_order(void **state)
{
	struct io_uring ring;
	struct gw_sendq q;
	uint8_t a[1000], b[300], got[1300];
	int sv[2];
	size_t n = 0;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(io_uring_queue_init(8, &ring, 0), 0);
	gw_sendq_init(&q, 1 << 20);
	fill(a, sizeof(a), 0);
	fill(b, sizeof(b), sizeof(a));
	assert_int_equal(kvs_buf_append(gw_sendq_buf(&q), a, sizeof(a)), 0);
	gw_sendq_kick(&ring, &q, sv[0], UDATA); /* prepared, never submitted */
	assert_int_equal(kvs_buf_append(gw_sendq_buf(&q), b, sizeof(b)), 0);
	/* 250 of a went; the send for the rest found no ring to go on. */
	q.pending = false;
	kvs_buf_consume(&q.out[q.cur ^ 1], 250);
	assert_int_equal(gw_sendq_flush_sync(&q, sv[0]), 0);
	assert_false(gw_sendq_busy(&q));
	while (n < sizeof(got) - 250) {
		ssize_t r = recv(sv[1], got + n, sizeof(got) - 250 - n, 0);

		assert_true(r > 0);
		n += (size_t)r;
	}
	check(got, n, 250);
	gw_sendq_free(&q);
	io_uring_queue_exit(&ring);
	close(sv[0]);
	close(sv[1]);
}

/* A connected TCP pair on loopback (io_uring's sends on it come back short
 * when the buffers are full; on a Unix socket they wait instead). */
static void tcp_pair(int sv[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
	sv[0] = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(sv[0], (struct sockaddr *)&a, sizeof(a)), 0);
	sv[1] = accept(l, NULL, NULL);
	assert_true(sv[1] >= 0);
	close(l);
}

/* Through a real socket with small buffers: short sends happen, appends
 * keep coming, and the reader gets every byte once, in order. */
static void real_short_sends(void **state)
{
	enum { TOTAL = 4 << 20, STEP = 70000 };
	struct io_uring ring;
	struct gw_sendq q;
	uint8_t *src = malloc(TOTAL), *dst = malloc(TOTAL);
	int sv[2], small = 4096, sends = 0, shorts = 0;
	size_t appended = 0, got = 0, rounds = 0;

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	fill(src, TOTAL, 0);
	tcp_pair(sv);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	/* As the controller has its sockets: a send takes what fits. */
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	assert_int_equal(io_uring_queue_init(8, &ring, 0), 0);
	gw_sendq_init(&q, 64 << 20);
	while (got < TOTAL) {
		struct io_uring_cqe *cqe;
		ssize_t r;

		if (appended < TOTAL) {
			size_t n = TOTAL - appended < STEP ? TOTAL - appended : STEP;

			assert_int_equal(kvs_buf_append(gw_sendq_buf(&q), src + appended, n), 0);
			appended += n;
			gw_sendq_kick(&ring, &q, sv[0], UDATA);
		}
		io_uring_submit(&ring);
		while (io_uring_peek_cqe(&ring, &cqe) == 0) {
			int res = cqe->res;

			io_uring_cqe_seen(&ring, cqe);
			sends++;
			shorts += res >= 0 && (size_t)res < q.out[q.cur ^ 1].len;
			assert_int_equal(gw_sendq_done(&ring, &q, sv[0], UDATA, res), 0);
		}
		/* The reader lags (every fourth round), so the sender's
		 * buffer fills and sends take only what fits. */
		if (++rounds % 4 && appended < TOTAL)
			continue;
		r = recv(sv[1], dst + got, TOTAL - got, 0);
		if (r > 0)
			got += (size_t)r;
		else
			assert_true(r < 0 && errno == EAGAIN);
	}
	check(dst, got, 0);
	assert_true(sends > 1);
	/* Else this run did not test what it is for. */
	assert_true(shorts > 0);
	gw_sendq_free(&q);
	io_uring_queue_exit(&ring);
	close(sv[0]);
	close(sv[1]);
	free(src);
	free(dst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(short_send_rest_first),
		cmocka_unit_test(flush_sync_in_order),
		cmocka_unit_test(real_short_sends),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
