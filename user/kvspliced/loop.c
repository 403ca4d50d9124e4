// SPDX-License-Identifier: MIT
/* The io_uring ring: submission entries, and completions by op code. */
#include "loop.h"

#include <errno.h>
#include <sys/socket.h>

struct io_uring_sqe *gw_sqe(struct io_uring *ring)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe) {
		/* Ring full: flush what is queued and retry once. */
		io_uring_submit(ring);
		sqe = io_uring_get_sqe(ring);
	}
	return sqe;
}

struct gw_conn *gw_conn_of(struct gw *g, uint64_t data)
{
	uint32_t id = (uint32_t)data, gen = (uint32_t)(data >> 32) & 0xffffff;
	struct gw_conn *c = id < g->conns_cap ? g->conns[id] : NULL;

	return c && (c->gen & 0xffffff) == gen ? c : NULL;
}

void gw_loop_dispatch(struct gw *g, struct io_uring_cqe *cqe)
{
	uint64_t op = io_uring_cqe_get_data64(cqe) >> 56;

	if (op < GW_OPS && g->on_op[op])
		g->on_op[op](g, cqe);
}

int gw_arm_accept(struct gw *g, int fd, uint64_t op)
{
	struct io_uring_sqe *sqe = gw_get_sqe(g);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_multishot_accept(sqe, fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, ud(op, NULL));
	return 0;
}

int gw_rearm_accept(struct gw *g, int fd, uint64_t op, int res)
{
	static const struct __kernel_timespec later = { .tv_nsec = 100000000 };
	struct io_uring_sqe *t, *a;

	if (res >= 0)
		return gw_arm_accept(g, fd, op);
	if (io_uring_sq_space_left(&g->ring) < 2)
		io_uring_submit(&g->ring);
	if (io_uring_sq_space_left(&g->ring) < 2)
		return -EBUSY;
	/* A timeout that succeeds when it expires, linked to the accept: the
	 * accept starts once it has. Its own completion has op 0: ignored. */
	t = io_uring_get_sqe(&g->ring);
	/* (liburing 2.3 takes it non-const; the kernel only reads it) */
	io_uring_prep_timeout(t, (struct __kernel_timespec *)&later, 0,
			      IORING_TIMEOUT_ETIME_SUCCESS);
	io_uring_sqe_set_data64(t, 0);
	t->flags |= IOSQE_IO_LINK;
	a = io_uring_get_sqe(&g->ring);
	io_uring_prep_multishot_accept(a, fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(a, ud(op, NULL));
	return 0;
}
