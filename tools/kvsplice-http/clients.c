// SPDX-License-Identifier: MIT
/*
 * The client connections: how many are open, against --max-connections,
 * how many from each source, against --max-source-conns, and each
 * request's deadline to arrive whole, --request-timeout.
 * --idle-timeout is libevent's time between two bytes, so without a
 * deadline a client sending a byte of its headers now and then kept its
 * connection, and its descriptor, for ever (slowloris).
 *
 * libevent 2.1 tells a server of a connection only when its first request
 * is complete, and of its end only through the close callback of an
 * evhttp_connection already known. Its one hook at accept is the one that
 * makes the connection's bufferevent (evhttp_set_bevcb), called before the
 * connection exists: the bufferevent is made here, held (a reference), and
 * the connection it was given to is adopted just after the accept
 * callback returns, before libevent reads a byte from it. Adopting finds
 * the connection as the bufferevent's callback argument (libevent sets
 * its callbacks on it, with the connection, as it starts reading), counts
 * it or refuses it, and starts its deadline.
 *
 * Without a per-source limit one client could hold every one of
 * --max-connections (idle, or slow senders reconnecting at each
 * deadline) and keep everyone else out with 503s; past
 * --max-source-conns (an IPv4 address, an IPv6 /64: user/core/sources.h)
 * a source's next connection is answered 429, which the openai libraries
 * retry after a back-off, and closed. A proxy or load balancer in front
 * is one source for all its clients: --trusted-source leaves it
 * uncounted.
 *
 * The deadline runs from the accept, stops when the request is whole and
 * handed to the request callback (clients_request_in), and runs again,
 * once the response is sent, from the first byte of the connection's next
 * request: neither a long response nor a kept-alive connection idle
 * between requests is cut (the latter is --idle-timeout's). At the
 * deadline, or over the limit, the client gets a whole response written
 * to its socket (408, 429, 503) and the connection is closed: libevent, in the
 * middle of reading a request, could not answer it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "front.h"
#include "netutil.h"
#include "oaierr.h"
#include "sources.h"

/* A warning repeated by every refused or cut connection would flood the
 * log: the first at once, then one line in this many seconds, with the
 * totals. */
#define SAY_EVERY_S 10

struct client {
	struct clients *cl;
	struct evhttp_connection *evcon;
	evutil_socket_t fd;
	struct event *deadline; /* pending while a request arrives */
	struct event *wake;	/* after a response: the next request's first byte */
	client_close_fn gone;	/* calls.c's, while a call is in flight */
	void *gone_arg;
	struct kvs_source_key src;
	bool src_counted; /* against --max-source-conns */
	bool arriving;	  /* a request is coming in (its deadline runs) */
};

struct say_gate {
	bool said;
	time_t last;
};

struct clients {
	struct event_base *base;
	const struct front_config *cfg;
	struct front_stats *st;
	struct client **byfd; /* the open ones, by descriptor */
	size_t nbyfd;
	uint32_t open;
	struct bufferevent **pending; /* made for a connection not adopted yet */
	size_t npending, cap_pending;
	struct event *adopt;
	struct kvs_sources sources;
	struct lingers *lingers; /* closes that wait for the client's (linger.c) */
	struct kvs_cidr trusted[FRONT_MAX_TRUSTED];
	uint32_t ntrusted;
	struct say_gate full_said, timeout_said, source_said;
};

static bool say_now(struct say_gate *g)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (g->said && ts.tv_sec - g->last < SAY_EVERY_S)
		return false;
	g->said = true;
	g->last = ts.tv_sec;
	return true;
}

/* The response, best effort: a socket that takes nothing more (its
 * buffer full of a client that reads nothing) is closed without it. */
static void write_raw(evutil_socket_t fd, int status, const char *reason, const char *message,
		      const char *type, const char *code)
{
	char buf[1024];
	int n = oai_err_response(buf, sizeof(buf), status, reason, message, type, code);

	if (n > 0 && send(fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		pr_debug("event=raw_reply_unsent status=%d err=\"%s\"", status, strerror(errno));
}

static void client_free(struct client *c)
{
	struct clients *cl = c->cl;

	if (c->fd >= 0 && (size_t)c->fd < cl->nbyfd && cl->byfd[c->fd] == c)
		cl->byfd[c->fd] = NULL;
	if (c->src_counted)
		kvs_sources_del(&cl->sources, &c->src);
	cl->open--;
	if (c->deadline)
		event_free(c->deadline);
	if (c->wake)
		event_free(c->wake);
	free(c);
}

/* The connection is going (libevent's close callback): the client is
 * forgotten before its descriptor is closed and given to another. */
static void on_close(struct evhttp_connection *evcon, void *arg)
{
	struct client *c = arg;
	client_close_fn gone = c->gone;
	void *gone_arg = c->gone_arg;

	/* libevent closing with a request still coming in (its own 413 for
	 * a body past 4 x --max-body, which it does not read; the body may
	 * be on its way with nothing queued yet), or with bytes unread: not
	 * closed under them */
	lingers_add(c->cl->lingers, c->fd, c->arriving);
	client_free(c);
	if (gone)
		gone(evcon, gone_arg);
}

static void arm_deadline(struct client *c)
{
	struct timeval tv = { (time_t)c->cl->cfg->request_s, 0 };

	c->arriving = true;
	if (c->cl->cfg->request_s)
		evtimer_add(c->deadline, &tv);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	struct clients *cl = c->cl;
	char msg[160], *peer = NULL;
	ev_uint16_t port = 0;

	(void)fd;
	(void)what;
	cl->st->request_timeouts++;
	snprintf(msg, sizeof(msg),
		 "kvsplice-http: the request did not arrive whole within %u s (--request-timeout)",
		 cl->cfg->request_s);
	if (say_now(&cl->timeout_said)) {
		evhttp_connection_get_peer(c->evcon, &peer, &port);
		pr_info("event=request_timeout peer=%s:%u request_timeout_s=%u timeouts=%llu",
			peer ? peer : "?", port, cl->cfg->request_s,
			(unsigned long long)cl->st->request_timeouts);
	}
	/* Bytes waiting to go out are libevent's own answer to a request it
	 * refused (a 413, then a close): the 408 would cut into them. */
	if (!evbuffer_get_length(
		    bufferevent_get_output(evhttp_connection_get_bufferevent(c->evcon))))
		write_raw(c->fd, 408, "Request Timeout", msg, "invalid_request_error",
			  "request_timeout");
	/* on_close lingers (a request arriving) and frees c */
	evhttp_connection_free(c->evcon);
}

/* The next request's first byte (or the client's close): its deadline
 * starts. */
static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	arm_deadline(arg);
}

/* Every connection is adopted before libevent reads from it, so one with
 * a request is known, unless it was made when memory ran out. */
static struct client *client_of(struct clients *cl, struct evhttp_connection *evcon)
{
	struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	struct client *c = fd >= 0 && (size_t)fd < cl->nbyfd ? cl->byfd[fd] : NULL;

	return c && c->evcon == evcon ? c : NULL;
}

/* The response went out whole; libevent now waits for the connection's
 * next request. The request's argument is the clients, not the client:
 * a connection that closed first never calls it. */
static void on_sent(struct evhttp_request *req, void *arg)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct client *c = evcon ? client_of(arg, evcon) : NULL;
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;

	if (c && !c->cl->cfg->request_s)
		c->arriving = true; /* (no wake to tell when the next begins) */
	if (!c || !c->cl->cfg->request_s)
		return;
	if (bev && evbuffer_get_length(bufferevent_get_input(bev)))
		arm_deadline(c); /* pipelined: it has begun */
	else
		event_add(c->wake, NULL);
}

/* ---- adoption ---- */

static void refuse(struct clients *cl, struct evhttp_connection *evcon, evutil_socket_t fd)
{
	char msg[160];

	cl->st->connections_refused++;
	if (say_now(&cl->full_said))
		pr_warn("event=connections_full max_connections=%u refused=%llu "
			"hint=\"new connections get 503 and are closed; raise --max-connections "
			"(and ulimit -n) or add a front\"",
			cl->cfg->max_connections, (unsigned long long)cl->st->connections_refused);
	snprintf(msg, sizeof(msg),
		 "kvsplice-http: %u connections are open, the most it keeps (--max-connections)",
		 cl->cfg->max_connections);
	write_raw(fd, 503, "Service Unavailable", msg, "server_error", "too_many_connections");
	lingers_add(cl->lingers, fd, true); /* its request is likely on its way */
	evhttp_connection_free(evcon);
}

/* Over --max-source-conns: 429, which clients retry after a back-off. */
static void refuse_source(struct clients *cl, struct evhttp_connection *evcon, evutil_socket_t fd)
{
	char msg[192], *peer = NULL;
	ev_uint16_t port = 0;

	cl->st->connections_refused_source++;
	if (say_now(&cl->source_said)) {
		evhttp_connection_get_peer(evcon, &peer, &port);
		pr_warn("event=source_connections_full peer=%s max_source_conns=%u refused=%llu "
			"hint=\"its new connections get 429 and are closed; a proxy or load "
			"balancer in front needs --trusted-source, a NAT a higher "
			"--max-source-conns\"",
			peer ? peer : "?", cl->cfg->max_source_conns,
			(unsigned long long)cl->st->connections_refused_source);
	}
	snprintf(msg, sizeof(msg),
		 "kvsplice-http: this address holds %u connections, the most one source may "
		 "(--max-source-conns); retry later",
		 cl->cfg->max_source_conns);
	write_raw(fd, 429, "Too Many Requests", msg, "rate_limit_error",
		  "too_many_source_connections");
	lingers_add(cl->lingers, fd, true);
	evhttp_connection_free(evcon);
}

/*
 * The connection on fd counted against its source: 1, k set; 0 when it is
 * not counted (no limit, a trusted source, an address with no source, out
 * of memory: let in rather than refused for the front's own fault);
 * -EUSERS when its source holds --max-source-conns already.
 */
static int source_take(struct clients *cl, evutil_socket_t fd, struct kvs_source_key *k)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int n;

	if (!cl->cfg->max_source_conns || getpeername(fd, (struct sockaddr *)&ss, &len) ||
	    kvs_cidr_contains(cl->trusted, cl->ntrusted, &ss) || !kvs_source_of(&ss, k))
		return 0;
	n = kvs_sources_add(&cl->sources, k);
	if (n < 0)
		return 0;
	if ((uint32_t)n > cl->cfg->max_source_conns) {
		kvs_sources_del(&cl->sources, k);
		return -EUSERS;
	}
	return 1;
}

static int track(struct clients *cl, struct client *c)
{
	if ((size_t)c->fd >= cl->nbyfd) {
		size_t n = (size_t)c->fd * 2 + 64;
		struct client **t = realloc(cl->byfd, n * sizeof(*t));

		if (!t)
			return -ENOMEM;
		memset(t + cl->nbyfd, 0, (n - cl->nbyfd) * sizeof(*t));
		cl->byfd = t;
		cl->nbyfd = n;
	}
	cl->byfd[c->fd] = c;
	return 0;
}

static void adopt_one(struct clients *cl, struct bufferevent *bev)
{
	bufferevent_data_cb rd = NULL;
	void *arg = NULL;
	struct evhttp_connection *evcon;
	evutil_socket_t fd = bufferevent_getfd(bev);
	struct kvs_source_key src = { 0 };
	struct client *c;
	int counted;

	bufferevent_getcb(bev, &rd, NULL, NULL, &arg);
	evcon = arg;
	/* No callbacks: libevent freed the connection already (it failed to
	 * set it up), or never made it. */
	if (!rd || !evcon || fd < 0 || evhttp_connection_get_bufferevent(evcon) != bev)
		return;
	if (cl->open >= cl->cfg->max_connections) {
		refuse(cl, evcon, fd);
		return;
	}
	counted = source_take(cl, fd, &src);
	if (counted < 0) {
		refuse_source(cl, evcon, fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c && counted)
		kvs_sources_del(&cl->sources, &src);
	if (c) {
		c->cl = cl;
		c->evcon = evcon;
		c->fd = fd;
		c->src = src;
		c->src_counted = counted > 0;
		c->deadline = evtimer_new(cl->base, on_deadline, c);
		c->wake = event_new(cl->base, fd, EV_READ, on_wake, c);
	}
	if (!c || !c->deadline || !c->wake || track(cl, c)) {
		/* Out of memory: refused rather than served uncounted, with
		 * no deadline. */
		if (c) {
			cl->open++; /* client_free counts it out */
			client_free(c);
		}
		write_raw(fd, 503, "Service Unavailable", "kvsplice-http: out of memory",
			  "server_error", NULL);
		lingers_add(cl->lingers, fd, true);
		evhttp_connection_free(evcon);
		return;
	}
	cl->open++;
	evhttp_connection_set_closecb(evcon, on_close, c);
	arm_deadline(c);
}

/* Runs just after the accept callback that made the connections (an
 * event made active from it runs before the loop next polls). */
static void on_adopt(evutil_socket_t fd, short what, void *arg)
{
	struct clients *cl = arg;
	size_t i;

	(void)fd;
	(void)what;
	for (i = 0; i < cl->npending; i++) {
		adopt_one(cl, cl->pending[i]);
		bufferevent_decref(cl->pending[i]); /* frees one libevent freed */
	}
	cl->npending = 0;
}

/* libevent's hook for a new connection: its bufferevent, with no
 * descriptor yet. NULL lets libevent make one itself (uncounted). */
static struct bufferevent *on_new_bev(struct event_base *base, void *arg)
{
	struct clients *cl = arg;
	struct bufferevent *bev;

	if (cl->npending == cl->cap_pending) {
		size_t n = cl->cap_pending ? cl->cap_pending * 2 : 64;
		struct bufferevent **t = realloc(cl->pending, n * sizeof(*t));

		if (!t)
			return NULL;
		cl->pending = t;
		cl->cap_pending = n;
	}
	bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!bev)
		return NULL;
	bufferevent_incref(bev); /* valid until adopted, whatever libevent does */
	cl->pending[cl->npending++] = bev;
	event_active(cl->adopt, EV_TIMEOUT, 1);
	return bev;
}

/* ---- the API ---- */

struct clients *clients_new(struct event_base *base, struct evhttp *http,
			    const struct front_config *cfg, struct front_stats *st)
{
	struct clients *cl = calloc(1, sizeof(*cl));

	if (!cl)
		return NULL;
	cl->base = base;
	cl->cfg = cfg;
	cl->st = st;
	for (cl->ntrusted = 0; cl->ntrusted < cfg->ntrusted; cl->ntrusted++) {
		struct kvs_cidr *t = &cl->trusted[cl->ntrusted];

		if (kvs_cidr_parse(cfg->trusted[cl->ntrusted], &t->family, t->addr,
				   &t->prefixlen)) {
			free(cl);
			return NULL;
		}
	}
	cl->adopt = event_new(base, -1, 0, on_adopt, cl);
	cl->lingers = lingers_new(base, st);
	if (!cl->adopt || !cl->lingers) {
		if (cl->adopt)
			event_free(cl->adopt);
		lingers_free(cl->lingers);
		free(cl);
		return NULL;
	}
	evhttp_set_bevcb(http, on_new_bev, cl);
	return cl;
}

/* After evhttp_free: every connection's close has freed its client. */
void clients_free(struct clients *cl)
{
	size_t i;

	if (!cl)
		return;
	for (i = 0; i < cl->npending; i++)
		bufferevent_decref(cl->pending[i]);
	event_free(cl->adopt);
	lingers_free(cl->lingers);
	free(cl->pending);
	free(cl->byfd);
	kvs_sources_free(&cl->sources);
	free(cl);
}

void clients_request_in(struct clients *cl, struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct client *c = evcon ? client_of(cl, evcon) : NULL;

	if (!c)
		return;
	c->arriving = false;
	evtimer_del(c->deadline);
	event_del(c->wake);
	evhttp_request_set_on_complete_cb(req, on_sent, cl);
}

void clients_on_close(struct clients *cl, struct evhttp_connection *evcon, client_close_fn fn,
		      void *arg)
{
	struct client *c = client_of(cl, evcon);

	if (!c) { /* not counted: libevent's own callback will do */
		evhttp_connection_set_closecb(evcon, fn, arg);
		return;
	}
	c->gone = fn;
	c->gone_arg = arg;
}

uint32_t clients_open(const struct clients *cl)
{
	return cl->open;
}

uint32_t clients_sources(const struct clients *cl)
{
	return cl->sources.n;
}
