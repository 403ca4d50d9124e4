// SPDX-License-Identifier: MIT
/*
 * A stop's clients (docs/PROTOCOL.md, "Closing"; docs/RUNBOOK.md, "Stop").
 * Closing a socket with bytes unread makes TCP send a reset, and a request
 * that crossed the close is then lost without an answer: the client sees
 * "connection reset", not the busy the stop promised. So each client
 * connection closes in steps, as a network server's lingering close does:
 *
 *   1. told: once it has nothing in flight, ERROR busy with req_id 0, "the
 *      gateway is stopping" (a connection-level ERROR, as the idle close's
 *      is): send nothing more here. Every request that still comes is
 *      answered busy, as during the whole drain.
 *   2. a client that knows this shuts down its sending side: the usual
 *      half-close (conn.c) closes it once its answers are out.
 *   3. one that does not is closed in its place once it has sent nothing
 *      for STOP_QUIET_MS, or at STOP_LINGER_MS after step 1 if it goes on
 *      sending (at a moment none of its answers is on its way; at twice
 *      that whatever): the gateway shuts its own sending side (a FIN
 *      after the answers), then reads and drops whatever still comes,
 *      which nobody can answer now, until the client closes, for
 *      LINGER_MS at most (gw_conn_linger, as every close of a client
 *      by the gateway ends).
 *
 * The FIN after step 1's ERROR is the signal at the protocol's level: a
 * request without an answer when it comes reached no backend.
 */
#include "stop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "conn.h"
#include "log.h"

#define STOP_QUIET_MS ERROR_GRACE_MS
#define STOP_LINGER_MS LINGER_MS

static const char goaway_msg[] =
	"kvsplice: the gateway is stopping; this connection closes: send no more on it";

/* Milliseconds since the client's last byte came (TCP's own record, which
 * both data paths keep: the kernel's parser reads the socket on one, the
 * controller on the other). */
static uint64_t quiet_ms(const struct gw_conn *c)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len))
		return UINT64_MAX;
	return ti.tcpi_last_data_recv;
}

static void tell(struct gw *g, struct gw_conn *c, uint64_t now)
{
	gw_send_notice(g, c->cookie, 0, KVS_E_BUSY, goaway_msg);
	c->goaway_ns = now;
	g->stop_told++;
	pr_debug("event=client_told_stopping conn=%llu", (unsigned long long)c->cookie);
}

/* Its answers are out (nothing in flight, quiet since): the gateway's FIN
 * follows them, and the client's close is awaited. */
static void linger(struct gw *g, struct gw_conn *c, uint64_t now, bool quiet)
{
	if (quiet)
		g->stop_quiet++;
	else
		g->stop_cut++;
	pr_debug("event=client_stop_closing conn=%llu quiet=%d", (unsigned long long)c->cookie,
		 quiet);
	gw_conn_linger(g, c, now); /* (may free c) */
}

void gw_stop_clients(struct gw *g, uint64_t now)
{
	for (uint32_t i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];
		uint64_t told_ns;
		bool busy, quiet;

		/* Rejected, closing, or half-closed: closed after its answers
		 * as it is (conn.c), with no reset: it sends nothing more. */
		if (!c || c->role != KVS_ROLE_CLIENT || c->closing || c->close_at_ns ||
		    c->half_closed)
			continue;
		/* In flight: at a backend, or (a client still sending) an
		 * answer on its way; once drained, only the latter. */
		busy = c->ops->inflight(g, c) != 0;
		if (!c->goaway_ns) {
			if (!busy || g->stop_drained_ns)
				tell(g, c, now);
			continue;
		}
		told_ns = now - c->goaway_ns;
		if (told_ns < STOP_QUIET_MS * 1000000ull)
			continue;
		quiet = quiet_ms(c) >= STOP_QUIET_MS;
		/* Its FIN after every answer: one still on its way would be
		 * lost; a client that never lets one be seen done is cut at
		 * twice the limit. */
		if ((!busy && (quiet || told_ns >= STOP_LINGER_MS * 1000000ull)) ||
		    told_ns >= 2 * STOP_LINGER_MS * 1000000ull)
			linger(g, c, now, quiet);
	}
}

uint32_t gw_stop_clients_open(const struct gw *g)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < g->conns_cap; i++)
		n += g->conns[i] && g->conns[i]->role == KVS_ROLE_CLIENT && !g->conns[i]->closing;
	return n;
}
