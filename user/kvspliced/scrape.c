// SPDX-License-Identifier: MIT
/* The --metrics endpoint: one scrape a connection (GET /metrics), the
 * exposition (metrics.c) rendered from the maps and the controller's
 * counters. */
#include "scrape.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "conn.h"
#include "loop.h"
#include "metrics.h"
#include "pins.h"
#include "route_shares.h"

/* The controller's open descriptors and their limit, or -1 each. */
static void count_fds(long *open_fds, long *max_fds)
{
	struct rlimit rl;
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");

	*open_fds = *max_fds = -1;
	if (d) {
		*open_fds = 0;
		while ((e = readdir(d)))
			*open_fds += e->d_name[0] != '.';
		closedir(d);
		(*open_fds)--; /* the directory's own */
	}
	if (!getrlimit(RLIMIT_NOFILE, &rl))
		*max_fds = (long)rl.rlim_cur;
}

/* Renders the exposition from the maps and the controller's counters. */
static char *render_metrics(struct gw *g, size_t *len)
{
	const char *names[KVS_MAX_BACKENDS];
	uint64_t restarts[KVS_MAX_BACKENDS];
	struct kvs_backend be[KVS_MAX_BACKENDS];
	struct kvs_ttft ttft[KVS_MAX_BACKENDS];
	struct kvs_route_share shares[KVS_MAX_TENANTS];
	struct kvs_xdp_stats x;
	struct kvs_stats k;
	struct kvs_metrics_in in = {
		.k = &k,
		.c = &g->ctl,
		.be = be,
		.ttft = ttft,
		.names = names,
		.restarts = restarts,
		.nbackends = g->nslots,
		.clients = g->clients.count,
		.decide = &g->decide,
	};
	size_t cap = 65536, need;
	uint64_t now, at;
	char *buf;
	uint32_t b;

	if (kvs_read_kstats(g->dp.stats_fd, &k))
		memset(&k, 0, sizeof(k));
	for (b = 0; b < g->nslots; b++) {
		be[b] = g->dp.backends[b];
		if (g->dp.ttft)
			ttft[b] = g->dp.ttft[b];
		else
			memset(&ttft[b], 0, sizeof(ttft[b]));
		names[b] = g->be[b].present ? g->be[b].name : NULL;
		restarts[b] = g->be[b].restarts;
	}
	if (kvs_adm_stats(&g->adm, &x) == 0)
		in.x = &x;
	now = kvs_now_ns();
	in.routes = gw_routes_count(g, now, &at);
	in.routes_age_s = (double)(now - at) / 1e9;
	if (g->shares.per_tenant) {
		in.nshares = g->tenants.n + 1;
		for (uint32_t t = 0; t < in.nshares; t++)
			kvs_dp_share_read(&g->dp, t, &shares[t]);
		in.shares = shares;
	}
	count_fds(&in.open_fds, &in.max_fds);
	buf = malloc(cap);
	if (!buf)
		return NULL;
	need = kvs_metrics_render(buf, cap, &in);
	if (need >= cap) {
		char *bigger = realloc(buf, need + 1);

		if (!bigger) {
			free(buf);
			return NULL;
		}
		buf = bigger;
		kvs_metrics_render(buf, need + 1, &in);
	}
	*len = need;
	return buf;
}

enum scrape_req { SCRAPE_GET, SCRAPE_HEAD, SCRAPE_OTHER_METHOD, SCRAPE_OTHER_PATH };

/* What the request line asks: GET or HEAD of /metrics (a query string
 * ignored), another method on it, or another path. */
static enum scrape_req scrape_method(const char *req, size_t len)
{
	const char *sp = memchr(req, ' ', len < 16 ? len : 16);
	size_t at;

	if (!sp)
		return SCRAPE_OTHER_PATH;
	at = (size_t)(sp - req) + 1;
	if (len < at + 9 || memcmp(req + at, "/metrics", 8) ||
	    (req[at + 8] != ' ' && req[at + 8] != '?'))
		return SCRAPE_OTHER_PATH;
	if (at == 4 && !memcmp(req, "GET", 3))
		return SCRAPE_GET;
	if (at == 5 && !memcmp(req, "HEAD", 4))
		return SCRAPE_HEAD;
	return SCRAPE_OTHER_METHOD;
}

/* One scrape: answered once the request's head is in, then closed. */
static void on_scrape(struct gw *g, struct gw_conn *c)
{
	const char *req = (const char *)kvs_buf_head(&c->rx);
	enum scrape_req m;
	char hdr[256];
	size_t blen = 0;
	char *body = NULL;
	int n;

	if (!memmem(req, c->rx.len, "\r\n\r\n", 4) && !memmem(req, c->rx.len, "\n\n", 2)) {
		if (c->rx.len > 8192 || gw_arm_recv(g, c))
			gw_conn_close(g, c);
		return;
	}
	m = scrape_method(req, c->rx.len);
	if (m == SCRAPE_GET || m == SCRAPE_HEAD)
		body = render_metrics(g, &blen);
	if (body)
		n = snprintf(hdr, sizeof(hdr),
			     "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
			     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			     blen);
	else if (m == SCRAPE_OTHER_METHOD)
		n = snprintf(hdr, sizeof(hdr),
			     "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\n"
			     "Content-Length: 19\r\nConnection: close\r\n\r\ntry GET /metrics\r\n");
	else
		n = snprintf(hdr, sizeof(hdr),
			     "HTTP/1.1 404 Not Found\r\nContent-Length: 19\r\n"
			     "Connection: close\r\n\r\ntry GET /metrics\r\n");
	if (m == SCRAPE_HEAD) { /* the same head, no body */
		free(body);
		body = NULL;
	}
	/* A fresh socket's buffer takes a scrape whole; a peer that does not
	 * read it gets what fitted. */
	(void)!send(c->fd, hdr, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (body)
		(void)!send(c->fd, body, blen, MSG_DONTWAIT | MSG_NOSIGNAL);
	free(body);
	gw_conn_close(g, c);
}

static const struct gw_conn_ops scrape_ops = { .on_bytes = on_scrape, .on_hangup = gw_conn_drop };

void gw_scrape_on_accept(struct gw *g, struct io_uring_cqe *cqe)
{
	if (!(cqe->flags & IORING_CQE_F_MORE) && !g->quiescing && cqe->res != -ECANCELED)
		gw_rearm_accept(g, g->metrics_fd, OP_METRICS_ACCEPT, cqe->res);
	if (cqe->res >= 0)
		gw_service_conn(g, cqe->res, ROLE_METRICS, &scrape_ops);
}
