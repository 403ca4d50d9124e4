/* SPDX-License-Identifier: MIT */
/*
 * kvsplice-http: the types its files share. OpenAI API clients talk HTTP/1.1
 * to the front; each request becomes one KVS1 REQUEST, its body in canonical
 * form (canon.c), multiplexed by request id over a few KVS1 connections to
 * the gateway ("links"); what comes back (the server's own stream events or
 * response, verbatim) is written to the client as it arrives. One thread,
 * one libevent loop for both sides: a CHUNK is written to its HTTP client in
 * the callback that read it.
 *
 * Files: main.c (options, the loop), calls.c (the HTTP side: endpoints,
 * requests in flight, replies), clients.c (the client connections: their
 * number, each request's deadline), links.c (the KVS1 side: connections,
 * frames in and out, reconnects), and the pure canon.c and oaierr.c.
 * Calls run one way: main calls calls, clients and links; calls calls
 * clients and links; clients and links call no other file (frames reach
 * calls.c through the handler main gives it).
 */
#ifndef KVS_HTTP_FRONT_H
#define KVS_HTTP_FRONT_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/http.h>

#include "codec.h"
#include "idmap.h"
#include "log.h"

#define FRONT_MAX_GATEWAYS 16
#define FRONT_MAX_MODELS 32
#define FRONT_MAX_TRUSTED 64 /* --trusted-source CIDRs */

enum front_tenant {
	FRONT_TENANT_NONE,	    /* cache_salt 0 for every request */
	FRONT_TENANT_AUTHORIZATION, /* a hash of the Authorization header */
	FRONT_TENANT_HEADER,	    /* a hash of --tenant-header's value */
};

struct front_config {
	const char *listen;
	const char *gateways[FRONT_MAX_GATEWAYS];
	uint32_t ngateways;
	const char *models[FRONT_MAX_MODELS]; /* what /v1/models lists */
	uint32_t nmodels;
	uint32_t links_per_gateway;
	uint32_t link_inflight;	   /* requests in flight on one link, at most */
	uint32_t max_inflight;	   /* requests in the front (sent or waiting) */
	uint32_t max_body;	   /* bytes of a request body */
	uint32_t max_frame;	   /* the gateway's --max-frame */
	uint32_t max_buffered;	   /* response bytes a slow client may leave unread */
	uint32_t idle_s;	   /* an HTTP connection idle this long is closed */
	uint32_t request_s;	   /* a request must arrive whole within (0: no limit) */
	uint32_t max_connections;  /* client connections open at once */
	uint32_t max_source_conns; /* of them from one source (0: no limit) */
	const char *trusted[FRONT_MAX_TRUSTED]; /* CIDRs not counted against it */
	uint32_t ntrusted;
	int tenant; /* enum front_tenant */
	const char *tenant_header;
	const char *port_file;
	enum kvs_log_level level;
};

/* Figures, for /health's body and the log line at exit. */
struct front_stats {
	uint64_t requests, streamed, completed, errors, cancelled, rejected_busy;
	uint64_t bad_requests, link_failures, chunks, chunk_bytes;
	uint64_t connections_refused, request_timeouts;
	uint64_t connections_refused_source; /* over --max-source-conns */
	uint64_t retried;		     /* refused at once by a gateway, sent to another */
	uint64_t closes_lingered;	     /* closed after the client's close (linger.c) */
};

struct link;

/* A frame for a request (calls.c handles it; links.c calls it). */
typedef void (*link_frame_fn)(void *ctx, struct link *l, const struct kvs_msg *m,
			      const uint8_t *payload);
/* A link broke, or its connect failed: every request it carried is lost
 * (calls.c answers them, and the waiting ones if no link is left). */
typedef void (*link_lost_fn)(void *ctx, struct link *l);
/* A link (re)connected: requests waiting for one can go. */
typedef void (*link_ready_fn)(void *ctx);

/* A gateway's record of refusing requests at once (links_refused). */
struct gw_health {
	uint32_t refused;    /* in a row, since it last served one */
	uint64_t refused_ns; /* the last refusal (kvs_now_ns) */
	uint64_t until_ns;   /* shunned until then */
};

struct links {
	struct event_base *base;
	struct link **all;
	uint32_t n;
	struct gw_health *gws; /* one per --gateway */
	uint32_t ngws;
	uint32_t max_frame, inflight_cap;
	link_frame_fn on_frame;
	link_lost_fn on_lost;
	link_ready_fn on_ready;
	void *ctx;
	struct event *retry; /* reconnects the links that are down */
};

/* links.c */
/* Starts (on_frame, on_lost, on_ready and ctx set in ls first)
 * links_per_gateway connections to each gateway, without blocking: each
 * is up when on_ready says so; those that fail are retried every 500 ms.
 * 0 or -errno. */
int links_open(struct links *ls, struct event_base *base, const struct front_config *cfg);
void links_close(struct links *ls);
/* The connected link with the fewest requests in flight below the cap, or
 * NULL: not one of avoid's gateway (avoid may be NULL), nor of a gateway
 * shunned at now while another has a link up. */
struct link *links_pick(struct links *ls, const struct link *avoid, uint64_t now);
/* Whether a gateway other than avoid's has a link up or connecting. */
bool links_other_live(const struct links *ls, const struct link *avoid);
/* l's gateway failed a request before any answer (it has no backend up,
 * or is stopping): shunned from now, longer at each refusal in a row.
 * Nothing with a single gateway. */
void links_refused(struct links *ls, const struct link *l, uint64_t now);
/* l's gateway began to answer a request sent at sent_ns: no longer
 * shunned, if it was sent after the last refusal (a gateway that stops
 * refuses new requests while it still serves those it took before). */
void links_served(struct links *ls, const struct link *l, uint64_t sent_ns);
/* Links up that take new requests (not going: links_going). */
uint32_t links_up(const struct links *ls);
/* Links up whose gateway said it closes them (it is stopping): they
 * carry their requests to their answers, and take no new one. */
uint32_t links_going(const struct links *ls);
/* Links whose connect is under way. */
uint32_t links_connecting(const struct links *ls);
/* Sends a frame; the link counts a REQUEST in flight until its END or
 * ERROR comes back (a CANCELled one's ERROR cancelled included). 0 or
 * -errno (the link is then broken: on_lost follows; or, -ENOTCONN, its
 * sending side is shut: it was going, with nothing in flight). */
int link_send(struct link *l, const struct kvs_msg *m, const void *payload, uint32_t len);

/* linger.c */
/* Sockets lingering at once; past this one is closed at once. Each holds
 * a descriptor outside --max-connections (main.c's ulimit sizing counts
 * them). */
#define FRONT_LINGER_MAX 1024
struct lingers;
struct lingers *lingers_new(struct event_base *base, struct front_stats *st);
/* Closes the sockets still lingering. */
void lingers_free(struct lingers *lg);
/* fd is about to be closed (libevent's, or the caller's), its response
 * written: if the client may still be sending (bytes unread, or with
 * quiet_too nothing either way), the socket is kept, shut down for
 * writing (a FIN after the response), and read and dropped until the
 * client closes, for 5 s at most: closed with bytes unread, it would
 * reset, and the client might never see the response. */
void lingers_add(struct lingers *lg, evutil_socket_t fd, bool quiet_too);

/* clients.c */
struct clients;
/* What a connection's close calls (libevent's close callback's type). */
typedef void (*client_close_fn)(struct evhttp_connection *evcon, void *arg);
/* Counts http's connections from now on (it sets http's bufferevent
 * callback), refusing those over cfg->max_connections and, from one
 * source, over cfg->max_source_conns, and gives each request
 * cfg->request_s to arrive whole. NULL when out of memory (or a
 * cfg->trusted CIDR that does not parse: main.c checked them). */
struct clients *clients_new(struct event_base *base, struct evhttp *http,
			    const struct front_config *cfg, struct front_stats *st);
/* After evhttp_free. */
void clients_free(struct clients *cl);
/* The request is whole, in the request callback: its deadline stops until
 * its response is sent and the connection's next request begins. */
void clients_request_in(struct clients *cl, struct evhttp_request *req);
/* fn(evcon, arg) when the connection closes; fn NULL: nothing. One at a
 * time (the connection's close callback is the clients'). */
void clients_on_close(struct clients *cl, struct evhttp_connection *evcon, client_close_fn fn,
		      void *arg);
/* Client connections open now. */
uint32_t clients_open(const struct clients *cl);
/* Sources holding a counted connection now. */
uint32_t clients_sources(const struct clients *cl);

/* calls.c */
struct calls;
struct calls *calls_new(struct event_base *base, const struct front_config *cfg, struct links *ls,
			struct clients *cl, struct front_stats *st);
void calls_free(struct calls *cs);
/* The HTTP side's handlers: register with evhttp_set_gencb. */
void calls_on_http(struct evhttp_request *req, void *arg);
void calls_on_frame(void *ctx, struct link *l, const struct kvs_msg *m, const uint8_t *payload);
void calls_on_lost(void *ctx, struct link *l);
void calls_on_ready(void *ctx);

#endif
