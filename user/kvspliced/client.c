// SPDX-License-Identifier: MIT
/*
 * Clients accepted, each onto the data path new clients take (the kernel's
 * splice or the userspace path); each stays on its path until it closes.
 *
 * Out of descriptors (EMFILE, ENFILE), an accept fails and leaves the
 * client in the listen backlog, so re-arming it at once fails again at
 * once, for ever. Instead the accept waits (an io_uring timeout, doubling
 * from ACCEPT_WAIT_MIN_MS to ACCEPT_WAIT_MAX_MS, or until a connection
 * closes), the failures are logged once per ACCEPT_LOG_NS with their
 * count, and the clients waiting meanwhile are accepted on a reserve
 * descriptor, answered busy and closed, rather than left hanging
 * (docs/RUNBOOK.md, "Descriptors and idle clients").
 */
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "kpath.h"
#include "log.h"
#include "loop.h"
#include "upath.h"

#define ACCEPT_WAIT_MIN_MS 10
#define ACCEPT_WAIT_MAX_MS 1000
#define ACCEPT_LOG_NS (10 * 1000000000ull)
/* Clients answered busy per failed accept: a bound on one batch's work. */
#define SHED_MAX 256

static void open_reserve(struct gw *g)
{
	if (g->acc.reserve_fd < 0)
		g->acc.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static unsigned long long nofile(void)
{
	struct rlimit rl;

	return getrlimit(RLIMIT_NOFILE, &rl) ? 0 : (unsigned long long)rl.rlim_cur;
}

/* A shell's soft limit (often 1024) would bound the gateway far below what
 * the hard limit allows; systemd's unit sets both (LimitNOFILE=). */
static void raise_nofile(void)
{
	struct rlimit rl;
	rlim_t was;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return;
	was = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	if (!setrlimit(RLIMIT_NOFILE, &rl))
		pr_info("event=fd_limit_raised from=%llu to=%llu", (unsigned long long)was,
			(unsigned long long)rl.rlim_cur);
}

int gw_clients_accept(struct gw *g)
{
	int err;

	/* the wait arms it when it ends; a stop accepts no one (gw.c) */
	if (g->accepting || g->acc.waiting || g->stopping)
		return 0;
	err = gw_arm_accept(g, g->listen_fd, OP_ACCEPT);
	g->accepting = err == 0;
	return err;
}

int gw_clients_open(struct gw *g)
{
	raise_nofile();
	open_reserve(g);
	if (g->acc.reserve_fd < 0)
		pr_warn("event=reserve_fd_failed err=\"%s\" hint=\"clients are not answered busy "
			"when descriptors run out\"",
			strerror(errno));
	return gw_clients_accept(g);
}

void gw_clients_close(struct gw *g)
{
	if (g->acc.reserve_fd >= 0)
		close(g->acc.reserve_fd);
	g->acc.reserve_fd = -1;
	kvs_sources_free(&g->sources);
}

static void log_failures(struct gw *g, uint64_t now)
{
	pr_warn("event=accept_failed err=\"%s\" count=%llu shed=%llu nofile=%llu retry_ms=%u "
		"hint=\"out of descriptors: clients waiting were answered busy; raise LimitNOFILE "
		"(ulimit -n), or lower --max-source-conns or --idle-timeout-ms\"",
		strerror(g->acc.last_err), (unsigned long long)g->acc.fails,
		(unsigned long long)g->acc.shed, nofile(), g->acc.delay_ms);
	g->acc.fails = g->acc.shed = 0;
	g->acc.logged_ns = now;
}

/* Out of descriptors: the reserve let go for as long as it takes to tell
 * the clients waiting in the backlog that the gateway is full, then held
 * again. Only while no accept is armed (the multishot ended with the
 * error): nothing else takes from the backlog, so a poll that says a client
 * waits means accept4 will not block. */
static uint32_t shed_waiting(struct gw *g)
{
	struct pollfd p = { .fd = g->listen_fd, .events = POLLIN };
	uint32_t n = 0;

	if (g->acc.reserve_fd < 0 || g->accepting)
		return 0;
	close(g->acc.reserve_fd);
	g->acc.reserve_fd = -1;
	while (n < SHED_MAX && poll(&p, 1, 0) == 1 && (p.revents & POLLIN)) {
		int fd = accept4(g->listen_fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0)
			break;
		gw_refuse_direct(fd, KVS_E_BUSY,
				 "kvsplice: gateway out of descriptors; retry later");
		close(fd);
		n++;
	}
	open_reserve(g);
	return n;
}

/* The accept again after a wait that doubles each failure in a row. */
static void wait_then_accept(struct gw *g)
{
	struct io_uring_sqe *sqe = gw_get_sqe(g);
	uint32_t d = g->acc.delay_ms ? 2 * g->acc.delay_ms : ACCEPT_WAIT_MIN_MS;

	if (!sqe) /* the tick re-arms the accept */
		return;
	g->acc.delay_ms = d < ACCEPT_WAIT_MAX_MS ? d : ACCEPT_WAIT_MAX_MS;
	g->acc.ts.tv_sec = g->acc.delay_ms / 1000;
	g->acc.ts.tv_nsec = (long long)(g->acc.delay_ms % 1000) * 1000000;
	io_uring_prep_timeout(sqe, &g->acc.ts, 0, 0);
	io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT_RETRY, NULL));
	g->acc.waiting = true;
	g->acc.fd_freed = false;
	g->acc.resume_asked = false;
}

static void accept_failed(struct gw *g, int err)
{
	uint64_t now = kvs_now_ns();
	uint32_t shed = err == EMFILE || err == ENFILE ? shed_waiting(g) : 0;

	g->ctl.accept_failed++;
	g->ctl.clients_shed += shed;
	g->acc.fails++;
	g->acc.shed += shed;
	g->acc.last_err = err;
	if (!g->quiescing)
		wait_then_accept(g);
	if (!g->acc.logged_ns || now - g->acc.logged_ns >= ACCEPT_LOG_NS)
		log_failures(g, now);
}

void gw_client_on_retry(struct gw *g, struct io_uring_cqe *cqe)
{
	/* Expired (-ETIME) or removed because a descriptor freed: either way,
	 * accept again. */
	g->acc.waiting = false;
	if (g->quiescing)
		return;
	open_reserve(g);
	gw_clients_accept(g);
}

void gw_clients_resume(struct gw *g)
{
	struct io_uring_sqe *sqe;

	if (!g->acc.waiting || !g->acc.fd_freed || g->acc.resume_asked)
		return;
	sqe = gw_get_sqe(g);
	if (!sqe)
		return;
	io_uring_prep_timeout_remove(sqe, ud(OP_ACCEPT_RETRY, NULL), 0);
	io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, NULL));
	g->acc.resume_asked = true;
}

void gw_clients_tick(struct gw *g, uint64_t now)
{
	if (g->acc.fails && now - g->acc.logged_ns >= ACCEPT_LOG_NS)
		log_failures(g, now);
	/* An accept neither armed nor waiting (no submission entry was free
	 * when it should have been): armed now. */
	if (!g->accepting && !g->acc.waiting && !g->quiescing && g->listen_fd >= 0)
		gw_clients_accept(g);
}

/* Over --max-source-conns: told so on the socket, closed. */
static void refuse_source(struct gw *g, struct gw_conn *c)
{
	char msg[112];

	g->ctl.clients_over_source++;
	snprintf(msg, sizeof(msg),
		 "kvsplice: too many connections from this address (at most %u); retry later",
		 g->cfg->max_source_conns);
	pr_debug("event=client_over_source conn=%llu", (unsigned long long)c->cookie);
	gw_refuse_direct(c->fd, KVS_E_BUSY, msg);
	gw_conn_close(g, c);
}

static void client_accepted(struct gw *g, int fd)
{
	struct gw_conn *c;
	int err;

	c = gw_conn_new(g, fd, KVS_ROLE_CLIENT, gw_kpath_conn_ops(KVS_ROLE_CLIENT));
	if (!c) {
		close(fd);
		return;
	}
	g->ctl.clients_accepted++;
	if (gw_client_bind(g, c) == -EUSERS) {
		refuse_source(g, c);
		return;
	}
	err = kvs_idmap_put(&g->clients, c->cookie, c);
	if (!err && g->user_path)
		err = gw_up_client(g, c);
	else if (!err)
		err = gw_kpath_client(g, c);
	if (err == -EOPNOTSUPP) {
		/* The kernel splices only established sockets: this client
		 * closed or half-closed before it was accepted. Its request
		 * cannot be spliced; say so, on the socket directly. */
		g->ctl.clients_early_closed++;
		pr_debug("event=client_closed_before_accept conn=%llu",
			 (unsigned long long)c->cookie);
		gw_answer_direct(c->fd, c->cookie, KVS_E_INTERNAL,
				 "kvsplice: connection shut down before the gateway accepted it; "
				 "half-close only after the answer has started");
		gw_conn_close(g, c);
		return;
	}
	if (err) {
		pr_warn("event=client_setup_failed conn=%llu err=\"%s\"",
			(unsigned long long)c->cookie, strerror(-err));
		gw_conn_close(g, c);
		return;
	}
	pr_debug("event=client_accepted conn=%llu fd=%d", (unsigned long long)c->cookie, c->fd);
}

void gw_client_on_accept(struct gw *g, struct io_uring_cqe *cqe)
{
	bool ended = !(cqe->flags & IORING_CQE_F_MORE);

	if (ended)
		g->accepting = false;
	if (cqe->res == -ECANCELED || g->stopping) /* handing over; stopping */
		return;
	if (cqe->res < 0) {
		accept_failed(g, -cqe->res);
		return;
	}
	g->acc.delay_ms = 0;	    /* the next failure waits the least again */
	if (ended && !g->quiescing) /* the multishot stopped all the same */
		gw_clients_accept(g);
	client_accepted(g, cqe->res);
}
